"""Tables of `python -m benchmarks paper` (Markdown and text) and the acceptance checks."""

from __future__ import annotations

import math
from dataclasses import dataclass

from benchmarks.paper_matrix import (
    TUNING_BY_NAME,
    UNTUNED_WINDOW_BYTES,
    Cell,
    Plan,
    goodput_cap_mbps,
    window_reference_mbps,
)
from benchmarks.paper_results import CellResult, ResultStore
from tcpwizard.units import format_bytes

TOLERANCE = 0.10  # repetitions within 10 % of their median; untuned within 10 % of W/RTT

PLOTS = (
    ("paper-streams.png", "Throughput against parallel streams, one panel per delay"),
    ("paper-drs-buffer.png", "Receive buffer over time: DRS against kernel autotuning"),
    ("paper-efficiency.png", "Memory efficiency: Mbit/s per MB of receive buffer"),
)


@dataclass(frozen=True)
class Check:
    cell: Cell
    repeatable: bool | None  # None: not measured (enough)
    window_ratio: float | None  # untuned only: steady goodput / reference
    window_ok: bool | None

    @property
    def ok(self) -> bool:
        return self.repeatable is not False and self.window_ok is not False


def check_cell(cr: CellResult, plan: Plan) -> Check:
    spread = cr.spread
    full = len(cr.good_runs) >= plan.reps
    repeatable = None if not full or math.isnan(spread) else spread <= TOLERANCE
    ratio: float | None = None
    window_ok: bool | None = None
    if TUNING_BY_NAME[cr.cell.tuning].mode == "untuned" and full:
        ref = window_reference_mbps(cr.cell.rtt_ms, cr.cell.streams, plan.rate_bps)
        ratio = cr.median_steady_mbps / ref
        window_ok = abs(ratio - 1) <= TOLERANCE
    return Check(cr.cell, repeatable, ratio, window_ok)


def checks(plan: Plan, store: ResultStore) -> list[Check]:
    return [check_cell(store.get(c), plan) for c in plan.cells()]


def _f(x: float | None, fmt: str = ".1f") -> str:
    return "–" if x is None or math.isnan(x) else format(x, fmt)


def _mark(ok: bool | None) -> str:
    return "–" if ok is None else ("pass" if ok else "FAIL")


def pivot_table(plan: Plan, store: ResultStore) -> list[str]:
    """Median Mbit/s, one row per (delay, streams), one column per tuning: the papers'
    figures as numbers."""
    names = [t.name for t in plan.tunings]
    lines = [
        "| RTT | streams | " + " | ".join(names) + " |",
        "|---:|---:|" + "---:|" * len(names),
    ]
    for rtt in plan.rtts_ms:
        for n in plan.streams:
            row = [_f(store.get(Cell(t, rtt, n)).median_mbps) for t in names]
            lines.append(f"| {rtt:g} ms | {n} | " + " | ".join(row) + " |")
    return lines


def buffer_table(plan: Plan, store: ResultStore) -> list[str]:
    """Largest receive buffer and Mbit/s per MB with one stream: the memory each tuning
    spends for its throughput (Engelhart et al. §5.5)."""
    names = [t.name for t in plan.tunings]
    n = plan.streams[0]
    lines = [
        "| RTT | BDP | " + " | ".join(names) + " |",
        "|---:|---:|" + "---:|" * len(names),
    ]
    for rtt in plan.rtts_ms:
        cells = [store.get(Cell(t, rtt, n)) for t in names]
        row = [f"{format_bytes(c.max_buffer_bytes)} ({_f(c.mbps_per_mb)})" for c in cells]
        bdp = format_bytes(plan.rate_bps / 8 * rtt / 1e3)
        lines.append(f"| {rtt:g} ms | {bdp} | " + " | ".join(row) + " |")
    return lines


