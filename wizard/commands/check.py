"""`tcpwizard check [HOST]`: the local audit alone, or the whole pipeline across a path."""

from __future__ import annotations

import argparse
import dataclasses
import sqlite3
from typing import Literal, TextIO

from tcpwizard.advice.capacity_view import steady_mbps
from tcpwizard.checks import audit
from tcpwizard.commands._output import emit, machine
from tcpwizard.commands._path_hint import bdp_from_args
from tcpwizard.commands._plot import plot_capture, plot_ready, plotting
from tcpwizard.commands._secret import secret_from_args
from tcpwizard.commands.fix import apply_fixes
from tcpwizard.commands.transfer import parse_modes, parse_transfer_duration
from tcpwizard.context import Context
from tcpwizard.exitcodes import ExitCode, PermissionRequired, TcpWizardError, UsageError
from tcpwizard.measure.engine.datapath import MAX_STREAMS as ENGINE_MAX_STREAMS
from tcpwizard.measure.engine.transfer import run_transfer
from tcpwizard.measure.farends.interface import FarEndChoice, TransferOptions
from tcpwizard.measure.farends.url import is_url, parse_url
from tcpwizard.measure.probes.hops import PathOptions
from tcpwizard.measure.wire import spec
from tcpwizard.outcome import Outcome, Threshold, exit_code
from tcpwizard.report import Report, local_report
from tcpwizard.run import CheckRequest, Event, run_check
from tcpwizard.units import parse_duration, parse_size


def request_from_args(args: argparse.Namespace, ctx: Context) -> CheckRequest:
    secret = secret_from_args(args.secret_file, ctx)
    if args.force_buffers and not ctx.is_root:
        raise PermissionRequired("--force-buffers needs root (SO_RCVBUFFORCE/SO_SNDBUFFORCE)")
    duration = parse_transfer_duration(args.duration) if args.duration else None
    nbytes = parse_size(args.nbytes) if args.nbytes else None
    if nbytes is not None and nbytes <= 0:
        raise UsageError("--bytes must be positive")
    if not spec.MIN_STREAMS <= args.streams <= spec.MAX_STREAMS:
        raise UsageError(f"--streams must be between {spec.MIN_STREAMS} and {spec.MAX_STREAMS}")
    far_end: FarEndChoice = "auto"
    if args.port is not None and args.iperf3_port is None:
        far_end = "serve"
    elif args.iperf3_port is not None and args.port is None:
        far_end = "iperf3"
    host, url = args.host, None
    if is_url(args.host):  # check URL: the web server's downloads
        url, host = args.host, parse_url(args.host).host
    return CheckRequest(
        url=url,
        host=host,
        port=args.port or spec.SERVE_PORT,
        iperf3_port=args.iperf3_port or spec.IPERF3_PORT,
        far_end=far_end,
        allow_predicted=args.allow_predicted,
        secret=secret,
        tcp_port=args.tcp_port,
        modes=parse_modes(args.modes) if args.modes else None,
        streams=args.streams,
        duration_s=duration,
        nbytes=nbytes,
        direction=args.direction,
        quick=args.quick,
        # As root the tuned modes may exceed net.core.*mem_max: the wizard gap is then
        # measured before any sysctl changes.
        force_buffers=args.force_buffers or ctx.is_root,
        bdp_hint=bdp_from_args(args.rtt, args.bandwidth),
        available=getattr(args, "avail", False),
        hops=_hop_options(args) if getattr(args, "hops", False) else None,
    )


def _hop_options(args: argparse.Namespace) -> PathOptions:
    """`check --hops`: `path`'s own options and defaults (the pipeline validates them)."""
    return PathOptions(
        method=args.hops_method,
        count=args.hops_count or PathOptions.count,
        settle=args.hops_count is None,
        interval_s=parse_duration(args.hops_interval, default_unit="s"),
        max_time_s=parse_duration(args.hops_max_time, default_unit="s"),
        port=args.tcp_port if args.hops_method == "tcp" else None,
    )


class _StageLog:
    """Stage messages and transfer bars on stderr, for people watching a terminal."""

    def __init__(self, stream: TextIO, enabled: bool) -> None:
        self.stream = stream
        self.enabled = enabled
        self.bars = None
        if enabled:
            from tcpwizard.output.transfer_progress import ProgressDisplay

            self.bars = ProgressDisplay(stream)

    def __call__(self, ev: Event) -> None:
        if not self.enabled:
            return
        if ev.transfer is not None and self.bars is not None:
            self.bars(ev.transfer)
        elif ev.stage != "transfer" and ev.message:
            print(f"· {ev.message}", file=self.stream, flush=True)


def _record(report: Report, args: argparse.Namespace, ctx: Context) -> None:
    if args.no_history or not args.host:
        return
    from tcpwizard.history import History
    from tcpwizard.output.json_format import report_json

    try:
        History().append(args.host, report_json(report))
    except (OSError, sqlite3.Error, TcpWizardError) as exc:  # read-only home, foreign file
        ctx.progress(f"tcpwizard: warning: history not recorded: {exc}")


