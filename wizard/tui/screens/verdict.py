"""The verdict screen: the limiting factor, the wizard gap as bars, the evidence, and the
fixes with their actions (copy, save, apply, export JSON)."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Label, OptionList, Static

from tcpwizard.advice.middlebox import syn_tampering
from tcpwizard.advice.model import WizardGap
from tcpwizard.checks.model import Fix
from tcpwizard.report import Report
from tcpwizard.tui.screens.base import WizardScreen
from tcpwizard.tui.screens.modals import PathPrompt
from tcpwizard.tui.state import RunState
from tcpwizard.tui.text import HOST_LABEL, fix_text, fixes_script
from tcpwizard.tui.widgets.gapbar import GapBar
from tcpwizard.tui.widgets.lists import FixList


class VerdictScreen(WizardScreen):
    TITLE_TEXT = "Verdict"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("c", "copy", "Copy"),
        Binding("s", "save", "Save"),
        Binding("a", "apply", "Apply"),
        Binding("e", "export", "JSON"),
    ]

    def compose_body(self) -> ComposeResult:
        with Vertical(id="verdict-head"):
            yield Static(id="factor", markup=False)
            yield Static(id="verdict-meta", markup=False)
            yield GapBar(id="gap")
        with Horizontal(id="verdict-body"):
            with VerticalScroll(id="verdict-why"):
                yield Static(id="explanation", markup=False)
                yield Static(id="evidence", markup=False)
            with Vertical(id="fixes-pane"):
                yield Label("Fixes", classes="pane-title", id="fixes-title")
                yield FixList(id="fixes")
                with VerticalScroll(id="fix-detail-scroll"):
                    yield Static(id="fix-detail", markup=False)
        self._shown: Report | None = None
        self._drawn = False

    def invalidate(self) -> None:
        self._drawn = False

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("copy", "save", "apply", "export"):
            report = self.wizard.state.report
            if report is None:
                return False  # hidden until there is a report
            if action in ("copy", "save", "apply") and not report.fixes:
                return None  # shown dimmed: nothing to act on
        return True

    def show_body(self, state: RunState) -> None:
        report = state.report
        if report is self._shown and self._drawn:
            return
        self._drawn = True
        self._shown = report
        factor = self.query_one("#factor", Static)
        meta = self.query_one("#verdict-meta", Static)
        fix_list = self.query_one(FixList)
        if report is None:
            factor.update("No verdict yet")
            factor.set_classes("factor-none")
            meta.update(
                "checking… the verdict appears when the run ends"
                if state.running
                else "enter a host (n) to run the check"
            )
            self.query_one(GapBar).set_gap(WizardGap())
            self.query_one("#explanation", Static).update("")
            self.query_one("#evidence", Static).update("")
            self.query_one("#fix-detail", Static).update("")
            fix_list.set_fixes(())
            self.refresh_bindings()
            return
        v = report.verdict
        # A verdict without a transfer is a prediction and must read as one.
        predicted = "" if report.measured or report.target is None else "Predicted "
        factor.update(f"{predicted}Limiting factor: {v.limiting_factor}")
        factor.set_classes(f"factor-{v.limiting_factor}")
        fix_on = HOST_LABEL.get(v.host_to_fix, "nothing to fix") if v.host_to_fix else "nothing"
        far = f" · far end: {report.far_end.description}" if report.far_end else ""
        meta.update(
            f"confidence {v.confidence:.0%} · fix on {fix_on} · exit {int(report.exit_code)}{far}"
        )
        self.query_one(GapBar).set_gap(v.wizard_gap)
        self.query_one("#explanation", Static).update(v.explanation)
        evidence = [f"• {e}" for e in v.evidence] + [f"note: {n}" for n in report.notes]
        evidence += [f"handshake: {f.title} {f.observed}" for f in report.peer_handshake_findings]
        if (hs := report.peer_handshake) is not None and (syn := hs.received_syn) is not None:
            evidence.append(
                f"our SYN as the far end received it: MSS {syn.mss or '-'} (sent "
                f"{hs.local_mss or '?'}), wscale {'-' if syn.wscale is None else syn.wscale}, "
                f"SACK {'on' if syn.sack_permitted else 'off'}, "
                f"timestamps {'on' if syn.timestamps else 'off'}"
            )
            evidence += [f"path: {t.text}" for t in syn_tampering(hs, report.peer)]
        self.query_one("#evidence", Static).update("\n".join(evidence))
        fix_list.set_fixes(report.fixes)
        self.query_one("#fixes-title", Label).update(
            f"Fixes ({len(report.fixes)})" if report.fixes else "Fixes: none needed"
        )
        if not report.fixes:
            self.query_one("#fix-detail", Static).update("")
        self.refresh_bindings()

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        fix = self.query_one(FixList).selected_fix
        if fix is not None:
            self.query_one("#fix-detail", Static).update(fix_text(fix))

    def _selected(self) -> Fix | None:
        return self.query_one(FixList).selected_fix

    def action_copy(self) -> None:
        fix = self._selected()
        if fix is None:
            return
        self.app.copy_to_clipboard(fix.command)
        self.notify(f"copied: {fix.command}")

    def action_save(self) -> None:
        report = self.wizard.state.report
        if report is None:
            return
        target = report.target.host if report.target else None
        script = fixes_script(report.fixes, target)

        def chosen(path: str | None) -> None:
            if path:
                self.wizard.write_file(path, script, "fixes")

        self.app.push_screen(
            PathPrompt("Save the fixes as a shell script to:", "tcpwizard-fixes.sh"), chosen
        )

    def action_export(self) -> None:
        def chosen(path: str | None) -> None:
            if path:
                self.wizard.export_json(path)

        self.app.push_screen(
            PathPrompt("Export the report as JSON to:", "tcpwizard-report.json"), chosen
        )

    def action_apply(self) -> None:
        report = self.wizard.state.report
        if report is None:
            return
        local = tuple(f for f in report.fixes if f.host in ("local", "both"))
        if not local:
            self.notify("No fix for this host: the peer's fixes are applied on the peer.")
            return
        self.wizard.plan_fixes(local)
