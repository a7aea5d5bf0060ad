"""DRS against autotune on the DRS targets' paths, several rounds: each cell's time to 90 %
of the bottleneck, share of it and retransmits, per run and as medians.

`python -m tcpwizard.lab.bench_drs_targets [--rounds N] [--seconds S]` (root). One run's time
to 90 % moves in steps of the sampling (0.1-0.3 s at these RTTs), so a single run says little
about a 1.2x target; the median of a few rounds does. Builds and removes its own labs.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
import uuid
from collections.abc import Sequence

from tcpwizard.exitcodes import ExitCode
from tcpwizard.lab.bench_transfer import (
    BIG_BUFFERS,
    TARGET_PATHS,
    TCP_GOODPUT_SHARE,
    BenchRow,
    _t90,
    bench_transfer,
)
from tcpwizard.lab.lab import Lab
from tcpwizard.lab.spec import LabSpec

T90_TARGET = 1.2  # DRS's time to 90 % at most this many times autotune's
SHARE_TARGET = 0.90  # DRS's goodput at least this share of the bottleneck's TCP goodput


def _cell(runs: Sequence[tuple[BenchRow, BenchRow]], bottleneck_mbps: float) -> list[str]:
    """Per run: autotune and DRS side by side; then the medians and the targets."""
    lines = []
    ratios, shares = [], []
    for i, (auto, drs) in enumerate(runs, 1):
        ratio = drs.t90_s / auto.t90_s if drs.t90_s and auto.t90_s else None
        share = drs.mbps / bottleneck_mbps
        shares.append(share)
        if ratio is not None:
            ratios.append(ratio)
        lines.append(
            f"| run {i} | {auto.mbps:.1f}, {auto.retransmits}, {_t90(auto)} | "
            f"{drs.mbps:.1f} ({share:.2f}), {drs.retransmits}, {_t90(drs)} | "
            f"{'-' if ratio is None else f'{ratio:.2f}x'} |"
        )
    med_ratio = statistics.median(ratios) if ratios else None
    med_share = statistics.median(shares)
    fewer = sum(d.retransmits <= a.retransmits for a, d in runs)
    verdict = [
        f"share {med_share:.2f} {'✅' if med_share >= SHARE_TARGET else '❌'}",
        f"retr <= autotune {fewer}/{len(runs)} {'✅' if fewer == len(runs) else '❌'}",
        "time -" if med_ratio is None
        else f"time {med_ratio:.2f}x {'✅' if med_ratio <= T90_TARGET else '❌'}",
    ]  # fmt: skip
    lines.append(f"| **median** | | | **{'; '.join(verdict)}** |")
    return lines


def run(rounds: int, seconds: float) -> str:
    run_id = uuid.uuid4().hex[:6]
    out = [
        "## DRS against autotune, the targets' paths, "
        f"{rounds} rounds ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})",
        "",
        f"`python -m tcpwizard.lab.bench_drs_targets --rounds {rounds}`; kernel "
        f"{platform.release()}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} "
        f"at start; {seconds:g} s per run; receiver tcp_rmem max 16 MB. Each cell: Mbit/s "
        "(DRS: share of the bottleneck's TCP goodput), retransmits, time to 90 %; the last "
        f"column DRS's time to 90 % over autotune's (targets: share >= {SHARE_TARGET}, "
        f"retransmits no more than autotune's, time <= {T90_TARGET}x, on the medians).",
        "",
    ]
    for i, (rate, rtt) in enumerate(TARGET_PATHS):
        spec = LabSpec.symmetric(
            rate, rtt, sysctls_a=BIG_BUFFERS, sysctls_b=BIG_BUFFERS, name=f"twdt-{run_id}-{i}"
        )
        by_dir: dict[str, list[tuple[BenchRow, BenchRow]]] = {"up": [], "down": []}
        with Lab(spec, owner_pid=os.getpid()) as lab:
            for _ in range(rounds):
                rows = bench_transfer(lab, modes=("autotune", "drs"), seconds=seconds, iperf=False)
                for d, runs in by_dir.items():
                    auto = next(r for r in rows if r.mode == "autotune" and r.direction == d)
                    drs = next(r for r in rows if r.mode == "drs" and r.direction == d)
                    runs.append((auto, drs))
        bottleneck = rate / 1e6 * TCP_GOODPUT_SHARE
        for d, runs in by_dir.items():
            out += [
                f"{rate / 1e6:g} Mbit/s x {rtt * 1e3:g} ms, {d} (bottleneck TCP goodput "
                f"{bottleneck:.1f} Mbit/s):",
                "",
                "| | autotune: Mbit/s, retr, to 90 % | drs: Mbit/s (share), retr, to 90 % | "
                "DRS / autotune time |",
                "|---|---|---|---|",
                *_cell(runs, bottleneck),
                "",
            ]
        out.append(f"(load average {os.getloadavg()[0]:.2f})\n")
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tcpwizard.lab.bench_drs_targets")
    parser.add_argument("--rounds", type=int, default=3, choices=range(1, 21), metavar="1-20")
    parser.add_argument("--seconds", type=float, default=8.0)
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        print("bench_drs_targets: the lab needs root", file=sys.stderr)
        return int(ExitCode.NO_PERMISSION)
    print(run(args.rounds, args.seconds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
