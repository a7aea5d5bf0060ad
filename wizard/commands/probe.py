"""`tcpwizard probe HOST`: RTT, loss, bottleneck capacity and BDP of the path."""

from __future__ import annotations

import argparse

from tcpwizard.advice import guard
from tcpwizard.advice.diagnose import Evidence, diagnose
from tcpwizard.checks.audit import audit
from tcpwizard.checks.model import HostAudit
from tcpwizard.commands._output import emit, machine
from tcpwizard.commands._secret import secret_from_args
from tcpwizard.context import Context
from tcpwizard.documents import ProbeDocument
from tcpwizard.exitcodes import UsageError
from tcpwizard.measure.model import PathEstimate
from tcpwizard.measure.probes.probe import probe
from tcpwizard.measure.wire import spec
from tcpwizard.outcome import exit_code
from tcpwizard.report import Report, TargetInfo
from tcpwizard.run import measured_target, verdict_outcome
from tcpwizard.units import parse_duration


def run(args: argparse.Namespace, ctx: Context) -> int:
    budget = parse_duration(args.budget, default_unit="s")
    if not spec.MIN_PROBE_BUDGET_S <= budget <= spec.MAX_PROBE_BUDGET_S:
        raise UsageError(
            f"--budget must be between {spec.MIN_PROBE_BUDGET_S:g}s "
            f"and {spec.MAX_PROBE_BUDGET_S:g}s"
        )
    secret = secret_from_args(args.secret_file, ctx)
    est = probe(
        args.host,
        args.port,
        secret=secret,
        tcp_port=args.tcp_port,
        budget_s=budget,
        progress=None if machine(args.format) else ctx.progress,
    )
    report = probe_report(args.host, est, ctx)
    return emit(ProbeDocument(args.host, est, report), args, ctx)


def probe_report(host: str, est: PathEstimate, ctx: Context) -> Report:
    """The full JSON contract for a probe-only run: this host judged against the measured
    path, and the verdict that allows (a prediction: no transfer ran)."""
    return judged_probe(host, est, audit(ctx, est.address, measured_target(est, None)))


def judged_probe(host: str, est: PathEstimate, local: HostAudit) -> Report:
    """This host's audit judged against the probed path (a prediction: no transfer)."""
    iface = local.interface
    bounds = guard.bounds_for(iface.speed_mbps if iface else None, iface.mtu if iface else None)
    est = guard.guard_path(est, bounds) or est
    diag = diagnose(Evidence(local, None, est, None, local_fixes=local.fixes))
    code = exit_code(verdict_outcome(diag, local, None))
    return Report(
        host=local,
        verdict=diag.verdict,
        fixes=diag.fixes,
        exit_code=code,
        target=TargetInfo(host, est.address, est.port),
        path=est,
        notes=local.notes + est.notes,
    )
