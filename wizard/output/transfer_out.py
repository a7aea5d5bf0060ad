"""`transfer` as text (a row per mode and direction) and as JSON."""

from __future__ import annotations

import json
from typing import Any, TextIO

from tcpwizard import TOOL_NAME, __version__
from tcpwizard.documents import TransferDocument
from tcpwizard.measure.model import ModeResult, TransferResult
from tcpwizard.output.document import RenderOptions
from tcpwizard.output.measure_json import transfer_json
from tcpwizard.report import SCHEMA_VERSION
from tcpwizard.units import format_bytes


def document_json(doc: TransferDocument) -> dict[str, Any]:
    return {
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": TOOL_NAME, "version": __version__},
        "target": {"host": doc.host, "port": doc.port},
        "transfer": transfer_json(doc.result),
    }


def render_json(doc: TransferDocument, stream: TextIO, opts: RenderOptions) -> None:
    print(json.dumps(document_json(doc), indent=2, allow_nan=False), file=stream)


def render(doc: TransferDocument, stream: TextIO, opts: RenderOptions) -> None:
    print(render_text(doc.host, doc.result), file=stream)


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.0f}%"


def render_text(host: str, result: TransferResult) -> str:
    lines = [
        f"Test transfers with {host} ({result.streams} stream"
        f"{'s' if result.streams > 1 else ''}; congestion control local "
        f"{result.local_congestion_control or '?'}, peer {result.peer_congestion_control or '?'})",
        f"  {'mode':<16}{'dir':<5}{'Mbit/s':>10}{'max buffer':>12}{'Mbit/s/MB':>11}"
        f"{'retrans':>9}{'rwnd-lim':>10}{'sndbuf-lim':>11}",
    ]
    for m in result.modes:
        lines.append(_row(m))
    for m in result.modes:
        for note in m.notes:
            if "autotuning was off" in note:
                continue
            lines.append(f"  note ({m.mode} {m.direction}): {note}")
        if m.error:
            lines.append(f"  error ({m.mode} {m.direction}): {m.error}")
    if any(not m.rcv_autotuning for m in result.modes):
        lines.append(
            "  note: every mode but autotune sets SO_RCVBUF, which turns kernel autotuning off"
            " for that socket"
        )
    return "\n".join(lines)


def _row(m: ModeResult) -> str:
    return (
        f"  {m.mode:<16}{m.direction:<5}{m.throughput_mbps:>10.1f}"
        f"{format_bytes(m.max_buffer_bytes):>12}{m.mbps_per_mb:>11.1f}"
        f"{m.retransmits:>9}{_pct(m.rwnd_limited):>10}{_pct(m.sndbuf_limited):>11}"
    )
