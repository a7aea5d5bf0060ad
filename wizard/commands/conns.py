"""`tcpwizard conns`: why is each live TCP connection of this host as fast as it is."""

from __future__ import annotations

import argparse

from tcpwizard.context import Context
from tcpwizard.exitcodes import ExitCode, UsageError
from tcpwizard.measure.observe.conns import ConnsUnavailable
from tcpwizard.units import parse_duration, parse_rate

CLEAR = "\x1b[H\x1b[2J"


def run(args: argparse.Namespace, ctx: Context) -> int:
    from tcpwizard.advice.conns import DEFAULT_RATE_BPS
    from tcpwizard.commands._output import emit, machine
    from tcpwizard.conns_report import ConnFilter, connections_report, syn_tracer

    interval = parse_duration(args.interval, default_unit="s")
    if not 0.2 <= interval <= 60:
        raise UsageError("--interval must be between 0.2s and 60s")
    flt = ConnFilter(args.port, args.address, args.process, args.busy)
    flt.network()  # a bad --address fails before the first interval
    rate = parse_rate(args.bandwidth) if args.bandwidth else DEFAULT_RATE_BPS
    rounds = args.count if args.watch else 1
    code = int(ExitCode.OK)
    done = 0
    try:
        while rounds == 0 or done < rounds:
            try:
                report = connections_report(
                    flt,
                    interval,
                    ctx.sysctl_root,
                    rate,
                    tracer=syn_tracer() if args.hops else None,
                )
            except ConnsUnavailable as exc:
                raise ConnsFailed(str(exc)) from None
            if not machine(args.format):
                if args.watch and ctx.stdout.isatty():
                    ctx.stdout.write(CLEAR)
                elif done:
                    ctx.stdout.write("\n")
            code = emit(report, args, ctx)
            done += 1
    except KeyboardInterrupt:
        if not done:
            raise
    return code


class ConnsFailed(UsageError):
    exit_code = ExitCode.UNKNOWN
