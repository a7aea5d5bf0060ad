"""The path screen: the pipeline's stages with live progress, the probe log, the path as
measured (RTT statistics, capacity, BDP) and, when the check probed them, the hops (as
`tcpwizard path` shows them: RTT jump, loss start, ICMP rate limits, the path MTU)."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import DataTable, Label, Log, ProgressBar, Static

from tcpwizard.output.path_text import hops_heading, path_mtu_line
from tcpwizard.report import Report
from tcpwizard.tui.screens.base import WizardScreen
from tcpwizard.tui.state import STAGE_TITLES, STAGES, RunState
from tcpwizard.tui.text import HOP_COLUMNS, hop_rows, path_rows

MARK = {"done": "✔", "running": "●", "pending": "·", "skipped": "–", "stopped": "■"}
NUMERIC = {"hop", "min ms", "med ms", "loss", "MTU"}


def hops_hint(state: RunState) -> str:
    """One line instead of the hops table: why there is none, and how to get one."""
    req = state.request
    if req is not None and req.hops is not None:
        if state.running:
            return "Hops: probed during the check; the table comes with its result"
        return "Hops: none, the check did not finish"
    return "Hops: not probed (start with `tcpwizard tui HOST --hops` to see them)"


class PathScreen(WizardScreen):
    TITLE_TEXT = "Path"

    def compose_body(self) -> ComposeResult:
        with Horizontal(id="path-body"):
            with Vertical(id="stages-pane"):
                yield Label("Stages", classes="pane-title")
                for stage in STAGES:
                    yield Static(id=f"stage-{stage}", classes="stage pending", markup=False)
                yield ProgressBar(id="probe-progress", show_eta=False, show_percentage=False)
                yield Log(id="stage-log", max_lines=500)
            with Vertical(id="path-pane"):
                yield Label("Path as measured", classes="pane-title")
                yield DataTable(id="path-table", show_cursor=False, zebra_stripes=False)
                yield Static(id="path-notes", markup=False)
        with Vertical(id="hops-pane"):
            yield Static(id="hops-title", classes="pane-title", markup=False)
            yield DataTable(id="hops-table", show_cursor=False, zebra_stripes=False)
            yield Static(id="hops-mtu", markup=False)
        self._logged = 0
        self._log_of: list[str] | None = None
        self._hops_of: Report | None = None
        self._hint = ""

    def on_mount(self) -> None:
        super().on_mount()
        self.query_one("#path-table", DataTable).add_columns("measure", "value")
        self.query_one("#hops-table", DataTable).add_columns(*HOP_COLUMNS)

    def show_body(self, state: RunState) -> None:
        for stage in STAGES:
            st = state.stage_state(stage)
            w = self.query_one(f"#stage-{stage}", Static)
            if not w.has_class(st):
                w.update(f"{MARK[st]} {STAGE_TITLES[stage]}")
                w.set_classes(f"stage {st}")
        bar = self.query_one(ProgressBar)
        bar.display = state.running
        log = self.query_one(Log)
        if self._log_of is not state.log:  # a new run starts a new log
            log.clear()
            self._log_of = state.log
            self._logged = 0
        for line in state.log[self._logged :]:
            log.write_line(line)
        self._logged = len(state.log)
        self._show_hops(state)
        table = self.query_one("#path-table", DataTable)
        table.clear()
        notes = self.query_one("#path-notes", Static)
        if state.path is None:
            table.add_row("—", "probing…" if state.running else "not measured")
            notes.update("")
            return
        for label, value in path_rows(state.path):
            table.add_row(label, value)
        notes.update("\n".join(f"note: {n}" for n in state.path.notes))

    def _show_hops(self, state: RunState) -> None:
        report = state.report
        hops = report.hops if report is not None else None
        table = self.query_one("#hops-table", DataTable)
        title = self.query_one("#hops-title", Static)
        mtu = self.query_one("#hops-mtu", Static)
        if hops is None:
            hint = hops_hint(state)
            if hint != self._hint or table.display:
                self._hint, self._hops_of = hint, None
                title.update(hint)
                title.set_class(True, "hint")
                table.display = mtu.display = False
            return
        if report is self._hops_of:  # drawn already: the hops do not change after the run
            return
        self._hops_of, self._hint = report, ""
        title.update(hops_heading(hops))
        title.set_class(False, "hint")
        table.clear()
        for row in hop_rows(hops):
            cells = [
                Text(v, justify="right") if col in NUMERIC else Text(v)
                for col, v in zip(HOP_COLUMNS, row, strict=True)
            ]
            table.add_row(*cells, height=None)
        mtu_line = path_mtu_line(hops)
        mtu.update(mtu_line or "")
        table.display = True
        mtu.display = mtu_line is not None
