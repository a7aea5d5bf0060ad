"""`python -m benchmarks check-time [--rtt T] [--bandwidth R] [--runs N] [--quick]`: the full
`check` on a healthy, tuned lab path, N times: its verdict (a healthy path is
`path-capacity`, measured) and its time against the least its measurements need (the
report's `timing`: round trips to reach the far end and probe, slow start to the window,
steady rounds; wizard/timing.py).

Both hosts' autotuning limits are the scenario matrix's tuned buffers (4 x (BDP + queue),
benchmarks/matrix_draw.py), so neither buffer is what the path is judged by; the queue is
one BDP (the lab's default). Results: OUT/check-time.md, one JSON row per run in
OUT/check-time.jsonl and each run's whole report in OUT/reports/.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from benchmarks.bench_causes import isolated_env, json_report
from benchmarks.matrix_draw import tuned_buffer
from tcpwizard import argtypes
from tcpwizard.context import Context
from tcpwizard.exitcodes import ExitCode
from tcpwizard.lab.lab import Lab, require_root
from tcpwizard.lab.serving import serving, tcpwizard_argv
from tcpwizard.lab.spec import LabSpec
from tcpwizard.units import parse_duration, parse_rate

HEALTHY = ("path-capacity", None)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--rtt", type=argtypes.duration("ms"), default="330ms", metavar="TIME")
    p.add_argument("--bandwidth", type=argtypes.rate, default="50mbit", metavar="RATE")
    p.add_argument("--runs", type=argtypes.int_range(1, 50), default=10, metavar="N")
    p.add_argument("--quick", action="store_true", help="check --quick")
    p.add_argument("--out", default="bench-out", metavar="DIR")


def _spec_top(rate_bps: float, rtt_s: float) -> int:
    bdp = rate_bps / 8 * rtt_s
    return tuned_buffer(bdp, bdp)


def _spec(rate_bps: float, rtt_s: float) -> LabSpec:
    top = str(_spec_top(rate_bps, rtt_s))
    limits = (
        ("net.ipv4.tcp_rmem", f"4096 131072 {top}"),
        ("net.ipv4.tcp_wmem", f"4096 16384 {top}"),
    )
    return LabSpec.symmetric(
        rate_bps, rtt_s, name=f"twct-{uuid.uuid4().hex[:6]}", sysctls_a=limits, sysctls_b=limits
    )


def one_check(lab: Lab, env: dict[str, str], quick: bool, keep: Path) -> dict[str, Any]:
    """One check; its whole JSON report is kept in `keep` (the name is the row's `report`)."""
    t0 = time.monotonic()
    argv = tcpwizard_argv("check", lab.addr_b, "--json", *(["--quick"] if quick else []))
    doc = json_report(lab, argv, env)
    report = keep / f"check-{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:4]}.json"
    report.write_text(json.dumps(doc))
    v, timing = doc["verdict"], doc.get("timing") or {}
    return {
        "factor": v["limiting_factor"],
        "host": v["host_to_fix"],
        "confidence": v["confidence"],
        "measured": bool(doc.get("measured")),
        "wall_s": round(time.monotonic() - t0, 2),
        "report_s": timing.get("seconds"),
        "floor_s": timing.get("floor_s"),
        "stages": timing.get("stages"),
        "report": report.name,
        "modes": [
            [m["mode"], m["direction"], m["throughput_mbps"]]
            for m in (doc.get("transfer") or {}).get("modes") or []
        ],
    }


def table(rows: list[dict[str, Any]]) -> str:
    out = [
        "| run | verdict | confidence | measured | wall s | report s | floor s | over the floor |",
        "|---:|---|---:|---|---:|---:|---:|---:|",
    ]
    for i, r in enumerate(rows, 1):
        if "error" in r:
            out.append(f"| {i} | error: {r['error'][:60]} | | | | | | |")
            continue
        over = r["report_s"] / r["floor_s"] if r.get("report_s") and r.get("floor_s") else None
        out.append(
            f"| {i} | {r['factor']} ({r['host'] or '-'}) | {r['confidence']:.2f} | "
            f"{'yes' if r['measured'] else 'no'} | {r['wall_s']:.1f} | {r['report_s']:.1f} | "
            f"{r['floor_s']:.1f} | {over:.2f} |"
            if over is not None
            else f"| {i} | {r['factor']} | {r['confidence']:.2f} | {r['measured']} | "
            f"{r['wall_s']:.1f} | - | - | - |"
        )
    return "\n".join(out)


def summary(rows: list[dict[str, Any]]) -> str:
    healthy = sum(
        1 for r in rows if (r.get("factor"), r.get("host")) == HEALTHY and r.get("measured")
    )
    walls = [r["wall_s"] for r in rows if "wall_s" in r]
    floors = [r["floor_s"] for r in rows if r.get("floor_s")]
    time_part = (
        f"; wall time median {statistics.median(walls):.1f} s ({min(walls):.1f}-{max(walls):.1f}),"
        f" floor {statistics.median(floors):.1f} s"
        if walls and floors
        else ""
    )
    return f"`path-capacity`, measured: {healthy}/{len(rows)}{time_part}."


def run(args: argparse.Namespace, ctx: Context) -> int:
    require_root()
    rate, quick = parse_rate(args.bandwidth), bool(args.quick)
    rtt = parse_duration(args.rtt, "ms")
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    rows: list[dict[str, Any]] = []
    keep = Path(args.out, "reports")
    keep.mkdir(parents=True, exist_ok=True)
    lab = Lab(_spec(rate, rtt))
    with tempfile.TemporaryDirectory(prefix="tw-ct-") as tmp, lab, serving(lab, "b"):
        env = isolated_env(tmp)
        for i in range(args.runs):
            try:
                rows.append(one_check(lab, env, quick, keep))
            except (RuntimeError, subprocess.TimeoutExpired) as exc:
                rows.append({"error": str(exc)[:200]})
            r = rows[-1]
            ctx.progress(f"[{i + 1}/{args.runs}] {r.get('factor', 'error')} {r.get('wall_s', '')}")
    with Path(args.out, "check-time.jsonl").open("a") as f:
        for r in rows:
            f.write(json.dumps({"rate_bps": rate, "rtt_s": rtt, "quick": quick, **r}) + "\n")
    title = f"`check{' --quick' if quick else ''}`, {rate / 1e6:g} Mbit/s x {rtt * 1e3:g} ms"
    text = "\n".join(
        [
            f"## {title}",
            "",
            f"{started}; kernel {platform.release()}, {os.cpu_count()} CPUs; tuned hosts "
            f"(tcp_rmem/wmem max {_spec_top(rate, rtt)} B), one-BDP queue, {len(rows)} runs.",
            "",
            table(rows),
            "",
            summary(rows),
            "",
        ]
    )
    print(text, file=ctx.stdout)
    with Path(args.out, "check-time.md").open("a") as f:
        f.write(text + "\n")
    ctx.progress(f"appended to {args.out}/check-time.md")
    return int(ExitCode.OK)
