"""`lab bench --transfer`: every transfer mode against iperf3 on an emulated path.

Runs `tcpwizard transfer` on host a against `tcpwizard serve` on host b, then iperf3 with
the equivalent buffer setting on the same path in the same run (`-w` for fixed buffers,
none for autotune; DRS is compared with autotuned iperf3, the best the kernel does alone),
and prints a table with the ratios the issue's performance targets are stated in.

bench_transfer() runs on a Lab the caller built; run_bench_transfer() builds its own.
"""

from __future__ import annotations

import json
import os
import platform
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from tcpwizard.context import Context
from tcpwizard.exitcodes import ExitCode, PermissionRequired
from tcpwizard.lab import Lab, LabSpec
from tcpwizard.lab.serving import SERVE_PORT, serving
from tcpwizard.lab.tools import iperf3_tcp
from tcpwizard.measure import buffers
from tcpwizard.measure.model import Mode
from tcpwizard.measure.transfer import static_request

ALL_MODES: tuple[Mode, ...] = ("untuned", "autotune", "static", "overprovisioned", "drs")
TCP_GOODPUT_SHARE = 1448 / 1500


@dataclass(frozen=True)
class BenchRow:
    mode: Mode
    streams: int
    mbps: float
    max_buffer_bytes: int
    mbps_per_mb: float
    retransmits: int
    iperf_mbps: float | None  # iperf3 with the equivalent buffer setting
    iperf_setting: str
    error: str | None = None
    forced: bool = False  # buffers set with SO_*BUFFORCE past rmem_max/wmem_max
    iperf_window: int | None = None  # the -w of the reference run (None: autotuning)

    @property
    def vs_iperf(self) -> float | None:
        if self.iperf_mbps is None or self.iperf_mbps <= 0:
            return None
        return self.mbps / self.iperf_mbps


def _iperf3(lab: Lab, seconds: float, streams: int, window: int | None) -> float:
    """Receiver-side goodput of one iperf3 run a -> b, Mbit/s."""
    extra = ("-P", str(streams)) + (("-w", str(window)) if window is not None else ())
    return iperf3_tcp(lab, "a", seconds, extra).receiver_bps / 1e6


def _transfer(
    lab: Lab, mode: Mode, seconds: float, streams: int, rate_bps: float, force: bool = False
) -> dict[str, Any]:
    argv = [sys.executable, "-m", "tcpwizard", "transfer", lab.addr("b")]
    argv += ["--port", str(SERVE_PORT), "--modes", mode, "--streams", str(streams)]
    argv += ["--duration", f"{seconds:g}s", "--json"] + (["--force-buffers"] if force else [])
    argv += ["--rtt", f"{lab.rtt_s * 1000:g}ms", "--bandwidth", f"{rate_bps:g}"]
    done = lab.run("a", argv, capture_output=True, text=True, timeout=seconds + 60)
    try:
        doc: dict[str, Any] = json.loads(done.stdout)["transfer"]["modes"][0]
    except (ValueError, KeyError, IndexError):
        return {"error": done.stderr.strip()[-300:] or "no output"}
    return doc


def iperf_window(
    mode: Mode, rtt_s: float, rate_bps: float, limits: buffers.HostBufferLimits
) -> int | None:
    """The `iperf3 -w` that sets the buffers `mode` sets (None: no -w, autotuning)."""
    if mode == "untuned":
        return buffers.UNTUNED_BYTES
    if mode == "static":
        return static_request(rtt_s, rate_bps)
    if mode == "overprovisioned":
        return min(limits.rmem_max, limits.wmem_max)
    return None


