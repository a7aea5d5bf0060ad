"""The host screen: enter a host; the audit checklist of both hosts with severities; the
highlighted finding's why and fix."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import Input, Label, ListItem, ListView, Markdown

from tcpwizard.checks.model import Finding, HostAudit
from tcpwizard.exitcodes import UsageError
from tcpwizard.tui.screens.base import WizardScreen
from tcpwizard.tui.state import RunState
from tcpwizard.tui.text import (
    SEVERITY_LABEL,
    audit_summary,
    finding_markdown,
    finding_title,
    parse_target,
)


class FindingItem(ListItem):
    def __init__(self, finding: Finding, host: str) -> None:
        super().__init__(
            Label(SEVERITY_LABEL[finding.severity], classes=f"sev sev-{finding.severity}"),
            Label(finding_title(finding), classes="finding-title", markup=False),
            classes="finding",
        )
        self.finding = finding
        self.host = host


class GroupItem(ListItem):
    """A heading in the list; disabled so the cursor skips it."""

    def __init__(self, text: str) -> None:
        super().__init__(Label(text, markup=False), classes="group", disabled=True)


class HostScreen(WizardScreen):
    TITLE_TEXT = "Host"

    def compose_body(self) -> ComposeResult:
        yield Input(
            placeholder="host[:port] running tcpwizard serve · Enter checks · tab leaves",
            id="host-input",
            compact=True,
        )
        with Horizontal(id="host-body"):
            yield ListView(id="findings")
            with VerticalScroll(id="finding-detail"):
                yield Markdown("Auditing this host…", id="detail")
        self._shown: tuple[HostAudit | None, HostAudit | None] = (None, None)

    def on_mount(self) -> None:
        super().on_mount()
        req = self.wizard.state.request or self.wizard.initial_request
        if req is not None:
            self.query_one(Input).value = self._target_text(req.host, req.port)
            self.query_one(ListView).focus()
        else:
            self.query_one(Input).focus()

    def _target_text(self, host: str, port: int) -> str:
        h = f"[{host}]" if ":" in host else host
        return h if port == self.wizard.defaults.port else f"{h}:{port}"

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
        self.query_one(ListView).focus()
        self.wizard.start_check(self.wizard.request_for(host, port))

    def show_body(self, state: RunState) -> None:
        if (state.local, state.peer) == self._shown:
            return
        self._shown = (state.local, state.peer)
        lv = self.query_one(ListView)
        index = lv.index
        lv.clear()
        items: list[ListItem] = []
        if state.local is not None:
            items.append(GroupItem(audit_summary(state.local, "This host")))
            items += [FindingItem(f, "this host") for f in self._ordered(state.local)]
        if state.peer is not None:
            items.append(GroupItem(audit_summary(state.peer, "Peer")))
            items += [FindingItem(f, "the peer") for f in self._ordered(state.peer)]
        elif state.request is not None and state.stage not in (None, "audit"):
            items.append(GroupItem("Peer: no audit (is tcpwizard serve running there?)"))
        lv.extend(items)
        if items:
            first = next((i for i, it in enumerate(items) if isinstance(it, FindingItem)), None)
            lv.index = index if index is not None and index < len(items) else first
        if state.local is None:
            self.query_one("#detail", Markdown).update(
                f"Audit failed: {state.error}" if state.error else "Auditing this host…"
            )

    @staticmethod
    def _ordered(a: HostAudit) -> list[Finding]:
        # Worst first: the checklist reads top-down as "what to fix".
        rank = {"crit": 0, "warn": 1, "info": 2, "ok": 3}
        return sorted(a.findings, key=lambda f: rank[f.severity])

    def on_list_view_highlighted(self, event: ListView.Highlighted) -> None:
        item = event.item
        if isinstance(item, FindingItem):
            self.query_one("#detail", Markdown).update(finding_markdown(item.finding, item.host))

    def on_list_view_selected(self, event: ListView.Selected) -> None:
        # Enter/click: move to the detail so a long explanation can be scrolled.
        if isinstance(event.item, FindingItem):
            self.query_one("#finding-detail").focus()
