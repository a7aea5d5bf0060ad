"""The connections screen: every established TCP connection of this host, judged live like
`tcpwizard conns` (the same code: tcpwizard.conns_report). A thread worker observes the
connections for one interval at a time while the screen is shown and only posts messages;
the table keeps its cursor across refreshes, and the pane beside it explains the
highlighted connection: the verdict, its TCP_INFO evidence and the fix on the right host."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import ClassVar

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.message import Message
from textual.widgets import DataTable, Static
from textual.worker import get_current_worker

from tcpwizard.conns_report import ConnEntry, ConnFilter, ConnsReport
from tcpwizard.exitcodes import TcpWizardError
from tcpwizard.output.conns_text import entry_lines
from tcpwizard.tui.screens.base import WizardScreen
from tcpwizard.tui.state import RunState

COLUMNS = ("port → far end", "process", "role", "Mbit/s", "limit", "fix at")
PAUSE_S = 0.2  # between two observation intervals


def row_of(e: ConnEntry) -> tuple[str, ...]:
    o, v = e.observation, e.diagnosis.verdict
    remote = f"[{o.key.remote}]" if ":" in o.key.remote else o.key.remote
    return (
        f":{o.key.local_port} → {remote}:{o.key.remote_port}",
        e.owner.name if e.owner else "?",
        e.diagnosis.role,
        f"{o.rate_mbps:.1f}" if v is not None else "-",
        v.limiting_factor if v is not None else "idle",
        (v.host_to_fix or "-") if v is not None else "",
    )


def row_key(e: ConnEntry) -> str:
    return f"{e.observation.key}|{e.observation.inode}"


class ConnsScreen(WizardScreen):
    TITLE_TEXT = "Connections"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("f", "toggle_busy", "Busy only"),
    ]

    @dataclass
    class Updated(Message):
        report: ConnsReport | None
        error: str | None

    busy_only = False
    report: ConnsReport | None = None
    _stop: threading.Event | None = None

    def compose_body(self) -> ComposeResult:
        yield Static("observing the connections of this host…", id="conns-summary", markup=False)
        with Horizontal(id="conns-body"):
            yield DataTable(id="conns-table", cursor_type="row", zebra_stripes=False)
            with VerticalScroll(id="conns-detail-scroll"):
                yield Static(id="conns-detail", markup=False)

    def on_mount(self) -> None:
        super().on_mount()
        self.query_one(DataTable).add_columns(*COLUMNS)

    def on_screen_resume(self) -> None:
        super().on_screen_resume()
        self._start()

    def on_screen_suspend(self) -> None:
        if self._stop is not None:
            self._stop.set()

    def on_unmount(self) -> None:
        if self._stop is not None:
            self._stop.set()

    def _start(self) -> None:
        if self._stop is not None:
            self._stop.set()
        self._stop = threading.Event()
        self._watch(self._stop, ConnFilter(busy_only=self.busy_only))

    @work(thread=True, group="conns", exclusive=True, exit_on_error=False)
    def _watch(self, stop: threading.Event, flt: ConnFilter) -> None:
        worker = get_current_worker()
        observe = self.wizard.services.conns
        while not stop.is_set() and not worker.is_cancelled:
            try:
                report = observe(flt, self.wizard.ctx)
            except (TcpWizardError, OSError) as exc:
                self.post_message(self.Updated(None, str(exc)))
                stop.wait(2.0)
                continue
            if stop.is_set():
                return
            self.post_message(self.Updated(report, None))
            stop.wait(PAUSE_S)

    def action_toggle_busy(self) -> None:
        self.busy_only = not self.busy_only
        self._start()

    def on_conns_screen_updated(self, msg: Updated) -> None:
        summary = self.query_one("#conns-summary", Static)
        if msg.report is None:
            summary.update(f"cannot read the connections: {msg.error}")
            return
        self.report = msg.report
        r = msg.report
        busy = len(r.busy)
        shown = "busy only (f: all)" if self.busy_only else "all (f: busy only)"
        summary.update(
            f"{r.total} established, {busy} busy over {r.interval_s:.1f} s · {shown}"
            + (f" · {r.notes[0]}" if r.notes else "")
        )
        table = self.query_one(DataTable)
        keep = table.cursor_row
        table.clear()
        for e in r.entries:
            table.add_row(*row_of(e), key=row_key(e))
        if r.entries:
            table.move_cursor(row=min(keep, len(r.entries) - 1))
        self._detail()

    def on_data_table_row_highlighted(self, _event: DataTable.RowHighlighted) -> None:
        self._detail()

    def _detail(self) -> None:
        detail = self.query_one("#conns-detail", Static)
        entries = self.report.entries if self.report else ()
        row = self.query_one(DataTable).cursor_row
        if not entries:
            detail.update("no established TCP connection" if self.report else "")
            return
        e = entries[min(max(row, 0), len(entries) - 1)]
        detail.update("\n".join(line.strip() for line in entry_lines(e)))

    def show_body(self, state: RunState) -> None:
        """The connections do not follow the check's run: nothing to draw from it."""
