"""`tcpwizard path HOST`: the hops, where the RTT jumps, where loss begins, the path MTU."""

from __future__ import annotations

import argparse
import json

from tcpwizard.advice.path_advice import path_advice
from tcpwizard.context import Context
from tcpwizard.exitcodes import UsageError
from tcpwizard.measure.pathprobe import PathOptions, trace
from tcpwizard.units import parse_duration


def options_from_args(args: argparse.Namespace) -> PathOptions:
    return PathOptions(
        method=args.method,
        count=args.count,
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
    from tcpwizard.output import path_json, path_text

    if args.format not in ("text", "json"):
        raise UsageError("path prints text or json")
    opts = options_from_args(args)
    opts.validate()
    if args.format == "text":
        ctx.progress(f"probing the hops to {args.host} (at most {opts.max_time_s:g} s)")
    hops = trace(args.host, opts)
    adv = path_advice(hops)
    if args.format == "json":
        doc = path_json.path_json(hops, adv)
        print(json.dumps(doc, indent=2, allow_nan=False), file=ctx.stdout)
    else:
        path_text.render(hops, adv, ctx.stdout)
    return int(adv.exit_code)
