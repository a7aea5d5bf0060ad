"""`python -m benchmarks paper`: the seed papers' experiment matrix on the lab.

For each delay and limits setting a fresh lab runs `tcpwizard serve` on host b; host a runs
`tcpwizard transfer` (all the group's modes in one call) once per repetition, then iperf3
once per cell that has an iperf3 equivalent. Results are saved after every call, so an
interrupted run resumes (`ResultStore`); the table and plots are written at the end.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import time
import uuid
from collections.abc import Sequence
from typing import Any

from benchmarks.paper_matrix import (
    DEFAULT_LIMITS,
    RAISED_LIMITS,
    TUNING_BY_NAME,
    Cell,
    Group,
    Plan,
    estimate_s,
    expected_run_s,
    make_plan,
    queue_bytes,
)
from benchmarks.paper_results import ResultStore, Run, steady_goodput, warmup_s
from tcpwizard.context import Context
from tcpwizard.exitcodes import ExitCode, UsageError
from tcpwizard.lab.lab import Lab
from tcpwizard.lab.netns import LabError
from tcpwizard.lab.serving import SERVE_PORT, serving, tcpwizard_argv
from tcpwizard.lab.spec import LabSpec
from tcpwizard.lab.tools import iperf3_tcp
from tcpwizard.measure.engine.transfer import static_request

RESULTS_NAME = "bench-paper.json"
EXTRA_CALLS = 2  # failed transfer calls tolerated per group before its cells stay short


def _spec(group: Group, rate_bps: float) -> LabSpec:
    limits = RAISED_LIMITS if group.limits == "raised" else DEFAULT_LIMITS
    name = f"twpp-{uuid.uuid4().hex[:6]}"
    return LabSpec.symmetric(
        rate_bps,
        group.rtt_ms / 1e3,
        queue_bytes=queue_bytes(rate_bps, group.rtt_ms),
        name=name,
        sysctls_a=limits,
        sysctls_b=limits,
    )


def transfer_argv(lab: Lab, plan: Plan, group: Group, modes: Sequence[str]) -> list[str]:
    length = (
        ["--duration", f"{plan.run_seconds(group.rtt_ms):g}s"]
        if plan.duration_s is not None
        else ["--bytes", f"{plan.nbytes}B"]
    )
    return tcpwizard_argv(
        "transfer", lab.addr_b, "--port", str(SERVE_PORT), "--modes", ",".join(modes),
        "--streams", str(group.streams), *length,
        # static mode's buffer: 2 x BDP of the configured path (the engine doubles BDP)
        "--rtt", f"{group.rtt_ms:g}ms", "--bandwidth", f"{plan.rate_bps:.0f}bit",
        "--json",
    )  # fmt: skip


def run_from_mode(m: dict[str, Any], rtt_ms: float) -> tuple[Run, list[tuple[float, int]]]:
    """One repetition from an entry of the transfer JSON's `modes[]`, and its buffer trace."""
    samples = m.get("samples") or []
    points = [(float(s["t_s"]), float(s["goodput_mbps"] or 0.0)) for s in samples]
    run = Run(
        mbps=float(m["throughput_mbps"] or 0.0),
        steady_mbps=steady_goodput(points, warmup_s(rtt_ms)) if points else 0.0,
        max_buffer_bytes=int(m["max_buffer_bytes"]),
        mbps_per_mb=float(m["mbps_per_mb"] or 0.0),
        retransmits=int(m["retransmits"]),
        seconds=float(m["seconds"] or 0.0),
        error=m.get("error"),
    )
    return run, [(float(s["t_s"]), int(s["rcvbuf_bytes"])) for s in samples]


def _call_timeout(plan: Plan, group: Group, cells: list[Cell]) -> float:
    return sum(2 * expected_run_s(plan, c) + 20 for c in cells) + 30


