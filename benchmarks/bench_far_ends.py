"""`python -m benchmarks far-ends`: `check` against a stock `iperf3 -s`, mode by mode and both
ways, beside iperf3's own client with the same window setting on the same path (the
reference nobody here wrote). Writes docs/bench-far-ends.md."""

from __future__ import annotations

import json
import os
import platform
import statistics
import time
import uuid
from dataclasses import dataclass

from tcpwizard.context import Context
from tcpwizard.exitcodes import ExitCode
from tcpwizard.lab.lab import Lab
from tcpwizard.lab.serving import iperf3_serving, tcpwizard_argv
from tcpwizard.lab.spec import LabSpec
from tcpwizard.lab.tools import iperf3_tcp

# (path, modes): a path of each kind the far end meets; `static` needs the BDP the check
# measured, which iperf3 -w is given by hand from the configured path.
PATHS: tuple[tuple[float, float], ...] = ((80e6, 0.060), (100e6, 0.050), (200e6, 0.030))
SECONDS = 5.0
RUNS = 3
TOLERANCE = 0.05


@dataclass(frozen=True)
class Row:
    rate_mbps: float
    rtt_ms: float
    mode: str
    direction: str
    ours: float
    reference: float

    @property
    def ratio(self) -> float:
        return self.ours / self.reference if self.reference else float("nan")


def _window(mode: str, rate_bps: float, rtt_s: float) -> tuple[str, ...]:
    if mode == "untuned":
        return ("-w", "64K")
    if mode == "static":
        return ("-w", str(max(65536, int(rate_bps / 8 * rtt_s))))
    return ()


def _ours(lab: Lab, mode: str, direction: str) -> float:
    argv = tcpwizard_argv(
        "check", lab.addr_b, "--iperf3-port", "5201", "--modes", mode, "--direction",
        direction, "--duration", f"{SECONDS:g}", "--json", "--no-history",
    )  # fmt: skip
    proc = lab.run("a", argv, capture_output=True, text=True, timeout=120)
    doc = json.loads(proc.stdout)
    modes = [m for m in doc["transfer"]["modes"] if m["error"] is None]
    return float(modes[0]["throughput_mbps"]) if modes else 0.0


def measure(rate_bps: float, rtt_s: float, runs: int = RUNS) -> list[Row]:
    rows: list[Row] = []
    spec = LabSpec.symmetric(rate_bps, rtt_s).with_name(f"twfe-{uuid.uuid4().hex[:6]}")
    with Lab(spec) as lab:
        for mode in ("untuned", "autotune", "static"):
            for direction in ("up", "down"):
                extra = _window(mode, rate_bps, rtt_s) + (("-R",) if direction == "down" else ())
                ours, refs = [], []
                for _ in range(runs):
                    with iperf3_serving(lab, "b"):
                        ours.append(_ours(lab, mode, direction))
                    ref = iperf3_tcp(lab, "a", seconds=SECONDS, extra=extra)
                    refs.append(ref.receiver_bps / 1e6)
                rows.append(
                    Row(
                        rate_bps / 1e6,
                        rtt_s * 1e3,
                        mode,
                        direction,
                        statistics.median(ours),
                        statistics.median(refs),
                    )
                )
    return rows


def table(rows: list[Row]) -> str:
    out = [
        "| path | mode | dir | check vs iperf3 -s, Mbit/s | iperf3 -c, Mbit/s | ratio | within 5 % "
        "|",
        "|---|---|---|---:|---:|---:|---|",
    ]
    for r in rows:
        ok = "✅" if abs(r.ratio - 1) <= TOLERANCE else "❌"
        out.append(
            f"| {r.rate_mbps:g} Mbit/s x {r.rtt_ms:g} ms | {r.mode} | {r.direction} | "
            f"{r.ours:.1f} | {r.reference:.1f} | {r.ratio:.3f} | {ok} |"
        )
    return "\n".join(out) + "\n"


def run_far_ends(out_dir: str, quick: bool, ctx: Context) -> int:
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    paths = PATHS[:1] if quick else PATHS
    runs = 1 if quick else RUNS
    ctx.progress(f"{len(paths)} paths x 3 modes x 2 directions x {runs} runs (~15 s each)...")
    t0 = time.monotonic()
    rows = [row for rate, rtt in paths for row in measure(rate, rtt, runs)]
    text = table(rows)
    print(text, file=ctx.stdout)
    good = sum(abs(r.ratio - 1) <= TOLERANCE for r in rows)
    load = os.getloadavg()[0]
    doc = [
        "# `check` against a stock iperf3 server (`python -m benchmarks far-ends`)",
        "",
        f"{started}; kernel {platform.release()}, {os.cpu_count()} CPUs, load average "
        f"{load:.1f} at the end; Debian iperf3; {time.monotonic() - t0:.0f} s in all.",
        "",
        f"Each cell: the median of {runs} runs of `tcpwizard check B --iperf3-port 5201 --modes "
        f"MODE --direction DIR --duration {SECONDS:g}` against `iperf3 -s` on host b, and of "
        f"`iperf3 -c B -t {SECONDS:g}` with the same window (`-w 64K` for untuned, `-w BDP` "
        "for static, `-R` for down), iperf3's receiver figure. Our upload figure is what the "
        "server received over its own test time; our download figure what our socket received.",
        "",
        text,
        f"Within 5 %: {good}/{len(rows)}.",
        "",
    ]
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "bench-far-ends.md")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(doc))
    ctx.progress(f"wrote {path}")
    return int(ExitCode.OK if good == len(rows) else ExitCode.WARNING)
