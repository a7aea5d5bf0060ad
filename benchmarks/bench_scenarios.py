"""`python -m benchmarks scenarios`: the misconfiguration suite as a results table."""

from __future__ import annotations

import os
import platform
import time
import uuid

from tcpwizard.context import Context
from tcpwizard.exitcodes import ExitCode, UsageError
from tcpwizard.lab.lab import Lab
from tcpwizard.lab.scenarios import RATE, RECHECK_SHARE, RTT, SCENARIOS, results_table, run_all
from tcpwizard.lab.spec import LabSpec


def _make_lab(spec: LabSpec) -> Lab:
    return Lab(spec.with_name(f"twsc-{uuid.uuid4().hex[:6]}"))


def run_scenarios(out_dir: str, only: tuple[str, ...], ctx: Context, quick: bool = False) -> int:
    if any(o.partition(":")[0] in ("gigabit", "multigigabit") for o in only):
        from benchmarks.bench_gigabit import run_gigabit

        return run_gigabit(only, out_dir, quick, stdout=ctx.stdout, progress=ctx.progress)
    unknown = set(only) - {s.name for s in SCENARIOS}
    if unknown:
        raise UsageError(f"unknown scenario {sorted(unknown)[0]!r}")
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    ctx.progress(f"running {len(only) or len(SCENARIOS)} scenarios (about 25 s each)...")
    t0 = time.monotonic()
    results = run_all(_make_lab, only)
    table = results_table(results)
    print(table, file=ctx.stdout)
    ok = sum(r.verdict_ok for r in results)
    fixed = sum(r.fixed_ok for r in results)
    doc = [
        "# Misconfiguration scenarios (`python -m benchmarks scenarios`)",
        "",
        f"{started}; kernel {platform.release()}, {os.cpu_count()} CPUs; lab "
        f"{RATE / 1e6:g} Mbit/s x {RTT * 1e3:g} ms; {time.monotonic() - t0:.0f} s in all.",
        "",
        "Each scenario builds a fresh lab with one cause, runs `tcpwizard check B --json` on "
        "host a against the far end the row names on host b (`tcpwizard serve`, a stock "
        "`iperf3 -s`, or only a web server's port: then the verdict is a prediction, and "
        "`--allow-predicted` keeps its exit code), applies the printed fixes with "
        "`tcpwizard fix --plan report.json --for local|peer --yes` on the host the verdict "
        "names, then re-measures with `tcpwizard transfer` (4 s). *after / rate* must reach "
        f"{RECHECK_SHARE:.0%} of the bottleneck rate (TCP goodput tops out at 96.5 %). "
        "`app-64k` is fixed in the application (setsockopt), so its re-measure uses the "
        "`static` mode (2 x BDP set before connect), which is what the printed snippet does.",
        "",
        table,
        f"Verdicts right: {ok}/{len(results)}; limit removed by the fix: {fixed}/{len(results)}.",
    ]
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "scenarios.md")
    with open(path, "w") as f:
        f.write("\n".join(doc) + "\n")
    ctx.progress(f"wrote {path}")
    return int(ExitCode.OK if ok == fixed == len(results) else ExitCode.WARNING)
