"""`tcpwizard exporter`: Prometheus /metrics for a list of targets, checked on a schedule."""

from __future__ import annotations

import argparse
import signal
import sqlite3
import threading
from collections.abc import Mapping
from types import FrameType
from typing import Any

from tcpwizard.commands._secret import secret_from_args
from tcpwizard.context import Context
from tcpwizard.exitcodes import ExitCode, TcpWizardError, UsageError
from tcpwizard.exporter import Exporter, Target, load_targets, serve_exporter
from tcpwizard.output.errors import error_report
from tcpwizard.units import parse_duration

MIN_INTERVAL_S = 10.0


def check_target(ctx: Context, quick: bool, record: bool, secret: bytes | None = None) -> Any:
    """The real pipeline for one target; failures become a report with exit_code 3."""
    from tcpwizard.cli import DEFAULT_PORT
    from tcpwizard.history import History
    from tcpwizard.output.json_format import report_json
    from tcpwizard.run import CheckRequest, run_check

    def check(t: Target) -> Mapping[str, Any]:
        port = t.port or DEFAULT_PORT
        try:
            req = CheckRequest(t.host, port, secret=secret, quick=quick)
            doc = report_json(run_check(req, ctx))
        except TcpWizardError as exc:
            doc = error_report(t.host, port, str(exc), ExitCode.UNKNOWN)
        if record:
            try:
                History().append(t.host, doc)
            except (OSError, sqlite3.Error, TcpWizardError) as exc:
                ctx.progress(f"tcpwizard exporter: history not recorded: {exc}")
        return doc

    return check


def run(args: argparse.Namespace, ctx: Context) -> int:
    targets = load_targets(args.targets)
    interval = parse_duration(args.interval, default_unit="s")
    if interval < MIN_INTERVAL_S:
        raise UsageError(f"--interval must be at least {MIN_INTERVAL_S:g}s")
    secret = secret_from_args(args.secret_file, ctx)
    check = check_target(ctx, args.quick, not args.no_history, secret)
    exporter = Exporter(targets, interval, check)
    server, worker = serve_exporter(exporter, args.listen)
    ctx.progress(
        f"tcpwizard exporter: {len(targets)} targets every {interval:g} s, "
        f"/metrics on {args.listen}"
    )
    stop = threading.Event()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, on_signal)
    stop.wait()
    exporter.stop()
    server.shutdown()
    worker.join(timeout=5)
    return int(ExitCode.OK)
