"""`tcpwizard path HOST`: the hops, where the RTT jumps, where loss begins, the path MTU."""

from __future__ import annotations

import argparse

from tcpwizard.advice.path_advice import path_advice
from tcpwizard.commands._output import emit, machine
from tcpwizard.context import Context
from tcpwizard.documents import PathDocument
from tcpwizard.measure.probes.hops import PathOptions, trace
from tcpwizard.units import parse_duration


def options_from_args(args: argparse.Namespace) -> PathOptions:
    return PathOptions(
        method=args.method,
        count=args.count or PathOptions.count,
        settle=args.count is None,
        interval_s=parse_duration(args.interval, default_unit="s"),
        timeout_s=parse_duration(args.timeout, default_unit="s"),
        max_ttl=args.max_hops,
        max_time_s=parse_duration(args.max_time, default_unit="s"),
        port=args.port,
        mtu=not args.no_mtu,
        resolve=not args.numeric,
        family=4 if args.ipv4 else (6 if args.ipv6 else 0),
    )


def run(args: argparse.Namespace, ctx: Context) -> int:
    opts = options_from_args(args)
    opts.validate()
    if not machine(args.format):
        ctx.progress(f"probing the hops to {args.host} (at most {opts.max_time_s:g} s)")
    hops = trace(args.host, opts)
    return emit(PathDocument.of(hops, path_advice(hops)), args, ctx)
