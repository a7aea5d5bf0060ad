"""A small line plot over time drawn with braille dots (2×4 per cell), one colour per series.

Own widget instead of a plotting dependency: the three drsFTP-style plots (goodput, buffer
size, RTT per interval) and the time-sequence graph need only lines over a shared time axis,
and marks for single events (retransmissions). Colours come from the component classes
below, which the app's .tcss maps to design tokens.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar

from rich.style import Style
from rich.text import Text
from textual.widget import Widget

N_COLOURS = 5
# Dot bit for (column 0/1, row 0..3) inside one braille cell.
_DOTS = ((0x01, 0x02, 0x04, 0x40), (0x08, 0x10, 0x20, 0x80))


MARK = "×"


@dataclass(frozen=True)
class Series:
    name: str
    points: tuple[tuple[float, float], ...]  # (seconds, value)
    marks: bool = False  # each point a mark in its cell, not joined into a line
    colour: int | None = None  # the colour's number; None: the series' place in the plot


def bresenham(x0: int, y0: int, x1: int, y1: int) -> list[tuple[int, int]]:
    """Bresenham: the dots between two samples, so a line reads as a line."""
    dots: list[tuple[int, int]] = []
    dx, dy = abs(x1 - x0), -abs(y1 - y0)
    sx, sy = (1 if x0 < x1 else -1), (1 if y0 < y1 else -1)
    err = dx + dy
    while True:
        dots.append((x0, y0))
        if x0 == x1 and y0 == y1:
            return dots
        e2 = 2 * err
        if e2 >= dy:
            err += dy
            x0 += sx
        if e2 <= dx:
            err += dx
            y0 += sy


def nice_max(v: float) -> float:
    """A round axis top just above v (1, 2, 2.5, 5 × 10^n)."""
    if v <= 0:
        return 1.0
    mag = 10 ** len(str(int(v))) / 10 if v >= 1 else 1.0
    while mag > v:
        mag /= 10
    for step in (1, 2, 2.5, 5, 10):
        if step * mag >= v:
            return step * mag
    return 10 * mag


class TimePlot(Widget):
    """Lines of (t, value) series; a legend on top, the value axis left, time below."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "timeplot--axis",
        "timeplot--empty",
        *(f"timeplot--series-{i}" for i in range(N_COLOURS)),
    }

    def __init__(
        self,
        title: str,
        fmt: Callable[[float], str],
        *,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        super().__init__(id=id, classes=classes)
        self.title = title
        self.fmt = fmt
        self.series: tuple[Series, ...] = ()
        self.empty_text = "waiting for samples"

    def set_series(self, series: Sequence[Series], empty_text: str | None = None) -> None:
        self.series = tuple(series)
        if empty_text is not None:
            self.empty_text = empty_text
        self.refresh()

    def _colour(self, i: int) -> Style:
        """The style of the i-th series (lines are drawn in order, the last on top)."""
        chosen = self.series[i].colour
        n = i if chosen is None else chosen
        return self.get_component_rich_style(f"timeplot--series-{n % N_COLOURS}")

    def render(self) -> Text:
        width, height = self.content_size.width, self.content_size.height
        axis = self.get_component_rich_style("timeplot--axis")
        out = Text(no_wrap=True, overflow="crop")
        legend = Text(f"{self.title}  ", style=axis)
        for i, s in enumerate(self.series):
            legend.append(f"{MARK} " if s.marks else "━━ ", self._colour(i))
            legend.append(f"{s.name}  ", axis)
        out.append_text(legend)
        points = [p for s in self.series for p in s.points]
        if height < 4 or width < 20:
            return out
        if not points:
            out.append("\n" + "\n" * ((height - 2) // 2))
            out.append(
                self.empty_text.center(width), self.get_component_rich_style("timeplot--empty")
            )
            return out
        y_top = nice_max(max(v for _, v in points))
        x_end = max(t for t, _ in points) or 1.0
        labels = [self.fmt(y_top), self.fmt(y_top / 2), self.fmt(0)]
        lw = max(len(lab) for lab in labels) + 1
        cols, rows = width - lw - 1, height - 2
        if cols < 4 or rows < 2:
            return out
        masks = [[0] * cols for _ in range(rows)]
        owner = [[-1] * cols for _ in range(rows)]
        marked: dict[tuple[int, int], int] = {}  # (row, column) -> series
        dot_w, dot_h = cols * 2, rows * 4

        def to_dot(t: float, v: float) -> tuple[int, int]:
            x = round(t / x_end * (dot_w - 1))
            y = dot_h - 1 - round(min(v, y_top) / y_top * (dot_h - 1))
            return max(0, min(dot_w - 1, x)), max(0, min(dot_h - 1, y))

        for i, s in enumerate(self.series):
            dots = [to_dot(t, v) for t, v in s.points]
            if s.marks:
                marked.update(((y // 4, x // 2), i) for x, y in dots)
                continue
            path = dots[:1] + [d for a, b in itertools.pairwise(dots) for d in bresenham(*a, *b)]
            for x, y in path:
                cx, cy = x // 2, y // 4
                masks[cy][cx] |= _DOTS[x % 2][y % 4]
                owner[cy][cx] = i
        mid = rows // 2
        for r in range(rows):
            out.append("\n")
            label = labels[0] if r == 0 else labels[1] if r == mid else ""
            if r == rows - 1:
                label = labels[2]
            out.append(label.rjust(lw - 1) + " ┤" if label else " " * lw + "│", axis)
            for c in range(cols):
                m = masks[r][c]
                if (r, c) in marked:
                    out.append(MARK, self._colour(marked[r, c]))
                elif m:
                    out.append(chr(0x2800 + m), self._colour(owner[r][c]))
                else:
                    out.append(" ")
        out.append("\n")
        right = f"{x_end:.1f} s"
        out.append(" " * lw + "└" + "0 s".ljust(cols - len(right)) + right, axis)
        return out
