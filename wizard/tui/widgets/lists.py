"""Option lists whose rows carry severity and host colours. OptionList rather than a
ListView of widgets: one widget renders forty findings quickly, where forty ListItems with
their Labels cost seconds of styling on a busy two-core machine. Colours come from the
component classes, which the app's .tcss maps to design tokens; only their own attributes
(partial styles) are baked into the rows, so the list's background (focused or not, the
highlighted row) still shows through."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.text import Text
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from tcpwizard.checks.model import Finding, Fix
from tcpwizard.tui.text import SEVERITY_LABEL, finding_title, fix_line


class FindingList(OptionList):
    """Groups of findings (one per host), worst first, each with its severity badge."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        *OptionList.COMPONENT_CLASSES,
        "findinglist--ok",
        "findinglist--info",
        "findinglist--warn",
        "findinglist--crit",
    }

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.items: dict[str, tuple[Finding, str]] = {}

    def set_groups(self, groups: Sequence[tuple[str, str, Sequence[Finding]]]) -> None:
        """groups: (heading, host label, findings)."""
        keep = self.highlighted
        self.clear_options()
        self.items = {}
        options: list[Option] = []
        for g, (heading, host, findings) in enumerate(groups):
            options.append(Option(Text(heading), disabled=True))
            for i, f in enumerate(findings):
                key = f"{g}-{i}"
                self.items[key] = (f, host)
                badge = self.get_component_rich_style(f"findinglist--{f.severity}", partial=True)
                row = Text.assemble(
                    (f"{SEVERITY_LABEL[f.severity]:<4}", badge), " ", finding_title(f)
                )
                options.append(Option(row, id=key))
        self.add_options(options)
        first = next((n for n, o in enumerate(options) if not o.disabled), None)
        self.highlighted = keep if keep is not None and keep < len(options) else first

    def finding_at(self, option: Option) -> tuple[Finding, str] | None:
        return self.items.get(option.id or "")


class FixList(OptionList):
    COMPONENT_CLASSES: ClassVar[set[str]] = {
        *OptionList.COMPONENT_CLASSES,
        "fixlist--local",
        "fixlist--peer",
    }

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.fixes: tuple[Fix, ...] = ()

    def set_fixes(self, fixes: Sequence[Fix]) -> None:
        self.fixes = tuple(fixes)
        self.clear_options()
        rows = []
        for n, fix in enumerate(self.fixes):
            style = self.get_component_rich_style(
                "fixlist--peer" if fix.host == "peer" else "fixlist--local", partial=True
            )
            rows.append(
                Option(Text.assemble((f"{fix.host:<6}", style), " ", fix_line(fix)), id=str(n))
            )
        if not rows:  # say so rather than show an empty box
            rows.append(Option(Text("nothing to fix"), disabled=True))
        self.add_options(rows)
        self.highlighted = 0 if self.fixes else None

    @property
    def selected_fix(self) -> Fix | None:
        i = self.highlighted
        return self.fixes[i] if i is not None and i < len(self.fixes) else None
