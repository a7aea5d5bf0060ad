"""`tcpwizard history [HOST]`: the trend of a path as a table and a terminal plot."""

from __future__ import annotations

import argparse
import time

from tcpwizard.commands._output import emit, machine
from tcpwizard.context import Context
from tcpwizard.documents import BufferDocument, HistoryDocument
from tcpwizard.exitcodes import ExitCode
from tcpwizard.history import History, HistoryRow
from tcpwizard.units import parse_duration


def _since(text: str | None) -> float | None:
    if not text:
        return None
    unit = text[-1].lower()
    if unit in "hd" and text[:-1].replace(".", "", 1).isdigit():
        return time.time() - float(text[:-1]) * (3600 if unit == "h" else 86400)
    return time.time() - parse_duration(text, default_unit="s")


def run(args: argparse.Namespace, ctx: Context) -> int:
    store = History(args.db)
    if not args.host:
        for host in store.hosts():
            print(host, file=ctx.stdout)
        return int(ExitCode.OK)
    rows, bad = store.rows(args.host, since=_since(args.since))
    for b in bad:
        print(f"tcpwizard: warning: history row {b.id} is unreadable: {b.reason}", file=ctx.stderr)
    if args.buffer:
        return _buffer(args, ctx, rows)
    doc = HistoryDocument.of(args.host, tuple(rows), plot=not args.no_plot)
    if not rows and not machine(args.format):
        print(f"no history for {args.host}", file=ctx.stderr)
    return emit(doc, args, ctx)


def _buffer(args: argparse.Namespace, ctx: Context, rows: list[HistoryRow]) -> int:
    """--buffer: what an application should ask for on this path (exit 3: nothing measured)."""
    from tcpwizard.buffer_advice import buffer_advice
    from tcpwizard.checks.audit import total_ram_bytes

    advice = buffer_advice(args.host, rows, total_ram_bytes())
    if advice is None:
        print(f"no measured bandwidth-delay product for {args.host} in history", file=ctx.stderr)
    return emit(BufferDocument.of(args.host, advice), args, ctx)