def window_table(plan: Plan, store: ResultStore) -> list[str]:
    lines = [
        "| RTT | streams | steady Mbit/s | reference | ratio | result |",
        "|---:|---:|---:|---|---:|---|",
    ]
    for rtt in plan.rtts_ms:
        for n in plan.streams:
            cell = Cell("untuned", rtt, n)
            if cell.tuning not in {t.name for t in plan.tunings}:
                continue
            ch = check_cell(store.get(cell), plan)
            ref = window_reference_mbps(rtt, n, plan.rate_bps)
            capped = ref >= goodput_cap_mbps(plan.rate_bps)
            how = (
                f"bottleneck goodput {ref:.1f}"
                if capped
                else f"{n} x {UNTUNED_WINDOW_BYTES} B / {rtt:g} ms = {ref:.1f}"
            )
            lines.append(
                f"| {rtt:g} ms | {n} | {_f(store.get(cell).median_steady_mbps)} | {how} "
                f"| {_f(ch.window_ratio, '.3f')} | {_mark(ch.window_ok)} |"
            )
    return lines


def cells_table(plan: Plan, store: ResultStore) -> list[str]:
    lines = [
        "| RTT | streams | tuning | median Mbit/s | runs | spread | steady Mbit/s "
        "| max rcv buffer | Mbit/s per MB | iperf3 Mbit/s | repeatable |",
        "|---:|---:|---|---:|---|---:|---:|---:|---:|---:|---|",
    ]
    for c in plan.cells():
        cr = store.get(c)
        runs = ", ".join(f"{r.mbps:.1f}" for r in cr.good_runs) or "–"
        bad = len(cr.runs) - len(cr.good_runs)
        if bad:
            runs += f" (+{bad} failed)"
        ip = _f(cr.iperf3_mbps) if cr.iperf3_error is None else "error"
        if TUNING_BY_NAME[c.tuning].iperf3 == "none":
            ip = "n/a"
        ch = check_cell(cr, plan)
        lines.append(
            f"| {c.rtt_ms:g} ms | {c.streams} | {c.tuning} | {_f(cr.median_mbps)} | {runs} "
            f"| {_f(cr.spread * 100, '.1f')} % | {_f(cr.median_steady_mbps)} "
            f"| {format_bytes(cr.max_buffer_bytes)} | {_f(cr.mbps_per_mb)} | {ip} "
            f"| {_mark(ch.repeatable)} |"
        )
    return lines


DRS_SHARE_TARGET = 0.95  # DRS >= this x the better of autotune and autotune-raised


def drs_table(plan: Plan, store: ResultStore) -> list[str]:
    """DRS against kernel autotuning per delay and stream count: its median over the better
    of autotune's and autotune-raised's, and whether it moved more Mbit/s per MB of receive
    buffer than every other tuning but untuned (whose 64 KB is efficient by starving)."""
    names = {t.name for t in plan.tunings}
    if "drs" not in names or not names & {"autotune", "autotune-raised"}:
        return []
    rivals = [t.name for t in plan.tunings if t.name not in ("drs", "untuned")]
    lines = [
        "| RTT | streams | drs Mbit/s | better autotune | DRS / it | steady: DRS / it | "
        "DRS Mbit/s per MB | best other (not untuned) | more per MB |",
        "|---:|---:|---:|---|---:|---:|---:|---|---|",
    ]
    shares, efficient, cells = 0, 0, 0
    for rtt in plan.rtts_ms:
        for n in plan.streams:
            drs = store.get(Cell("drs", rtt, n))
            autos = [
                (store.get(Cell(t, rtt, n)).median_mbps, t)
                for t in ("autotune", "autotune-raised")
                if t in names
            ]
            autos = [(m, t) for m, t in autos if not math.isnan(m)]
            if math.isnan(drs.median_mbps) or not autos:
                continue
            best, best_name = max(autos)
            ratio = drs.median_mbps / best if best > 0 else float("nan")
            # The same pair without slow start and the final drain (steady_goodput): a
            # large send buffer keeps delivering after a duration-limited sender stops,
            # which lifts the whole-transfer figure of the mode that has one.
            best_steady = store.get(Cell(best_name, rtt, n)).median_steady_mbps
            steady = drs.median_steady_mbps / best_steady if best_steady > 0 else float("nan")
            others = [(store.get(Cell(t, rtt, n)).mbps_per_mb, t) for t in rivals]
            others = [(e, t) for e, t in others if not math.isnan(e)]
            top, top_name = max(others) if others else (float("nan"), "–")
            more = bool(others) and drs.mbps_per_mb > top
            cells += 1
            shares += ratio >= DRS_SHARE_TARGET
            efficient += more
            lines.append(
                f"| {rtt:g} ms | {n} | {_f(drs.median_mbps)} | {_f(best)} ({best_name}) "
                f"| {_f(ratio, '.3f')} | {_f(steady, '.3f')} | {_f(drs.mbps_per_mb)} "
                f"| {_f(top)} ({top_name}) "
                f"| {'yes' if more else 'no'} |"
            )
    lines += [
        "",
        f"DRS >= {DRS_SHARE_TARGET} x the better autotune: {shares}/{cells} cells; more Mbit/s "
        f"per MB than every other tuning but untuned: {efficient}/{cells} cells.",
    ]
    return lines


