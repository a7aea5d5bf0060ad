"""`tcpwizard probe HOST`: RTT, loss, bottleneck capacity and BDP of the path."""

from __future__ import annotations

import argparse
import json

from tcpwizard.advice import guard
from tcpwizard.advice.diagnose import Evidence, diagnose
from tcpwizard.checks.audit import audit
from tcpwizard.commands._secret import secret_from_args
from tcpwizard.context import Context
from tcpwizard.exitcodes import UsageError
from tcpwizard.measure import spec
from tcpwizard.measure.model import CapacityEstimate, PathEstimate
from tcpwizard.measure.probe import probe
from tcpwizard.output.json_format import report_json
from tcpwizard.report import Report, TargetInfo
from tcpwizard.run import check_exit_code, measured_target
from tcpwizard.units import format_bytes, parse_duration


def run(args: argparse.Namespace, ctx: Context) -> int:
    budget = parse_duration(args.budget, default_unit="s")
    if not spec.MIN_PROBE_BUDGET_S <= budget <= spec.MAX_PROBE_BUDGET_S:
        raise UsageError(
            f"--budget must be between {spec.MIN_PROBE_BUDGET_S:g}s "
            f"and {spec.MAX_PROBE_BUDGET_S:g}s"
        )
    if args.format not in ("text", "json"):
        raise UsageError(f"probe supports --format text or json, not {args.format}")
    secret = secret_from_args(args.secret_file, ctx)
    est = probe(
        args.host,
        args.port,
        secret=secret,
        tcp_port=args.tcp_port,
        budget_s=budget,
        progress=ctx.progress if args.format == "text" else None,
    )
    report = probe_report(args.host, est, ctx)
    if args.format == "json":
        print(json.dumps(report_json(report), indent=2, allow_nan=False), file=ctx.stdout)
    else:
        v = report.verdict
        print(render_text(args.host, est), file=ctx.stdout)
        print(
            f"  Verdict    {v.limiting_factor} (predicted for this host, no test transfer;"
            f" `tcpwizard check` measures it)\n             {v.explanation}",
            file=ctx.stdout,
        )
    return int(report.exit_code)


def probe_report(host: str, est: PathEstimate, ctx: Context) -> Report:
    """The full JSON contract for a probe-only run: this host judged against the measured
    path, and the verdict that allows (a prediction: no transfer ran)."""
    target = measured_target(est, None)
    local = audit(ctx, est.address, target)
    iface = local.interface
    bounds = guard.bounds_for(iface.speed_mbps if iface else None, iface.mtu if iface else None)
    est = guard.guard_path(est, bounds) or est
    diag = diagnose(Evidence(local, None, est, None, local_fixes=local.fixes))
    code = check_exit_code(diag, local, None)
    return Report(
        host=local,
        verdict=diag.verdict,
        fixes=diag.fixes,
        exit_code=code,
        target=TargetInfo(host, est.address, est.port),
        path=est,
        notes=local.notes + est.notes,
    )


def _cap_line(cap: CapacityEstimate, direction: str) -> str:
    line = f"{cap.mbps:.1f} Mbit/s {direction} ({cap.method}, confidence {cap.confidence:.1f})"
    if cap.limited_by:
        line += f"\n             limited by {cap.limited_by}: {cap.note}"
    elif cap.note:
        line += f"\n             {cap.note}"
    return line


def render_text(host: str, est: PathEstimate) -> str:
    r = est.rtt
    how = "tcpwizard serve" if est.peer else "peerless probes"
    lines = [
        f"Path to {host} ({est.address}) via {how}",
        f"  RTT        min {r.min:.3f}  p50 {r.p50:.3f}  p95 {r.p95:.3f}  mean {r.mean:.3f}"
        f"  mdev {r.mdev:.3f}  max {r.max:.3f} ms",
        f"             loss {r.loss_pct:.1f}%, jitter {r.jitter:.3f} ms"
        f" ({r.method}, {r.samples} replies)",
    ]
    if est.capacity:
        lines.append("  Capacity   " + _cap_line(est.capacity, "up"))
    else:
        lines.append("  Capacity   not measured")
    if est.capacity_down:
        lines.append("             " + _cap_line(est.capacity_down, "down"))
    if est.bdp_bytes is not None:
        bdp = est.bdp_bytes
        lines.append(f"  BDP        {format_bytes(bdp)} ({bdp} bytes = capacity x min RTT)")
    lines.extend(f"  note: {n}" for n in est.notes)
    lines.append(f"  took {est.duration_s:.2f} s")
    return "\n".join(lines)
