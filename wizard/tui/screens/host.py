"""The host screen: enter a host; the audit checklist of both hosts with severities; the
highlighted finding's why and fix."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import Input, Markdown, OptionList

from tcpwizard.checks.model import Finding, HostAudit
from tcpwizard.exitcodes import UsageError
from tcpwizard.tui.screens.base import WizardScreen
from tcpwizard.tui.state import RunState
from tcpwizard.tui.text import audit_summary, finding_markdown, parse_target
from tcpwizard.tui.widgets.lists import FindingList


class HostInput(Input):
    """The host entry; shows its Enter in the footer (an Input hides its own bindings, and
    while it has focus it takes the printable keys the footer would otherwise show)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "submit", "Check", key_display="enter"),
        Binding("tab", "app.focus_next", "Leave", key_display="tab"),
    ]


class HostScreen(WizardScreen):
    TITLE_TEXT = "Host"

    def compose_body(self) -> ComposeResult:
        yield HostInput(
            placeholder="host[:port] running tcpwizard serve · Enter checks · tab leaves",
            id="host-input",
            compact=True,
        )
        with Horizontal(id="host-body"):
            yield FindingList(id="findings")
            with VerticalScroll(id="finding-detail"):
                yield Markdown("Auditing this host…", id="detail")
        self._shown: tuple[HostAudit | None, HostAudit | None] = (None, None)
        self._drawn = False

    def on_mount(self) -> None:
        super().on_mount()
        req = self.wizard.state.request or self.wizard.initial_request
        if req is not None:
            self.query_one(Input).value = self._target_text(req.host, req.port)
            self.query_one(FindingList).focus()
        else:
            self.query_one(Input).focus()

    def _target_text(self, host: str, port: int) -> str:
        h = f"[{host}]" if ":" in host else host
        return h if port == self.wizard.defaults.port else f"{h}:{port}"

    def invalidate(self) -> None:
        self._shown = (None, None)
        self._drawn = False

    def focus_host_input(self) -> None:
        inp = self.query_one(Input)
        inp.focus()
        inp.select_all()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        try:
            host, port = parse_target(event.value, self.wizard.defaults.port)
        except UsageError as exc:
            self.notify(str(exc), severity="error")
            return
        self.query_one(FindingList).focus()
        self.wizard.start_check(self.wizard.request_for(host, port))

    def show_body(self, state: RunState) -> None:
        if (state.local, state.peer) == self._shown and self._drawn:
            return
        self._drawn = True
        self._shown = (state.local, state.peer)
        groups: list[tuple[str, str, list[Finding]]] = []
        if state.local is not None:
            groups.append(
                (audit_summary(state.local, "This host"), "this host", self._ordered(state.local))
            )
        if state.peer is not None:
            groups.append(
                (audit_summary(state.peer, "Peer"), "the peer", self._ordered(state.peer))
            )
        elif state.request is not None and state.stage not in (None, "audit"):
            groups.append(("Peer: no audit (is tcpwizard serve running there?)", "", []))
        self.query_one(FindingList).set_groups(groups)
        if state.local is None:
            self.query_one("#detail", Markdown).update(
                f"Audit failed: {state.error}" if state.error else "Auditing this host…"
            )

    @staticmethod
    def _ordered(a: HostAudit) -> list[Finding]:
        # Worst first: the checklist reads top-down as "what to fix".
        rank = {"crit": 0, "warn": 1, "info": 2, "ok": 3}
        return sorted(a.findings, key=lambda f: rank[f.severity])

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        found = self.query_one(FindingList).finding_at(event.option)
        if found is not None:
            self.query_one("#detail", Markdown).update(finding_markdown(*found))

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        # Enter/click: move to the detail so a long explanation can be scrolled.
        self.query_one("#finding-detail").focus()
