"""`calc` as text (the BDP, the buffers, the sysctl lines) and as JSON."""

from __future__ import annotations

import json
from typing import Any, TextIO

from tcpwizard import TOOL_NAME, __version__
from tcpwizard.checks.plan import BufferPlan
from tcpwizard.documents import CalcDocument
from tcpwizard.output.document import RenderOptions
from tcpwizard.report import SCHEMA_VERSION
from tcpwizard.units import format_bytes, format_rate


def render(doc: CalcDocument, stream: TextIO, opts: RenderOptions) -> None:
    stream.write(plan_text(doc.plan))


def render_json(doc: CalcDocument, stream: TextIO, opts: RenderOptions) -> None:
    stream.write(json.dumps(plan_json(doc.plan), indent=2) + "\n")


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
