"""The path screen: the pipeline's stages with live progress, the probe log, and the path as
measured (RTT statistics, capacity, BDP)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import DataTable, Label, Log, ProgressBar, Static

from tcpwizard.tui.screens.base import WizardScreen
from tcpwizard.tui.state import STAGE_TITLES, STAGES, RunState
from tcpwizard.tui.text import path_rows

MARK = {"done": "✔", "running": "●", "pending": "·", "skipped": "–", "stopped": "■"}


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
        self._logged = 0
        self._log_of: list[str] | None = None

    def on_mount(self) -> None:
        super().on_mount()
        table = self.query_one(DataTable)
        table.add_columns("measure", "value")

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
        table = self.query_one(DataTable)
        table.clear()
        notes = self.query_one("#path-notes", Static)
        if state.path is None:
            table.add_row("—", "probing…" if state.running else "not measured")
            notes.update("")
            return
        for label, value in path_rows(state.path):
            table.add_row(label, value)
        notes.update("\n".join(f"note: {n}" for n in state.path.notes))
