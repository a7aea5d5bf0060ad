"""The transfer screen: progress per mode, and plots over time like Figures 6–8 of the drsFTP
paper — goodput, buffer size and RTT estimate per interval, one line per mode."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import TabbedContent, TabPane

from tcpwizard.tui.screens.base import WizardScreen
from tcpwizard.tui.state import LiveSeries, RunState
from tcpwizard.tui.widgets.modes import ModeRows
from tcpwizard.tui.widgets.plot import Series, TimePlot
from tcpwizard.units import format_bytes, format_rate


def _rate(v: float) -> str:
    return format_rate(v * 1e6).replace("bit/s", "b/s")


def _bytes(v: float) -> str:
    return format_bytes(v)


def _ms(v: float) -> str:
    return f"{v:.3g} ms"


def goodput_points(s: LiveSeries) -> tuple[tuple[float, float], ...]:
    if s.result is not None and s.result.samples:
        return tuple((x.t_s, x.goodput_mbps) for x in s.result.samples)
    return tuple((p.t_s, p.goodput_mbps) for p in s.samples)


def buffer_points(s: LiveSeries) -> tuple[tuple[float, float], ...]:
    """The receive buffer (what DRS sizes, Fig. 6); only in the merged result."""
    if s.result is None:
        return ()
    return tuple((x.t_s, float(x.rcvbuf_bytes)) for x in s.result.samples if x.rcvbuf_bytes)


def rtt_points(s: LiveSeries) -> tuple[tuple[float, float], ...]:
    """DRS's own RTT estimate where it has one (Fig. 8), else the kernel's smoothed RTT."""
    if s.result is None:
        return ()
    pts: list[tuple[float, float]] = []
    for x in s.result.samples:
        if x.drs_rtt_ms is not None:
            pts.append((x.t_s, x.drs_rtt_ms))
        elif x.tcp_info is not None and x.tcp_info.rtt_us:
            pts.append((x.t_s, x.tcp_info.rtt_us / 1e3))
    return tuple(pts)


class TransferScreen(WizardScreen):
    TITLE_TEXT = "Transfer"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("g", "plot('goodput')", "Goodput"),
        Binding("b", "plot('buffer')", "Buffer"),
        Binding("t", "plot('rtt')", "RTT"),
    ]

    def compose_body(self) -> ComposeResult:
        yield ModeRows(id="mode-rows")
        with TabbedContent(id="plots", initial="goodput"):
            with TabPane("Goodput", id="goodput"):
                yield TimePlot("goodput", _rate, id="plot-goodput")
            with TabPane("Buffer size", id="buffer"):
                yield TimePlot("receive buffer", _bytes, id="plot-buffer")
            with TabPane("RTT", id="rtt"):
                yield TimePlot("RTT estimate", _ms, id="plot-rtt")

    def action_plot(self, which: str) -> None:
        self.query_one(TabbedContent).active = which

    def show_body(self, state: RunState) -> None:
        rows = list(state.series.values())
        if state.running and state.stage not in ("transfer", "diagnose", "done"):
            empty = "waiting for the path measurement…"
        elif state.report is not None and state.report.transfer is None:
            empty = "no test transfer: " + (
                "; ".join(n for n in state.report.notes if "transfer" in n) or "see notes"
            )
        else:
            empty = "no transfer yet: enter a host running tcpwizard serve (n)"
        self.query_one(ModeRows).set_rows(rows, empty)
        names = [s.label for s in rows]
        plots = (
            ("#plot-goodput", goodput_points, "waiting for samples"),
            ("#plot-buffer", buffer_points, "buffer sizes arrive when each mode ends"),
            ("#plot-rtt", rtt_points, "RTT estimates arrive when each mode ends"),
        )
        for sel, points, wait in plots:
            series = [Series(n, points(s)) for n, s in zip(names, rows, strict=True)]
            # Every mode keeps its line (and colour) even before it has points.
            self.query_one(sel, TimePlot).set_series(series, wait if rows else empty)