def _transfer_reps(lab: Lab, plan: Plan, group: Group, store: ResultStore, ctx: Context) -> None:
    for attempt in range(plan.reps + EXTRA_CALLS):
        cells = [c for c in group.cells() if store.runs_missing(c, plan.reps)]
        if not cells:
            return
        modes = [TUNING_BY_NAME[c.tuning].mode for c in cells]
        argv = transfer_argv(lab, plan, group, modes)
        timeout = _call_timeout(plan, group, cells)
        try:
            proc = lab.run("a", argv, capture_output=True, text=True, timeout=timeout)
            entries = {m["mode"]: m for m in json.loads(proc.stdout)["transfer"]["modes"]}
        except (subprocess.TimeoutExpired, ValueError, KeyError, TypeError) as exc:
            ctx.progress(f"    transfer call {attempt + 1} failed: {str(exc)[:160]}")
            for c in cells:
                store.add_run(c, Run(0.0, 0.0, 0, 0.0, 0, 0.0, f"transfer call: {exc}"[:300]))
            store.save()
            continue
        for c in cells:
            entry = entries.get(TUNING_BY_NAME[c.tuning].mode)
            if entry is None:
                store.add_run(c, Run(0.0, 0.0, 0, 0.0, 0, 0.0, "mode missing from the JSON"))
                continue
            run, trace = run_from_mode(entry, c.rtt_ms)
            store.add_run(c, run, trace)
        store.save()


def iperf3_args(cell: Cell, rate_bps: float, rmem_max: int) -> tuple[str, ...] | None:
    """iperf3 flags doing what the cell's tuning does, or None (DRS has no equivalent)."""
    kind = TUNING_BY_NAME[cell.tuning].iperf3
    streams = ("-P", str(cell.streams))
    if kind == "none":
        return None
    if kind == "fixed-64k":
        return (*streams, "-w", "64K")
    if kind == "static":
        return (*streams, "-w", str(static_request(cell.rtt_ms / 1e3, rate_bps)))
    if kind == "max":
        return (*streams, "-w", str(rmem_max))
    return streams  # "auto": no -w, kernel autotuning


def _iperf3_cells(lab: Lab, plan: Plan, group: Group, store: ResultStore, ctx: Context) -> None:
    rmem_max = int(lab.sysctl("a", "net.core.rmem_max"))
    for c in group.cells():
        args = iperf3_args(c, plan.rate_bps, rmem_max)
        if args is None or store.get(c).iperf3_mbps is not None:
            continue
        seconds = plan.iperf3_seconds(c.rtt_ms) or 2 * expected_run_s(plan, c) + 30
        try:
            result = iperf3_tcp(lab, "a", seconds=seconds, extra=args, nbytes=plan.nbytes)
            store.set_iperf3(c, result.receiver_bps / 1e6, None)
        except (LabError, subprocess.SubprocessError, KeyError, ValueError) as exc:
            ctx.progress(f"    iperf3 {c.key} failed: {str(exc)[:160]}")
            store.set_iperf3(c, None, str(exc)[:300])
        store.save()


def _needs_work(plan: Plan, group: Group, store: ResultStore) -> bool:
    for c in group.cells():
        if store.runs_missing(c, plan.reps):
            return True
        cr = store.get(c)
        if TUNING_BY_NAME[c.tuning].iperf3 != "none" and cr.iperf3_mbps is None:
            return True
    return False


def _remaining(plan: Plan, store: ResultStore) -> tuple[dict[str, int], set[str]]:
    runs = {c.key: store.runs_missing(c, plan.reps) for c in plan.cells()}
    iperf = {
        c.key
        for c in plan.cells()
        if TUNING_BY_NAME[c.tuning].iperf3 != "none" and store.get(c).iperf3_mbps is None
    }
    return runs, iperf


def _clock(seconds: float) -> str:
    return f"{int(seconds) // 60}:{int(seconds) % 60:02d}"


