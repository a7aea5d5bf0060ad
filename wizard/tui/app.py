"""The Textual app: four screens (host, path, transfer, verdict) over one run of the same
pipeline as `check` (tcpwizard.run.run_check).

Threading: the pipeline, the audit, planning and applying fixes, and file writes run in thread
workers that only post messages (the pipeline itself in a daemon thread its worker watches,
so quitting never waits for a transfer); every message handler runs on the UI thread and is
the only place that mutates `self.state`. Messages carry the run id so a late message from a
cancelled run cannot leak into the next one.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar

from textual import work
from textual.app import App
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.screen import Screen
from textual.worker import get_current_worker

from tcpwizard.advice.apply import ApplyReport, Plan, apply_plan, make_plan
from tcpwizard.checks.audit import audit
from tcpwizard.checks.model import Fix, HostAudit
from tcpwizard.conns_report import ConnFilter, ConnsReport, connections_report
from tcpwizard.context import Context
from tcpwizard.exitcodes import TcpWizardError
from tcpwizard.measure.engine.threads import favour_packet_timing
from tcpwizard.output.json_format import report_json
from tcpwizard.report import Report
from tcpwizard.run import Cancelled, CheckRequest, EventFn, run_check
from tcpwizard.run import Event as PipelineEvent
from tcpwizard.tui.screens.base import WizardScreen
from tcpwizard.tui.screens.conns import ConnsScreen
from tcpwizard.tui.screens.host import HostScreen
from tcpwizard.tui.screens.modals import ApplyScreen, HelpScreen
from tcpwizard.tui.screens.path import PathScreen
from tcpwizard.tui.screens.transfer import TransferScreen
from tcpwizard.tui.screens.verdict import VerdictScreen
from tcpwizard.tui.state import RunState

RunCheckFn = Callable[[CheckRequest, Context, EventFn | None, threading.Event | None], Report]
ConnsFn = Callable[[ConnFilter, Context], ConnsReport]
AuditFn = Callable[[Context], HostAudit]

SCREENS = ("host", "path", "transfer", "verdict", "conns")
_SCREENS = Binding.Group("Screens", compact=True)


def _local_audit(ctx: Context) -> HostAudit:
    return audit(ctx, None, None)


def _conns(flt: ConnFilter, ctx: Context) -> ConnsReport:
    return connections_report(flt, 1.0, ctx.sysctl_root)


@dataclass(frozen=True)
class Services:
    """What the app calls to do work; tests pass fakes that return fixed data (snapshots)."""

    run_check: RunCheckFn = run_check
    audit: AuditFn = _local_audit
    conns: ConnsFn = _conns  # one observation interval of this host's connections


class TcpWizardApp(App[int]):
    TITLE = "tcpwizard"
    CSS_PATH = "tui.tcss"
    ENABLE_COMMAND_PALETTE = False
    MODES: ClassVar[dict[str, str | Callable[[], Screen[Any]]]] = {
        "host": HostScreen,
        "path": PathScreen,
        "transfer": TransferScreen,
        "verdict": VerdictScreen,
        "conns": ConnsScreen,
    }
    BINDINGS: ClassVar[list[BindingType]] = [
        # One footer entry "1234 Screens" instead of four: the footer must fit 80 columns.
        Binding("1", "show('host')", "Host", group=_SCREENS),
        Binding("2", "show('path')", "Path", group=_SCREENS),
        Binding("3", "show('transfer')", "Transfer", group=_SCREENS),
        Binding("4", "show('verdict')", "Verdict", group=_SCREENS),
        # Not part of the check's run: in the help, not the footer (80 columns).
        Binding("5", "show('conns')", "Connections", show=False),
        Binding("n", "new_host", "Host…"),
        Binding("escape", "cancel", "Cancel", key_display="esc"),
        # The status line says "r re-runs"; the footer has no room for it at 80 columns.
        Binding("r", "rerun", "Re-run", show=False),
        Binding("question_mark", "help", "Help", key_display="?"),
        Binding("q", "quit", "Quit"),
        Binding("ctrl+t", "toggle_dark", "Light/dark", show=False),
    ]

    # --- messages posted by the workers (nested here: the app posts them) -------------------

    @dataclass
    class CheckProgress(Message):
        run_id: int
        event: PipelineEvent

    @dataclass
    class CheckFinished(Message):
        run_id: int
        report: Report

    @dataclass
    class CheckFailed(Message):
        run_id: int
        error: str
        cancelled: bool

    @dataclass
    class AuditDone(Message):
        audit: HostAudit | None
        error: str | None

    @dataclass
    class PlanReady(Message):
        plan: Plan | None
        error: str | None

    @dataclass
    class FixesApplied(Message):
        result: ApplyReport | None
        error: str | None

    @dataclass
    class FileWritten(Message):
        path: str
        what: str
        error: str | None

    # --- construction -----------------------------------------------------------------------

    def __init__(
        self,
        ctx: Context,
        request: CheckRequest | None = None,
        *,
        services: Services | None = None,
        defaults: CheckRequest | None = None,
    ) -> None:
        """request: run it at start. defaults: port, secret and quick for hosts entered in
        the TUI (taken from the command line)."""
        super().__init__()
        favour_packet_timing()  # checks run in a worker thread beside the renderer
        self.ctx = ctx
        self.services = services or Services()
        self.initial_request = request
        self.defaults = defaults or request or CheckRequest(host="")
        self.state = RunState()
        self.run_id = 0
        self._cancel: threading.Event | None = None
        # Follow the pipeline from screen to screen until the user picks one themselves.
        self.follow = True
        self._redraw_pending = False

    async def on_mount(self) -> None:
        self.theme_changed_signal.subscribe(self, lambda _theme: self._refresh_screens())
        await self.switch_mode("host")
        if self.initial_request is not None:
            self.start_check(self.initial_request)
        else:
            self._audit_worker()

    # --- the run ----------------------------------------------------------------------------

    def start_check(self, req: CheckRequest) -> None:
        if self.state.running:
            self.notify("A check is running: esc cancels it first.", severity="warning")
            return
        self.run_id += 1
        self._cancel = threading.Event()
        self.follow = True
        self.state.start(req, self.state.local)
        self.sub_title = f"{req.host} port {req.port}"
        self._refresh_screens()
        self.refresh_bindings()
        self._check_worker(self.run_id, req, self._cancel)

    def request_for(self, host: str, port: int) -> CheckRequest:
        return replace(self.defaults, host=host, port=port)

    @work(thread=True, group="check", exit_on_error=False)
    def _check_worker(self, run_id: int, req: CheckRequest, cancel: threading.Event) -> None:
        # The pipeline runs in a daemon thread that this worker watches: a transfer cannot
        # be interrupted, and quitting must not wait seconds for it (Textual waits for its
        # workers on exit; the daemon thread simply ends with the process).
        worker = get_current_worker()
        done = threading.Event()
        runner = threading.Thread(
            target=self._run_pipeline, args=(run_id, req, cancel, done), daemon=True
        )
        runner.start()
        while not done.wait(0.1):
            if worker.is_cancelled:  # the app is closing
                cancel.set()
                return

    def _run_pipeline(
        self, run_id: int, req: CheckRequest, cancel: threading.Event, done: threading.Event
    ) -> None:
        def on_event(ev: PipelineEvent) -> None:
            self.post_message(self.CheckProgress(run_id, ev))

        try:
            report = self.services.run_check(req, self.ctx, on_event, cancel)
        except Cancelled:
            self.post_message(self.CheckFailed(run_id, "cancelled", True))
        except TcpWizardError as exc:
            self.post_message(self.CheckFailed(run_id, str(exc), False))
        except Exception as exc:  # a bug in a stage must not take the whole UI down
            self.post_message(self.CheckFailed(run_id, f"{type(exc).__name__}: {exc}", False))
        else:
            self.post_message(self.CheckFinished(run_id, report))
        finally:
            done.set()

    @work(thread=True, group="audit", exit_on_error=False)
    def _audit_worker(self) -> None:
        try:
            result = self.services.audit(self.ctx)
        except TcpWizardError as exc:
            self.post_message(self.AuditDone(None, str(exc)))
        else:
            self.post_message(self.AuditDone(result, None))

    def on_tcp_wizard_app_audit_done(self, msg: AuditDone) -> None:
        if msg.audit is not None and not self.state.running and self.state.report is None:
            self.state.local = msg.audit
        elif msg.error:
            self.state.error = msg.error
            self.notify(msg.error, title="audit failed", severity="error")
        self._refresh_screens()

    def on_tcp_wizard_app_check_progress(self, msg: CheckProgress) -> None:
        if msg.run_id != self.run_id:
            return
        self.state.apply(msg.event)
        # Events can arrive in bursts (a transfer samples every 100 ms, a replay at once):
        # fold them all into the state, then draw once.
        if not self._redraw_pending:
            self._redraw_pending = True
            self.call_later(self._redraw)

    def _redraw(self) -> None:
        self._redraw_pending = False
        if self.follow and self.state.running:
            want = {"audit": "host", "peer": "host", "probe": "path", "transfer": "transfer"}
            mode = want.get(self.state.stage or "")
            if mode is not None and self.current_mode != mode:
                self.switch_mode(mode)
        self._refresh_screens()

    def on_tcp_wizard_app_check_finished(self, msg: CheckFinished) -> None:
        if msg.run_id != self.run_id:
            return
        self.state.finish(msg.report)
        if self.follow:
            self.switch_mode("verdict")
        self._refresh_screens()
        self.refresh_bindings()

    def on_tcp_wizard_app_check_failed(self, msg: CheckFailed) -> None:
        if msg.run_id != self.run_id:
            return
        self.state.fail(msg.error, msg.cancelled)
        if msg.cancelled:
            self.notify("Check cancelled.", severity="warning")
        else:
            self.notify(msg.error, title="check failed", severity="error", timeout=8)
        self._refresh_screens()
        self.refresh_bindings()

    def _refresh_screens(self) -> None:
        screen = self.screen
        if isinstance(screen, WizardScreen):
            screen.show_state(self.state)
        # A modal's underlying screen is refreshed when it resumes. Bindings are refreshed
        # only where they change (start, finish, fail): each refresh rebuilds the footer.

    # --- actions ----------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # False hides a binding from the footer (and disables it); None shows it dimmed.
        if action == "cancel":
            return self.state.running
        if action == "rerun":
            return not self.state.running and self.state.request is not None
        return True

    def action_show(self, name: str) -> None:
        if name in SCREENS and self.current_mode != name:
            self.follow = False
            self.switch_mode(name)

    def on_unmount(self) -> None:
        # The pipeline's thread cannot be killed: ask it to stop at its next stage, so a
        # process that lives on (a test run) does not keep measuring for nobody.
        if self._cancel is not None:
            self._cancel.set()

    def action_new_host(self) -> None:
        self.follow = False

        def focus() -> None:
            if isinstance(self.screen, HostScreen):
                self.screen.focus_host_input()

        if self.current_mode != "host":
            self.switch_mode("host")
        self.call_after_refresh(focus)

    def action_cancel(self) -> None:
        if self._cancel is not None and self.state.running:
            self._cancel.set()
            self.state.log.append("cancelling: the running stage finishes first")
            self.notify("Cancelling: the running stage finishes first.")
            self._refresh_screens()

    def action_rerun(self) -> None:
        if self.state.request is not None:
            self.start_check(self.state.request)

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    # --- fixes, files -----------------------------------------------------------------------

    def plan_fixes(self, fixes: tuple[Fix, ...]) -> None:
        self._plan_worker(fixes)

    @work(thread=True, group="fix", exit_on_error=False)
    def _plan_worker(self, fixes: tuple[Fix, ...]) -> None:
        try:
            plan = make_plan(fixes, self.ctx.sysctl_root, self.ctx.sysctl_conf_dir)
        except (TcpWizardError, OSError) as exc:
            self.post_message(self.PlanReady(None, str(exc)))
        else:
            self.post_message(self.PlanReady(plan, None))

    def on_tcp_wizard_app_plan_ready(self, msg: PlanReady) -> None:
        if msg.plan is None:
            self.notify(msg.error or "no plan", title="cannot plan the fixes", severity="error")
            return
        plan = msg.plan

        def confirmed(ok: bool | None) -> None:
            if ok:
                self._apply_worker(plan)

        self.push_screen(ApplyScreen(plan, self.ctx.is_root), confirmed)

    @work(thread=True, group="fix", exit_on_error=False)
    def _apply_worker(self, plan: Plan) -> None:
        try:
            result = apply_plan(plan, self.ctx.sysctl_root, self.ctx.state_dir)
        except (TcpWizardError, OSError) as exc:
            self.post_message(self.FixesApplied(None, str(exc)))
        else:
            self.post_message(self.FixesApplied(result, None))

    def on_tcp_wizard_app_fixes_applied(self, msg: FixesApplied) -> None:
        if msg.result is None:
            self.notify(msg.error or "", title="applying failed", severity="error", timeout=8)
            return
        r = msg.result
        lines = [f"applied {a.target}: {a.old} → {a.new}" for a in r.applied]
        lines += [f"skipped {s.target}: {s.reason}" for s in r.skipped]
        if r.backup_path:
            lines.append("undo: sudo tcpwizard fix --rollback")
        self.notify(
            "\n".join(lines) or "nothing changed",
            title="fixes applied" if r.complete else "fixes partly applied",
            severity="information" if r.complete else "warning",
            timeout=10,
        )

    def write_file(self, path: str, text: str, what: str) -> None:
        self._write_worker(path, text, what)

    @work(thread=True, group="file", exit_on_error=False)
    def _write_worker(self, path: str, text: str, what: str) -> None:
        try:
            Path(path).expanduser().write_text(text)
        except OSError as exc:
            self.post_message(self.FileWritten(path, what, exc.strerror or str(exc)))
        else:
            self.post_message(self.FileWritten(path, what, None))

    def on_tcp_wizard_app_file_written(self, msg: FileWritten) -> None:
        if msg.error:
            self.notify(
                f"{msg.path}: {msg.error}", title=f"cannot save {msg.what}", severity="error"
            )
        else:
            self.notify(f"{msg.what} saved to {msg.path}")

    def export_json(self, path: str) -> None:
        if self.state.report is not None:
            text = json.dumps(report_json(self.state.report), indent=2) + "\n"
            self.write_file(path, text, "JSON report")
