"""`tcpwizard history [HOST]`: the trend of a path as a table and a terminal plot."""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict

from rich.console import Console
from rich.table import Table

from tcpwizard.context import Context
from tcpwizard.exitcodes import ExitCode
from tcpwizard.history import History, HistoryRow
from tcpwizard.units import parse_duration

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


def _since(text: str | None) -> float | None:
    if not text:
        return None
    unit = text[-1].lower()
    if unit in "hd" and text[:-1].replace(".", "", 1).isdigit():
        return time.time() - float(text[:-1]) * (3600 if unit == "h" else 86400)
    return time.time() - parse_duration(text, default_unit="s")


def _cell(v: float | None, fmt: str = "{:.1f}") -> str:
    return "-" if v is None else fmt.format(v)


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
    if args.format == "json":
        print(json.dumps([asdict(r) for r in rows], indent=2), file=ctx.stdout)
        return int(ExitCode.OK if rows else ExitCode.UNKNOWN)
    if not rows:
        print(f"no history for {args.host}", file=ctx.stderr)
        return int(ExitCode.UNKNOWN)
    console = Console(file=ctx.stdout, no_color=args.no_color, highlight=False)
    table = Table(title=f"history of {args.host}")
    for col in ("when (UTC)", "RTT ms", "cap Mbit/s", "best Mbit/s"):
        table.add_column(col, justify="right")
    table.add_column("verdict", no_wrap=True)
    table.add_column("exit", justify="right")
    for r in rows:
        table.add_row(
            time.strftime("%Y-%m-%d %H:%M", time.gmtime(r.ts)),
            _cell(r.rtt_min_ms, "{:.2f}"),
            _cell(r.capacity_mbps),
            _cell(r.throughput_mbps),
            r.limiting_factor or "-",
            "-" if r.exit_code is None else str(r.exit_code),
        )
    console.print(table)
    if not args.no_plot:
        _plot(console, rows)
    return int(ExitCode.OK)


def _buffer(args: argparse.Namespace, ctx: Context, rows: list[HistoryRow]) -> int:
    """--buffer: what an application should ask for on this path (exit 3: nothing measured)."""
    from tcpwizard.buffer_advice import buffer_advice, render_text
    from tcpwizard.checks.audit import total_ram_bytes

    advice = buffer_advice(args.host, rows, total_ram_bytes())
    if advice is None:
        print(f"no measured bandwidth-delay product for {args.host} in history", file=ctx.stderr)
        if args.format == "json":
            print("null", file=ctx.stdout)
        return int(ExitCode.UNKNOWN)
    if args.format == "json":
        print(json.dumps(advice.to_json(), indent=2), file=ctx.stdout)
    else:
        ctx.stdout.write(render_text(advice))
    return int(ExitCode.OK)


def _plot(console: Console, rows: list[HistoryRow]) -> None:
    series: list[tuple[str, list[float | None]]] = [
        ("min RTT", [r.rtt_min_ms for r in rows]),
        ("capacity", [r.capacity_mbps for r in rows]),
        ("throughput", [r.throughput_mbps for r in rows]),
    ]
    for name, values in series:
        known = [v for v in values if v is not None]
        if known:
            console.print(f"{name:>10} {sparkline(values)}  {min(known):.1f} .. {max(known):.1f}")
