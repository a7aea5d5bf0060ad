"""One row per transfer (mode × direction): a progress bar, elapsed time, goodput."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.text import Text
from textual.widget import Widget

from tcpwizard.measure.engine.loaded_rtt import loaded_rtt
from tcpwizard.measure.model import ModeResult
from tcpwizard.tui.state import LiveSeries
from tcpwizard.tui.text import mbps
from tcpwizard.units import format_bytes


class ModeRows(Widget):
    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "moderows--done",
        "moderows--track",
        "moderows--label",
        "moderows--error",
    }

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.rows: tuple[LiveSeries, ...] = ()
        self.empty_text = "no transfer yet"

    def set_rows(self, rows: Sequence[LiveSeries], empty_text: str) -> None:
        self.rows = tuple(rows)
        self.empty_text = empty_text
        self.refresh(layout=True)

    def get_content_height(self, container: object, viewport: object, width: int) -> int:
        return max(1, len(self.rows))

    def render(self) -> Text:
        label = self.get_component_rich_style("moderows--label")
        if not self.rows:
            return Text(self.empty_text, style=label)
        out = Text(no_wrap=True, overflow="crop")
        width = self.content_size.width
        for i, s in enumerate(self.rows):
            if i:
                out.append("\n")
            out.append(f"{s.label:<20.20}", label)
            r = s.result
            if r is not None:
                tail = f" {mbps(r.throughput_mbps):>12}  buf {format_bytes(r.max_buffer_bytes)}"
                if (lr := loaded_rtt(r)) is not None:
                    # What the transfer did to latency: RTT under load and responsiveness.
                    tail += f"  rtt {lr.median_ms:.0f} ms, {lr.rpm:.0f} RPM"
                tail += _load_tail(r)
            elif s.samples:
                last = s.samples[-1]
                tail = f" {mbps(last.goodput_mbps):>12}  {last.t_s:4.1f} s"
            else:
                tail = " starting…"
            bar_w = max(4, width - 20 - len(tail) - 1)
            done = round(s.fraction * bar_w)
            out.append("█" * done, self.get_component_rich_style("moderows--done"))
            out.append("░" * (bar_w - done), self.get_component_rich_style("moderows--track"))
            out.append(tail, label)
            if r is not None and r.error:
                out.append(f"  {r.error}", self.get_component_rich_style("moderows--error"))
        return out


def _load_tail(r: ModeResult) -> str:
    """Each end's busiest core (sender/receiver) and the drops inside both hosts."""
    loads = (r.sender_load, r.receiver_load)
    if all(x is None for x in loads):
        return ""
    cores = "/".join(
        "-" if x is None or x.busiest_core is None else f"{x.busiest_core.busy:.0%}" for x in loads
    )
    drops = sum(x.drops.total for x in loads if x is not None and x.drops is not None)
    return f"  cpu {cores}" + (f"  drops {drops}" if drops else "")