def summary_line(plan: Plan, store: ResultStore) -> str:
    cs = checks(plan, store)
    rep = [c for c in cs if c.repeatable is not None]
    win = [c for c in cs if c.window_ok is not None]
    spreads = [store.get(c.cell).spread for c in rep]
    worst = max(spreads) if spreads else float("nan")
    return (
        f"Repeatable (every run within {TOLERANCE:.0%} of the cell's median): "
        f"{sum(bool(c.repeatable) for c in rep)}/{len(rep)} cells (largest spread "
        f"{_f(worst * 100)} %); untuned within {TOLERANCE:.0%} of window/RTT: "
        f"{sum(bool(c.window_ok) for c in win)}/{len(win)}."
    )


def text_table(plan: Plan, store: ResultStore) -> str:
    """For the terminal: the pivot table without Markdown pipes."""
    names = [t.name for t in plan.tunings]
    out = ["RTT ms  streams  " + "  ".join(f"{n:>15}" for n in names)]
    for rtt in plan.rtts_ms:
        for n in plan.streams:
            row = [f"{_f(store.get(Cell(t, rtt, n)).median_mbps):>15}" for t in names]
            out.append(f"{rtt:>6g}  {n:>7}  " + "  ".join(row))
    out.append(summary_line(plan, store))
    return "\n".join(out)


def markdown(plan: Plan, store: ResultStore, notes: str) -> str:
    meta = store.meta
    length = plan.length_text() + (" (`--quick`)" if plan.quick else "")
    head = [
        "# Reproducing the papers (`python -m benchmarks paper`)",
        "",
        f"{meta.get('finished', '?')}; kernel {meta.get('kernel', '?')}, "
        f"{meta.get('cpus', '?')} CPUs, load average {meta.get('load_at_start', '?')} at start; "
        f"lab {plan.rate_bps / 1e6:g} Mbit/s delay line; congestion control "
        f"{meta.get('congestion_control', '?')}; {length}; {plan.reps} repetitions per cell; "
        f"wall time of the last run {meta.get('wall_s_last', '?')} s.",
        "",
        "Tunings: " + "; ".join(f"**{t.name}** = {t.label}" for t in plan.tunings) + ".",
        "",
        "## Throughput (median of the repetitions, Mbit/s)",
        "",
        *pivot_table(plan, store),
        "",
        summary_line(plan, store),
        "",
        *[f"![{title}](img/{name})\n" for name, title in PLOTS],
        "## DRS against kernel autotuning",
        "",
        *drs_table(plan, store),
        "",
        f"## Receive buffer with {plan.streams[0]} stream (largest; Mbit/s per MB in brackets)",
        "",
        *buffer_table(plan, store),
        "",
        "## Untuned: window / RTT",
        "",
        *window_table(plan, store),
        "",
        "## Every cell",
        "",
        *cells_table(plan, store),
        "",
        notes,
    ]
    return "\n".join(head)