def run(args: argparse.Namespace, ctx: Context) -> int:
    plot_ready(args)  # before a capture is read, a far end started over SSH, or a check
    if getattr(args, "pcap", None):  # a capture file instead of a live path
        from tcpwizard.commands._pcap import run_pcap

        if getattr(args, "plot", None):
            plot_capture(args.pcap, args.plot, ctx)
        return run_pcap(args, ctx)
    if getattr(args, "ssh", False):  # the far end's serve is started over SSH first
        from tcpwizard.commands._ssh import run_over_ssh

        return run_over_ssh(args, ctx, run)
    for threshold in (args.warning, args.critical):
        if threshold:
            Threshold.parse(threshold)  # a typo fails now, not after a 15 s check
    if args.host is not None and not args.host.strip():
        raise UsageError("HOST is empty (leave it out for a local audit)")
    if args.fix and args.yes and not ctx.is_root:
        # Said before a 15 s check, and before a report whose exit_code could not match.
        raise PermissionRequired(
            "applying fixes needs root (try: sudo tcpwizard check --fix --yes)"
        )
    if not args.host:
        if not spec.MIN_STREAMS <= args.streams <= spec.MAX_STREAMS:
            raise UsageError(f"--streams must be between {spec.MIN_STREAMS} and {spec.MAX_STREAMS}")
        bdp = bdp_from_args(args.rtt, args.bandwidth)
        report = local_report(audit(ctx, None, bdp, streams=args.streams))
    else:
        req = request_from_args(args, ctx)
        watch = not machine(args.format) and ctx.stderr.isatty()
        log = _StageLog(ctx.stderr, watch)
        try:
            with plotting(args, ctx, req.host):
                if log.bars is not None:
                    with log.bars:
                        report = run_check(req, ctx, log)
                else:
                    report = run_check(req, ctx, log)
        except TcpWizardError as exc:
            if not machine(args.format):
                raise
            return machine_error(args, ctx, exc)
        if getattr(args, "try_streams", False):
            report = _try_streams(report, args, ctx)
    if args.fix and machine(args.format):
        # Fix first (its plan/result goes to stderr: the report owns stdout), so the
        # document's exit_code is the process's own.
        fixed = ExitCode(_apply_report_fixes(report, args, ctx, ctx.stderr))
        with_fixes = exit_code(Outcome(given=report.exit_code, parts=(fixed,)))
        report = dataclasses.replace(report, exit_code=with_fixes)
    code = emit(report, args, ctx)
    _record(report, args, ctx)
    if args.fix and not machine(args.format):
        # In text the plan/result follows the report on stdout.
        fixed = ExitCode(_apply_report_fixes(report, args, ctx, ctx.stdout))
        code = int(exit_code(Outcome(given=ExitCode(code), parts=(fixed,))))
    return code


def _try_streams(report: Report, args: argparse.Namespace, ctx: Context) -> Report:
    """--try-streams: when loss holds one stream down and the verdict gives N streams,
    measure N streams beside the one in the same run (serve far ends)."""
    fix = next((f for f in report.fixes if f.id == "parallel_streams"), None)
    if fix is None or report.verdict.limiting_factor != "congestion":
        note = "--try-streams: the verdict gives no stream count (only loss-bound paths do)"
        return dataclasses.replace(report, notes=(*report.notes, note))
    head = report.verdict.explanation.split(":", 1)[0]
    direction: Literal["up", "down"] = "down" if head == "down" else "up"
    n = min(int(fix.value), ENGINE_MAX_STREAMS)
    modes = report.transfer.modes if report.transfer else ()
    single = next((m for m in modes if m.mode == "autotune" and m.direction == direction), None)
    if not machine(args.format):
        ctx.progress(f"--try-streams: {n} streams {direction}")
    opts = TransferOptions(
        modes=("autotune",),
        streams=n,
        direction=direction,
        duration_s=spec.TRY_STREAMS_DURATION_S,
    )
    try:
        got = run_transfer(args.host, args.port or spec.SERVE_PORT, opts,
                           secret=secret_from_args(args.secret_file, ctx))  # fmt: skip
    except TcpWizardError as exc:
        note = f"--try-streams: {n} streams could not run: {exc}"
        return dataclasses.replace(report, notes=(*report.notes, note))
    mode = got.modes[0] if got.modes else None
    if mode is None or mode.error:
        why = mode.error if mode else "no result"
        note = f"--try-streams: {n} streams could not run: {why}"
        return dataclasses.replace(report, notes=(*report.notes, note))
    # Once up to speed as well as on average: N loss-bound streams spend the first second of
    # a 5 s run in slow start and its first losses, which a bulk transfer does only once.
    base = (
        f", one stream {single.throughput_mbps:.1f} Mbit/s ({steady_mbps(single):.1f} once up "
        "to speed)"
        if single
        else ""
    )
    line = (
        f"measured {direction}: {n} streams moved {mode.throughput_mbps:.1f} Mbit/s "
        f"({steady_mbps(mode):.1f} once up to speed){base}"
    )
    verdict = dataclasses.replace(report.verdict, evidence=(*report.verdict.evidence, line))
    return dataclasses.replace(report, verdict=verdict, notes=(*report.notes, line))


def _apply_report_fixes(report: Report, args: argparse.Namespace, ctx: Context, out: TextIO) -> int:
    """This host's fixes of the report, the plan/result in text on `out`."""
    fixed = apply_fixes(
        [f for f in report.fixes if f.host in ("local", "both")],
        ctx,
        args.yes,
        "text",
        out=out,
    )
    if any(f.host == "peer" for f in report.fixes):
        ctx.progress("tcpwizard: the peer's fixes must be applied on the peer")
    return fixed


def machine_error(args: argparse.Namespace, ctx: Context, exc: TcpWizardError) -> int:
    """Monitoring formats stay parseable on failure: a valid document with exit_code 3."""
    from tcpwizard.documents import ErrorDocument
    from tcpwizard.output import registry

    usage = exc.exit_code == ExitCode.USAGE
    code = exit_code(Outcome(given=ExitCode.USAGE) if usage else Outcome(incomplete=True))
    doc = ErrorDocument(args.host, args.port, str(exc), code, f"tcpwizard: error: {exc}")
    registry.get("text").render(doc, ctx.stderr)
    registry.get(args.format).render(doc, ctx.stdout)
    return int(code)
