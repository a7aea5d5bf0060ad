"""The wizard gap as two bars on one scale: what you get now, what tuned TCP gets."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.widget import Widget

from tcpwizard.advice.model import WizardGap
from tcpwizard.units import format_rate


def _how(g: WizardGap) -> str:
    """The tuned bar's suffix: measured (by which mode) or computed from the window law."""
    if not g.measured:
        return " computed"
    return f" measured ({g.tuned_mode})" if g.tuned_mode else " measured"


def _mbps(v: float) -> str:
    return format_rate(v * 1e6)


class GapBar(Widget):
    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "gapbar--current",
        "gapbar--tuned",
        "gapbar--track",
        "gapbar--label",
    }

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.gap = WizardGap()

    def set_gap(self, gap: WizardGap) -> None:
        self.gap = gap
        self.refresh()

    def render(self) -> Text:
        label = self.get_component_rich_style("gapbar--label")
        g = self.gap
        if g.current_mbps is None and g.tuned_mbps is None:
            return Text("wizard gap: not measured (no test transfer)", style=label)
        top = max(g.current_mbps or 0.0, g.tuned_mbps or 0.0) or 1.0
        values = [v for v in (g.current_mbps, g.tuned_mbps) if v is not None]
        texts = [_mbps(v) for v in values]
        tail = max(len(t) for t in texts) + 1
        bar_w = max(4, self.content_size.width - 8 - tail)
        out = Text(no_wrap=True, overflow="crop")
        rows = (
            ("now", g.current_mbps, "gapbar--current", ""),
            ("tuned", g.tuned_mbps, "gapbar--tuned", _how(g)),
        )
        first = True
        for name, v, cls, suffix in rows:
            if not first:
                out.append("\n")
            first = False
            out.append(f"{name:<7}", label)
            if v is None:
                out.append("not measured", label)
                continue
            filled = round(v / top * bar_w)
            out.append("█" * filled, self.get_component_rich_style(cls))
            out.append("░" * (bar_w - filled), self.get_component_rich_style("gapbar--track"))
            out.append(f" {_mbps(v)}", label)
            if suffix and self.content_size.width >= bar_w + 8 + tail + len(suffix):
                out.append(suffix, label)
        if g.current_mbps and g.tuned_mbps and g.tuned_mbps > g.current_mbps:
            out.append(f"\n{'':<7}tuned is {g.tuned_mbps / g.current_mbps:.1f}× faster", label)
        return out
