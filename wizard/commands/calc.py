"""`tcpwizard calc --rtt 150ms --bandwidth 500mbit`: BDP, 1x/2x buffers, sysctl lines."""

from __future__ import annotations

import argparse
import math

from tcpwizard.checks.plan import buffer_plan
from tcpwizard.commands._output import emit
from tcpwizard.context import Context
from tcpwizard.documents import CalcDocument
from tcpwizard.exitcodes import UsageError
from tcpwizard.units import parse_duration, parse_rate

# Far beyond any path (1 Tbit/s x 1 hour is 4.5e14): keeps the arithmetic in exact integers.
MAX_BDP = 1e18


def run(args: argparse.Namespace, ctx: Context) -> int:
    rtt = parse_duration(args.rtt)
    if rtt <= 0:
        raise UsageError(f"--rtt must be positive: {args.rtt!r}")
    rate = parse_rate(args.bandwidth)
    if not math.isfinite(rate * rtt) or rate * rtt / 8 > MAX_BDP:
        raise UsageError(
            f"a path of {args.bandwidth} x {args.rtt} holds more than {MAX_BDP:.0e} bytes: "
            "no real path does (check the units)"
        )
    return emit(CalcDocument.of(buffer_plan(rtt, rate)), args, ctx)
