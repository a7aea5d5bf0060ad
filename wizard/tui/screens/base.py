"""What every pipeline screen shares: header, a status line for the run, the footer."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import Footer, Header, Static

from tcpwizard.tui.state import RunState

if TYPE_CHECKING:
    from tcpwizard.tui.app import TcpWizardApp


def status_line(state: RunState) -> tuple[str, str]:
    """(text, css class) of the run status shown on every screen."""
    req = state.request
    if req is None:
        if state.error:
            return f"error: {state.error}", "error"
        return "no host yet: type one above and press Enter (tab leaves the input)", "idle"
    target = f"{req.host}:{req.port}"
    if state.running:
        stage = state.stage or "starting"
        return f"● {target} · {stage} … · esc cancels", "running"
    if state.cancelled:
        return f"■ {target} · cancelled · r re-runs", "warning"
    if state.error:
        return f"✖ {target} · {state.error}", "error"
    if state.report is not None and state.report.error:
        return f"✖ {target} · {state.report.error}", "error"
    if state.report is not None:
        return f"✔ {target} · done: {state.report.verdict.limiting_factor} · r re-runs", "done"
    return target, "idle"


class WizardScreen(Screen[None]):
    """A screen that renders from the app's RunState (show_state is called on every change
    while it is the current screen, and when it becomes current again)."""

    TITLE_TEXT = ""

    @property
    def wizard(self) -> TcpWizardApp:
        from tcpwizard.tui.app import TcpWizardApp

        return cast(TcpWizardApp, self.app)

    def compose(self) -> ComposeResult:
        yield Header(icon="")
        yield from self.compose_body()
        yield Static(id="status", markup=False)
        yield Footer()

    def compose_body(self) -> ComposeResult:
        yield from ()

    _ready = False
    _status: tuple[str, str] = ("", "")
    _theme = ""

    def on_mount(self) -> None:
        self._ready = True
        self.title = "tcpwizard"
        self.sub_title = self.TITLE_TEXT

    def on_screen_resume(self) -> None:
        self.show_state(self.wizard.state)

    def show_state(self, state: RunState) -> None:
        if not self._ready:  # not composed yet: on_screen_resume renders it
            return
        if self.app.theme != self._theme:
            # Rows built with the old theme's colours must be built again.
            self._theme = self.app.theme
            self.invalidate()
        text, cls = status_line(state)
        if (text, cls) != self._status:  # unchanged: skip the restyle
            self._status = (text, cls)
            status = self.query_one("#status", Static)
            status.update(text)
            status.set_classes(cls)
        req = state.request
        self.sub_title = f"{self.TITLE_TEXT} · {req.host}" if req else self.TITLE_TEXT
        self.show_body(state)

    def show_body(self, state: RunState) -> None:
        """Render the screen's own widgets from the state."""

    def invalidate(self) -> None:
        """Forget what was drawn, so the next show_body draws everything again."""
