"""The transfer screen: progress per mode, and plots over time like Figures 6–8 of the drsFTP
paper — goodput, buffer size and RTT estimate per interval, one line per mode — and the
time-sequence graph of one transfer at a time (what `check --plot` draws as PNG: sequence
sent and acknowledged, the receive window's right edge, retransmissions)."""

from __future__ import annotations

import itertools
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import TabbedContent, TabPane

from tcpwizard.measure.observe.tsg import TsgSeries
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


Points = tuple[tuple[float, float], ...]
# The plot's colours (primary, warning, success, error) in the PNG's roles: data blue,
# window edge orange, ACK green, retransmissions red.
SEQUENCE_COLOURS = {"sent": 0, "window edge": 1, "acked": 2, "retransmitted": 3}


def _steps(xs: tuple[tuple[float, int], ...]) -> Points:
    """A value that holds until the next one (an ACK, a window edge) as a step line."""
    out: list[tuple[float, float]] = []
    for (t, v), (t_next, _v) in itertools.pairwise(xs):
        out += [(t, float(v)), (t_next, float(v))]
    if xs:
        out.append((xs[-1][0], float(xs[-1][1])))
    return tuple(out)


def sequence_series(s: TsgSeries) -> list[Series]:
    """The time-sequence graph's series: the receive window's right edge, the cumulative
    ACK, the highest sequence sent so far (drawn over both: data pressed against the edge
    shows as the data line) and each retransmission as a mark; coloured as in the PNG."""
    sent: list[tuple[float, float]] = []
    high = 0
    for t, _start, end in s.data:
        high = max(high, end)
        sent.append((t, float(high)))
    retransmits = tuple((t, float(end)) for t, _start, end in s.retransmits)
    return [
        Series("window edge", _steps(s.window), colour=SEQUENCE_COLOURS["window edge"]),
        Series("acked", _steps(s.acks), colour=SEQUENCE_COLOURS["acked"]),
        Series("sent", tuple(sent), colour=SEQUENCE_COLOURS["sent"]),
        Series("retransmitted", retransmits, True, SEQUENCE_COLOURS["retransmitted"]),
    ]


NOT_CAPTURED = "no sequence data: start the TUI as root with --capture (tcpdump records them)"


def sequence_flows(state: RunState, s: LiveSeries) -> tuple[TsgSeries, ...] | str:
    """The captured flows of one transfer (largest first), or in one line why there are
    none."""
    req, report = state.request, state.report
    if req is None or not req.capture:
        return NOT_CAPTURED
    if report is None:
        return "the time-sequence graph is drawn from the capture when the check ends"
    if report.capture is None:
        return NOT_CAPTURED
    if report.capture.error:
        return f"no sequence data: {report.capture.error}"
    return report.capture.flows_of(s.mode, s.direction) or (
        f"no sequence data for {s.label}: none of its packets were captured"
    )


_PLOTS = Binding.Group("Plots", compact=True)


class TransferScreen(WizardScreen):
    TITLE_TEXT = "Transfer"
    BINDINGS: ClassVar[list[BindingType]] = [
        # One footer entry "gbts Plots": with "esc Cancel" the footer must fit 80 columns.
        Binding("g", "plot('goodput')", "Goodput", group=_PLOTS),
        Binding("b", "plot('buffer')", "Buffer", group=_PLOTS),
        Binding("t", "plot('rtt')", "RTT", group=_PLOTS),
        Binding("s", "sequence", "Sequence", group=_PLOTS),
    ]
    # Which transfer the time-sequence graph shows (s again: the next one).
    sequence_of = 0

    def compose_body(self) -> ComposeResult:
        yield ModeRows(id="mode-rows")
        with TabbedContent(id="plots", initial="goodput"):
            with TabPane("Goodput", id="goodput"):
                yield TimePlot("goodput", _rate, id="plot-goodput")
            with TabPane("Buffer size", id="buffer"):
                yield TimePlot("receive buffer", _bytes, id="plot-buffer")
            with TabPane("RTT", id="rtt"):
                yield TimePlot("RTT estimate", _ms, id="plot-rtt")
            with TabPane("Sequence", id="sequence"):
                yield TimePlot("sequence", _bytes, id="plot-sequence")

    def action_plot(self, which: str) -> None:
        self.query_one(TabbedContent).active = which

    def action_sequence(self) -> None:
        tabs = self.query_one(TabbedContent)
        if tabs.active == "sequence":
            self.sequence_of += 1
            self.show_state(self.wizard.state)
        tabs.active = "sequence"

    def show_body(self, state: RunState) -> None:
        # Uploads first, each way in the order it started: as the report lists them, also
        # when both ways ran at once (--quick) and the way back reported first.
        rows = sorted(state.series.values(), key=lambda s: s.direction != "up")
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
        self._show_sequence(state, rows, empty)

    def _show_sequence(self, state: RunState, rows: list[LiveSeries], empty: str) -> None:
        plot = self.query_one("#plot-sequence", TimePlot)
        if not rows:
            plot.title = "sequence"
            plot.set_series([], empty)
            return
        i = self.sequence_of % len(rows)
        chosen = rows[i]
        plot.title = f"{chosen.label} {i + 1}/{len(rows)}"
        flows = sequence_flows(state, chosen)
        if isinstance(flows, str):
            plot.set_series([], flows)
            return
        if len(flows) > 1:
            plot.title += f" (largest of {len(flows)} streams)"
        plot.set_series(sequence_series(flows[0]))