def lab_limits(lab: Lab) -> buffers.HostBufferLimits:
    """The receiver's buffer limits as seen inside the lab (tcp_rmem is per namespace;
    rmem_max may be the host's, read-only in the lab)."""

    def ints(key: str) -> list[int]:
        return [int(x) for x in lab.sysctl("b", key).split()]

    r, w = ints("net.ipv4.tcp_rmem"), ints("net.ipv4.tcp_wmem")
    return buffers.HostBufferLimits(
        rmem_max=ints("net.core.rmem_max")[0],
        wmem_max=ints("net.core.wmem_max")[0],
        tcp_rmem=(r[0], r[1], r[2]),
        tcp_wmem=(w[0], w[1], w[2]),
    )


def force_overprovisioned(limits: buffers.HostBufferLimits) -> bool:
    """Whether `overprovisioned` needs --force-buffers to reach the host's TCP ceiling.

    The paper's over-provisioned case is the largest buffer the OS is set to allow (16 MB,
    with rmem_max raised to match). Where net.core.rmem_max is global and read-only in a
    namespace, the lab cannot raise it; forcing the socket to the receiver's tcp_rmem max
    stands in for that sysctl without touching the host."""
    reach = 2 * min(limits.rmem_max, limits.wmem_max)
    return min(limits.tcp_rmem[2], limits.tcp_wmem[2]) > reach


def bench_transfer(
    lab: Lab,
    *,
    modes: Sequence[Mode] = ALL_MODES,
    streams: Sequence[int] = (1,),
    seconds: float = 15.0,
    iperf: bool = True,
    out: TextIO | None = None,
) -> list[BenchRow]:
    """Run the matrix modes x streams from a to b; print the table to `out`."""
    rate = lab.spec.forward.rate_bps
    rtt = lab.rtt_s
    limits = lab_limits(lab)
    force_over = force_overprovisioned(limits) and buffers.can_force()
    rows: list[BenchRow] = []
    iperf_cache: dict[tuple[int | None, int], float] = {}
    with serving(lab, "b", SERVE_PORT, "--max-duration", str(seconds + 5)):
        for n in streams:
            for mode in modes:
                doc = _transfer(
                    lab, mode, seconds, n, rate, mode == "overprovisioned" and force_over
                )
                window = iperf_window(mode, rtt, rate, limits)
                ref: float | None = None
                if iperf:
                    key = (window, n)
                    if key not in iperf_cache:
                        iperf_cache[key] = _iperf3(lab, seconds, n, window)
                    ref = iperf_cache[key]
                rows.append(
                    BenchRow(
                        mode=mode,
                        streams=n,
                        mbps=float(doc.get("throughput_mbps") or 0.0),
                        max_buffer_bytes=int(doc.get("max_buffer_bytes") or 0),
                        mbps_per_mb=float(doc.get("mbps_per_mb") or 0.0),
                        retransmits=int(doc.get("retransmits") or 0),
                        iperf_mbps=ref,
                        iperf_setting="no -w" if window is None else f"-w {window}",
                        error=doc.get("error"),
                        forced=bool(doc.get("forced")),
                        iperf_window=window,
                    )
                )
    if out is not None:
        out.write(render_table(rows, rate, rtt) + "\n")
    return rows


