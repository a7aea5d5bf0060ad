"""`python -m benchmarks loopback`: the transfer engine against Debian's iperf3 on loopback,
where no path limits either, so the figure is what the tool itself can move.

Like with like: each tool runs as two processes, its receiver (`tcpwizard serve`, `iperf3
-s`) in one and its sender (`tcpwizard transfer --modes autotune`, `iperf3 -c`) in the
other, as between two hosts; the same stream count, the same length, the client sending;
both figures are the receiver's bytes over the sending time. Runs alternate between the two
tools, so a load that comes and goes on a shared machine falls on both; the table gives
every run and the medians.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from tcpwizard.measure.wire.spec import MAX_STREAMS

Tool = Literal["tcpwizard", "iperf3"]
SERVE_START_S = 0.8  # serve imports the package before it listens
IPERF3_START_S = 0.3
TARGET_RATIO = 0.9


@dataclass(frozen=True)
class LoopbackRow:
    streams: int
    ours_mbps: tuple[float, ...]
    iperf3_mbps: tuple[float, ...]

    @property
    def ours(self) -> float:
        return statistics.median(self.ours_mbps)

    @property
    def iperf3(self) -> float:
        return statistics.median(self.iperf3_mbps)

    @property
    def ratio(self) -> float:
        return self.ours / self.iperf3 if self.iperf3 > 0 else 0.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _with_server(
    server: list[str], client: Callable[[int], list[str]], wait_s: float, seconds: float
) -> str:
    """The client's stdout, with the server running in its own process meanwhile."""
    port = _free_port()
    proc = subprocess.Popen(
        [*server, str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        time.sleep(wait_s)
        done = subprocess.run(
            client(port), capture_output=True, text=True, timeout=seconds + 60, check=False
        )
        return done.stdout
    finally:
        proc.kill()
        proc.wait()


def run_once(tool: Tool, streams: int, seconds: float) -> float:
    """One loopback transfer of `tool` with `streams` streams: the receiver's Mbit/s."""
    if tool == "tcpwizard":
        serve = [sys.executable, "-m", "tcpwizard", "serve", "--bind", "127.0.0.1", "--port"]

        def ours(port: int) -> list[str]:
            argv = [sys.executable, "-m", "tcpwizard", "transfer", "127.0.0.1"]
            argv += ["--port", str(port), "--modes", "autotune", "--streams", str(streams)]
            return [*argv, "--direction", "up", "--duration", f"{seconds:g}s", "--json"]

        out = _with_server(serve, ours, SERVE_START_S, seconds)
        try:
            mode = json.loads(out)["transfer"]["modes"][0]
            return float(mode["throughput_mbps"] or 0.0)
        except (ValueError, KeyError, IndexError, TypeError):
            return 0.0

    def theirs(port: int) -> list[str]:
        argv = ["iperf3", "-c", "127.0.0.1", "-p", str(port), "-J", "-t", f"{seconds:g}"]
        return [*argv, "-P", str(streams)]

    out = _with_server(["iperf3", "-s", "-1", "-p"], theirs, IPERF3_START_S, seconds)
    try:
        return float(json.loads(out)["end"]["sum_received"]["bits_per_second"]) / 1e6
    except (ValueError, KeyError, TypeError):
        return 0.0


def measure(
    streams: Sequence[int] = (1, 4),
    runs: int = 3,
    seconds: float = 3.0,
    say: Callable[[str], None] = lambda _m: None,
) -> list[LoopbackRow]:
    """`runs` rounds; in each, every stream count, tcpwizard then iperf3."""
    ours: dict[int, list[float]] = {n: [] for n in streams}
    theirs: dict[int, list[float]] = {n: [] for n in streams}
    for i in range(runs):
        for n in streams:
            ours[n].append(run_once("tcpwizard", n, seconds))
            theirs[n].append(run_once("iperf3", n, seconds))
            say(f"round {i + 1}, {n} streams: {ours[n][-1]:.0f} vs {theirs[n][-1]:.0f} Mbit/s")
    return [LoopbackRow(n, tuple(ours[n]), tuple(theirs[n])) for n in streams]


def iperf3_version() -> str:
    try:
        done = subprocess.run(["iperf3", "--version"], capture_output=True, text=True, check=False)
    except OSError:
        return "iperf3 (not found)"
    return done.stdout.split("(")[0].strip() or "iperf3"


def render(rows: Sequence[LoopbackRow], seconds: float) -> str:
    runs = max((len(r.ours_mbps) for r in rows), default=0)
    lines = [
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; kernel {platform.release()}, "
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at the end; "
        f"{iperf3_version()}; {runs} runs of {seconds:g} s each, alternating; tcpwizard "
        "autotune (serve + transfer) against iperf3 -s + iperf3 -c, the client sending.",
        "",
        "| streams | tcpwizard Gbit/s (median; runs) | iperf3 Gbit/s (median; runs) | ratio |",
        "|---:|---|---|---:|",
    ]
    for r in rows:

        def cell(median: float, values: Sequence[float]) -> str:
            return f"{median / 1e3:.1f}; " + ", ".join(f"{v / 1e3:.1f}" for v in values)

        lines.append(
            f"| {r.streams} | {cell(r.ours, r.ours_mbps)} | {cell(r.iperf3, r.iperf3_mbps)} "
            f"| {r.ratio:.2f} |"
        )
    worst = min((r.ratio for r in rows), default=0.0)
    lines += ["", f"Lowest ratio {worst:.2f} (target >= {TARGET_RATIO})."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks loopback")
    p.add_argument("--streams", default="1,4", help="stream counts, e.g. 1,4,16")
    p.add_argument("--runs", type=int, default=3, help="runs per tool and stream count")
    p.add_argument("--seconds", type=float, default=3.0, help="length of each run")
    a = p.parse_args(argv)
    try:
        counts = [int(x) for x in a.streams.split(",") if x]
    except ValueError:
        counts = []
    if not counts or any(not 1 <= n <= MAX_STREAMS for n in counts):
        print(f"error: --streams takes counts 1-{MAX_STREAMS}, e.g. 1,4", file=sys.stderr)
        return 2
    if not 1 <= a.runs <= 20 or not 0.5 <= a.seconds <= 60:
        print("error: --runs 1-20, --seconds 0.5-60", file=sys.stderr)
        return 2
    rows = measure(counts, a.runs, a.seconds, say=lambda m: print(m, file=sys.stderr))
    print(render(rows, a.seconds))
    return 0