def budget_lines(plan: Plan, store: ResultStore) -> list[str]:
    runs, iperf = _remaining(plan, store)
    todo = sum(runs.values())
    est = estimate_s(plan, runs, iperf)
    cells = plan.cells()
    kept = sum(1 for c in cells if not runs[c.key] and c.key not in iperf)
    length = plan.length_text()
    max_streams = max(plan.streams)
    return [
        f"paper matrix: {len(plan.tunings)} tunings x {len(plan.rtts_ms)} delays "
        f"({', '.join(f'{r:g}' for r in plan.rtts_ms)} ms) x streams "
        f"{', '.join(map(str, plan.streams))} = {len(cells)} cells, {plan.reps} repetitions, "
        f"{length}, bottleneck {plan.rate_bps / 1e6:g} Mbit/s",
        f"budget: ~{_clock(est)} (m:ss) for {todo} transfer runs and {len(iperf)} iperf3 "
        f"runs; {kept} cells kept from {store.path}",
        f"resources: both CPUs busy during runs (Python endpoints + delay line); up to "
        f"{max_streams} streams x 2 x rmem_max of socket buffer per host; results < 1 MB",
    ]


def run_paper(
    quick: bool,
    out_dir: str,
    ctx: Context,
    rtts_ms: tuple[float, ...] = (),
    tunings: tuple[str, ...] = (),
) -> int:
    unknown = set(tunings) - set(TUNING_BY_NAME)
    if unknown:
        raise UsageError(f"unknown tuning {sorted(unknown)[0]!r} ({', '.join(TUNING_BY_NAME)})")
    return run_plan(make_plan(quick, rtts_ms, tunings), out_dir, ctx)


def run_plan(plan: Plan, out_dir: str, ctx: Context) -> int:
    """Measure what `out_dir`'s results file lacks, then write the table and plots."""
    from benchmarks.paper_report import write_outputs  # matplotlib: load only when used

    store = ResultStore.open(os.path.join(out_dir, RESULTS_NAME), plan)
    for line in budget_lines(plan, store):
        ctx.progress(line)
    load = os.getloadavg()[0]
    if load > 0.5 * (os.cpu_count() or 1):
        ctx.progress(f"warning: load average {load:.2f}; other work may disturb the runs")
    t0 = time.monotonic()
    total = len(plan.cells())
    done = 0
    for group in plan.groups():
        if _needs_work(plan, group, store):
            with Lab(_spec(group, plan.rate_bps)) as lab:
                store.meta.setdefault("congestion_control", lab.sysctl("a", _CC_KEY))
                store.meta.setdefault("rmem_max", int(lab.sysctl("a", "net.core.rmem_max")))
                with serving(lab, "b", SERVE_PORT, "--max-duration", "900"):
                    _transfer_reps(lab, plan, group, store, ctx)
                    _iperf3_cells(lab, plan, group, store, ctx)
        for c in group.cells():
            done += 1
            ctx.progress(_progress_line(done, total, store, c, time.monotonic() - t0, plan))
    wall = time.monotonic() - t0
    store.meta["kernel"] = platform.release()
    store.meta["cpus"] = os.cpu_count()
    store.meta["finished"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    store.meta["wall_s_last"] = round(wall, 1)
    store.meta["load_at_start"] = round(load, 2)
    store.meta["quick"] = plan.quick
    store.save()
    table, ok = write_outputs(plan, store, out_dir)
    print(table, file=ctx.stdout)
    ctx.progress(f"wall time {_clock(wall)}; wrote {out_dir}/bench-paper.md, .json and img/")
    return int(ExitCode.OK if ok else ExitCode.WARNING)


_CC_KEY = "net.ipv4.tcp_congestion_control"


def _progress_line(
    done: int, total: int, store: ResultStore, c: Cell, elapsed: float, plan: Plan
) -> str:
    cr = store.get(c)
    ip = "" if cr.iperf3_mbps is None else f"  iperf3 {cr.iperf3_mbps:6.1f}"
    runs, iperf = _remaining(plan, store)
    left = estimate_s(plan, runs, iperf)
    return (
        f"[{done:>3}/{total}] {c.rtt_ms:>5g} ms x{c.streams} {c.tuning:<16} "
        f"{cr.median_mbps:6.1f} Mbit/s  spread {cr.spread:6.1%}{ip}   "
        f"{_clock(elapsed)} elapsed, ~{_clock(left)} left"
    )
