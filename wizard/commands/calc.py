"""`tcpwizard calc --rtt 150ms --bandwidth 500mbit`: BDP, 1x/2x buffers, sysctl lines."""

from __future__ import annotations

import argparse
import json
import math
from typing import Any

from tcpwizard import TOOL_NAME, __version__
from tcpwizard.checks.plan import BufferPlan, buffer_plan
from tcpwizard.context import Context
from tcpwizard.exitcodes import ExitCode, UsageError
from tcpwizard.report import SCHEMA_VERSION
from tcpwizard.units import format_bytes, format_rate, parse_duration, parse_rate

# Far beyond any path (1 Tbit/s x 1 hour is 4.5e14): keeps the arithmetic in exact integers.
MAX_BDP = 1e18


def plan_json(plan: BufferPlan) -> dict[str, Any]:
    return {
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": TOOL_NAME, "version": __version__},
        "calc": {
            "rtt_ms": round(plan.rtt_s * 1000, 6),
            "bandwidth_mbps": round(plan.rate_bps / 1e6, 6),
            "bdp_bytes": plan.bdp_bytes,
            "buffer_1x_bytes": plan.buffer_1x,
            "buffer_2x_bytes": plan.buffer_2x,
            "defaults_ok": plan.defaults_ok,
            "capped": plan.capped,
            "note": plan.cap_note,
            "sysctls": [
                {"key": s.key, "value": s.value, "command": s.command} for s in plan.sysctls
            ],
        },
    }


def plan_text(plan: BufferPlan) -> str:
    rtt_ms = plan.rtt_s * 1000
    lines = [
        f"path: {format_rate(plan.rate_bps)} x {rtt_ms:g} ms RTT",
        f"bandwidth-delay product: {format_bytes(plan.bdp_bytes)} ({plan.bdp_bytes} bytes)",
        f"buffer 1 x BDP: {format_bytes(plan.buffer_1x)} ({plan.buffer_1x} bytes)"
        "  - the data in flight that fills the path",
        f"buffer 2 x BDP: {format_bytes(plan.buffer_2x)} ({plan.buffer_2x} bytes)"
        "  - what to give TCP: Linux advertises only about half of a receive buffer",
    ]
    if plan.defaults_ok:
        lines.append("stock Linux autotuning limits already cover this path: no change needed.")
    if plan.cap_note:
        lines.append(f"note: {plan.cap_note}")
    lines.append("")
    lines.append("# sysctl lines (run as root; add to /etc/sysctl.d/ to keep them)")
    lines += [s.command for s in plan.sysctls]
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace, ctx: Context) -> int:
    if args.format not in ("text", "json"):
        raise UsageError(f"calc: --format {args.format} is not supported (use text or json)")
    rtt = parse_duration(args.rtt)
    if rtt <= 0:
        raise UsageError(f"--rtt must be positive: {args.rtt!r}")
    rate = parse_rate(args.bandwidth)
    if not math.isfinite(rate * rtt) or rate * rtt / 8 > MAX_BDP:
        raise UsageError(
            f"a path of {args.bandwidth} x {args.rtt} holds more than {MAX_BDP:.0e} bytes: "
            "no real path does (check the units)"
        )
    plan = buffer_plan(rtt, rate)
    if args.format == "json":
        ctx.stdout.write(json.dumps(plan_json(plan), indent=2) + "\n")
    else:
        ctx.stdout.write(plan_text(plan))
    return int(ExitCode.OK)