def render_table(rows: Sequence[BenchRow], rate_bps: float, rtt_s: float) -> str:
    """Markdown: one line per mode and stream count, then the targets of issue 5."""
    bdp = rate_bps / 8 * rtt_s
    lines = [
        f"Path {rate_bps / 1e6:g} Mbit/s x {rtt_s * 1e3:g} ms (BDP {bdp / 1e3:.0f} kB)",
        "",
        "| mode | streams | Mbit/s | iperf3 Mbit/s (setting) | ratio | max buffer | "
        "buffer/BDP | Mbit/s per MB | retrans |",
        "|---|---:|---:|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        ref = "-" if r.iperf_mbps is None else f"{r.iperf_mbps:.1f} ({r.iperf_setting})"
        ratio = "-" if r.vs_iperf is None else f"{r.vs_iperf:.2f}"
        lines.append(
            f"| {r.mode}{'*' if r.forced else ''} | {r.streams} | {r.mbps:.1f} | {ref} | {ratio} | "
            f"{r.max_buffer_bytes / 1e6:.2f} MB | {r.max_buffer_bytes / bdp:.1f} | "
            f"{r.mbps_per_mb:.1f} | {r.retransmits} |" + (f" error: {r.error}" if r.error else "")
        )
    by = {(r.mode, r.streams): r for r in rows}
    drs, untuned, over = by.get(("drs", 1)), by.get(("untuned", 1)), by.get(("overprovisioned", 1))
    if drs is not None:
        lines.append("")
        # TCP over the bottleneck carries at most (MTU - 52) / MTU of its IP rate as goodput
        # (headers with timestamps; MTU 1500 assumed, as the lab uses).
        tcp_max = rate_bps / 1e6 * TCP_GOODPUT_SHARE
        lines.append(f"- DRS goodput / the bottleneck's TCP goodput: {drs.mbps / tcp_max:.2f}")
        lines.append(f"- DRS max buffer / BDP: {drs.max_buffer_bytes / bdp:.2f}")
        if untuned is not None and untuned.mbps > 0:
            lines.append(
                f"- DRS / untuned goodput: {drs.mbps / untuned.mbps:.1f}x (no mode can exceed "
                f"the bottleneck's TCP goodput / untuned = {tcp_max / untuned.mbps:.1f}x here)"
            )
        if over is not None and over.mbps_per_mb > 0:
            lines.append(
                f"- DRS / overprovisioned Mbit/s per MB: {drs.mbps_per_mb / over.mbps_per_mb:.1f}x"
                f" (overprovisioned {over.max_buffer_bytes / 1e6:.2f} MB)"
            )
        if over is not None and over.forced and over.iperf_window and over.iperf_mbps:
            # What the efficiency would be at the largest buffer setsockopt reaches without
            # force, with the throughput iperf3 measured at that setting.
            capped = over.iperf_mbps / (2 * over.iperf_window / 1e6)
            lines.append(
                f"- the same against the {2 * over.iperf_window / 1e6:.2f} MB that setsockopt "
                f"reaches without force (iperf3 {over.iperf_setting}): "
                f"{drs.mbps_per_mb / capped:.1f}x"
            )
    if any(r.forced for r in rows):
        lines += [
            "",
            "\\* forced (SO_RCVBUFFORCE/SO_SNDBUFFORCE) to the receiver's tcp_rmem max, the "
            "paper's 'OS allows up to 16 MB': net.core.rmem_max is global on this kernel and "
            "cannot be raised inside the lab; iperf3 -w stays capped at rmem_max.",
        ]
    return "\n".join(lines)


# ---------------------------------------------------------------------------- the benchmark

BIG_BUFFERS = (
    ("net.ipv4.tcp_rmem", "4096 131072 16777216"),
    ("net.ipv4.tcp_wmem", "4096 16384 16777216"),
)
# (rate bit/s, RTT s): the paper's emulated set-up, then the second path.
PATHS = ((100e6, 0.100), (50e6, 0.050))
PAPER_STREAMS = (1, 2, 4, 8)


def loopback_vs_iperf3(seconds: float = 3.0) -> tuple[float, float]:
    """(our autotune Mbit/s, iperf3's) over loopback on this machine: the engine must not
    be the bottleneck. Both run as separate processes, as they would between two hosts."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    serve = subprocess.Popen(
        [sys.executable, "-m", "tcpwizard", "serve", "--bind", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        time.sleep(0.8)
        argv = [sys.executable, "-m", "tcpwizard", "transfer", "127.0.0.1", "--port", str(port)]
        argv += ["--modes", "autotune", "--duration", f"{seconds:g}s", "--json"]
        done = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=seconds + 30,
        )
        ours = float(json.loads(done.stdout)["transfer"]["modes"][0]["throughput_mbps"])
    finally:
        serve.kill()
        serve.wait()
    server = subprocess.Popen(
        ["iperf3", "-s", "-1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        time.sleep(0.3)
        done = subprocess.run(
            ["iperf3", "-c", "127.0.0.1", "-p", str(port), "-J", "-t", f"{seconds:g}"],
            capture_output=True,
            text=True,
            timeout=seconds + 30,
        )
        theirs = float(json.loads(done.stdout)["end"]["sum_received"]["bits_per_second"]) / 1e6
    finally:
        server.kill()
        server.wait()
    return ours, theirs


def run_bench_transfer(
    quick: bool, out_dir: str, progress: Callable[[str], None] | None = None
) -> str:
    """The whole `lab bench --transfer`: loopback against iperf3, every mode on both paths
    against iperf3, and the paper's matrix (modes x streams 1/2/4/8) at 50 ms. Builds and
    removes its own labs (root). Returns the Markdown it also writes to out_dir."""
    say: Callable[[str], None] = progress or (lambda _m: None)
    seconds = 8.0 if quick else 15.0
    run_id = uuid.uuid4().hex[:6]
    parts = [
        "# Transfer modes against iperf3 (`tcpwizard lab bench --transfer`)",
        "",
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; kernel {platform.release()}, "
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at start; "
        f"{seconds:g} s per run; receiver tcp_rmem max 16 MB.",
        "",
    ]
    say("loopback: autotune against iperf3 ...")
    ours, theirs = loopback_vs_iperf3()
    parts += [
        f"Loopback: autotune {ours / 1e3:.1f} Gbit/s, iperf3 {theirs / 1e3:.1f} Gbit/s "
        f"(ratio {ours / theirs:.2f}; target >= 0.9).",
        "",
    ]
    for i, (rate, rtt) in enumerate(PATHS):
        spec = LabSpec.symmetric(
            rate, rtt, sysctls_a=BIG_BUFFERS, sysctls_b=BIG_BUFFERS, name=f"twtb-{run_id}-{i}"
        )
        say(f"lab {rate / 1e6:g} Mbit/s x {rtt * 1e3:g} ms: every mode and iperf3 ...")
        with Lab(spec, owner_pid=os.getpid()) as lab:
            rows = bench_transfer(lab, seconds=seconds)
            parts += [render_table(rows, rate, rtt), ""]
            if i == len(PATHS) - 1 and not quick:
                say("the paper's matrix: modes x streams 1, 2, 4, 8 ...")
                matrix = bench_transfer(lab, streams=PAPER_STREAMS, seconds=seconds, iperf=False)
                parts += ["## The paper's experiment in miniature", "", _matrix(matrix), ""]
    text = "\n".join(parts)
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "bench-transfer.md"), "w") as f:
        f.write(text)
    return text


def _matrix(rows: Sequence[BenchRow]) -> str:
    """Mbit/s by mode (rows) and stream count (columns)."""
    counts = sorted({r.streams for r in rows})
    modes = [m for m in ALL_MODES if any(r.mode == m for r in rows)]
    by = {(r.mode, r.streams): r for r in rows}
    lines = [
        "| mode | " + " | ".join(f"{n} stream{'s' if n > 1 else ''}" for n in counts) + " |",
        "|---|" + "---:|" * len(counts),
    ]
    for m in modes:
        cells = []
        for n in counts:
            r = by.get((m, n))
            cells.append("-" if r is None else f"{r.mbps:.1f} ({r.mbps_per_mb:.0f}/MB)")
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def run_bench_cli(quick: bool, out_dir: str, ctx: Context) -> int:
    """For `tcpwizard lab bench --transfer` (BENCHES in wizard/commands/lab.py)."""
    if os.geteuid() != 0:
        raise PermissionRequired("lab bench --transfer needs root (network namespaces)")
    text = run_bench_transfer(quick, out_dir, progress=ctx.progress)
    print(text, file=ctx.stdout)
    ctx.progress(f"wrote {os.path.join(out_dir, 'bench-transfer.md')}")
    return int(ExitCode.OK)
