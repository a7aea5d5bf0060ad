"""`tcpwizard check [HOST]`: the local host audit (this branch: no path measurement yet)."""

from __future__ import annotations

import argparse
import socket

from tcpwizard.checks import audit
from tcpwizard.commands._path_hint import bdp_from_args
from tcpwizard.context import Context
from tcpwizard.exitcodes import Unavailable
from tcpwizard.output import render_report
from tcpwizard.report import TargetInfo, local_report

NOT_YET = (
    "path measurement, test transfer and verdict for HOST are not implemented in this "
    "build yet: this is the local audit of the route to HOST"
)


def resolve(host: str) -> str:
    """The first address of `host` (IPv4 or IPv6 literal or name); one-line error if none."""
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        reason = exc.args[1] if isinstance(exc, socket.gaierror) and len(exc.args) > 1 else exc
        raise Unavailable(f"cannot resolve {host!r}: {reason}") from None
    return str(infos[0][4][0])


def run(args: argparse.Namespace, ctx: Context) -> int:
    bdp = bdp_from_args(args.rtt, args.bandwidth)
    target: TargetInfo | None = None
    notes: tuple[str, ...] = ()
    address = None
    if args.host:
        address = resolve(args.host)
        target = TargetInfo(host=args.host, address=address, port=args.port)
        notes = (NOT_YET,)
    if args.fix:
        ctx.progress("tcpwizard: --fix is not available in this build; printing the fixes only")
    host_audit = audit(ctx, address, bdp)
    report = local_report(host_audit, target, notes)
    color = False if args.no_color else ctx.color
    return render_report(report, args.format, ctx.stdout, color, args.warning, args.critical)
