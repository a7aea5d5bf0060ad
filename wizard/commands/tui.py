"""`tcpwizard tui [HOST]`: the check pipeline, live, in a Textual app."""

from __future__ import annotations

import argparse

from tcpwizard.commands._secret import secret_from_args
from tcpwizard.context import Context
from tcpwizard.exitcodes import ExitCode, PermissionRequired, UsageError
from tcpwizard.measure.probes.hops import PathOptions
from tcpwizard.run import CheckRequest


def request_from_args(args: argparse.Namespace, ctx: Context) -> CheckRequest:
    if not 0 < args.port <= 65535:
        raise UsageError("--port must be 1-65535")
    if args.capture and not ctx.is_root:
        raise PermissionRequired("--capture runs tcpdump: needs root (sudo tcpwizard tui ...)")
    secret = secret_from_args(args.secret_file, ctx)
    # As root the tuned modes may exceed net.core.*mem_max, as in `check`: the wizard gap
    # is then measured before any sysctl changes.
    return CheckRequest(
        host=args.host or "",
        port=args.port,
        secret=secret,
        quick=args.quick,
        force_buffers=ctx.is_root,
        hops=PathOptions() if args.hops else None,
        capture=args.capture,
    )


def run(args: argparse.Namespace, ctx: Context) -> int:
    # Imported here so the other commands never pay for loading Textual.
    from tcpwizard.tui import TcpWizardApp

    defaults = request_from_args(args, ctx)
    app = TcpWizardApp(ctx, defaults if args.host else None, defaults=defaults)
    app.run()
    return int(app.return_code or ExitCode.OK)
