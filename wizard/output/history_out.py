"""`history HOST` as a table with a sparkline per series, or as JSON rows; `history HOST
--buffer` as shell, C and Python, or as JSON."""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from typing import TextIO

from tcpwizard.documents import BufferDocument, HistoryDocument
from tcpwizard.history import HistoryRow
from tcpwizard.output.document import RenderOptions

BLOCKS = " ▁▂▃▄▅▆▇█"


def sparkline(values: list[float | None]) -> str:
    known = [v for v in values if v is not None]
    if not known:
        return ""
    lo, hi = min(known), max(known)
    span = hi - lo or 1.0
    return "".join(
        "·" if v is None else BLOCKS[1 + int((v - lo) / span * (len(BLOCKS) - 2))] for v in values
    )


def _cell(v: float | None, fmt: str = "{:.1f}") -> str:
    return "-" if v is None else fmt.format(v)


def render(doc: HistoryDocument, stream: TextIO, opts: RenderOptions) -> None:
    if not doc.rows:
        return  # the command says so on stderr
    from rich.console import Console
    from rich.table import Table

    console = Console(file=stream, no_color=opts.color is False, highlight=False)
    table = Table(title=f"history of {doc.host}")
    for col in ("when (UTC)", "RTT ms", "cap Mbit/s", "best Mbit/s"):
        table.add_column(col, justify="right")
    table.add_column("verdict", no_wrap=True)
    table.add_column("exit", justify="right")
    for r in doc.rows:
        table.add_row(
            time.strftime("%Y-%m-%d %H:%M", time.gmtime(r.ts)),
            _cell(r.rtt_min_ms, "{:.2f}"),
            _cell(r.capacity_mbps),
            _cell(r.throughput_mbps),
            r.limiting_factor or "-",
            "-" if r.exit_code is None else str(r.exit_code),
        )
    console.print(table)
    if doc.plot:
        for line in _plot(doc.rows):
            console.print(line)


def _plot(rows: tuple[HistoryRow, ...]) -> list[str]:
    series: list[tuple[str, list[float | None]]] = [
        ("min RTT", [r.rtt_min_ms for r in rows]),
        ("capacity", [r.capacity_mbps for r in rows]),
        ("throughput", [r.throughput_mbps for r in rows]),
    ]
    lines = []
    for name, values in series:
        known = [v for v in values if v is not None]
        if known:
            lines.append(f"{name:>10} {sparkline(values)}  {min(known):.1f} .. {max(known):.1f}")
    return lines


def render_json(doc: HistoryDocument, stream: TextIO, opts: RenderOptions) -> None:
    print(json.dumps([asdict(r) for r in doc.rows], indent=2), file=stream)


def render_buffer(doc: BufferDocument, stream: TextIO, opts: RenderOptions) -> None:
    if doc.advice is not None:
        from tcpwizard.buffer_advice import render_text

        stream.write(render_text(doc.advice))


def render_buffer_json(doc: BufferDocument, stream: TextIO, opts: RenderOptions) -> None:
    text = "null" if doc.advice is None else json.dumps(doc.advice.to_json(), indent=2)
    print(text, file=stream)
