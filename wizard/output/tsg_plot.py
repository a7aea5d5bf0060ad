"""Time-sequence graphs as PNG and SVG (matplotlib, Agg: no display needed): xplot's picture
of a transfer. Data segments are short vertical bars from their first to their last byte,
retransmissions red, the cumulative ACK a step line and the receive window's right edge
above it: data pressed against that edge is a receive-window limit, a staircase of pauses
far below it is the sender or the network."""

from __future__ import annotations

import os
import re

from tcpwizard.exitcodes import Unavailable
from tcpwizard.measure.observe.tsg import TsgSeries

MB = 1e6


def require_matplotlib() -> None:
    """matplotlib is the tool's `plot` extra, not a dependency: its absence is said before a
    run is captured, in one line, not after it."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise Unavailable(
            "--plot needs matplotlib (pip install 'tcpwizard[plot]'; "
            "pipx: pipx inject tcpwizard matplotlib)"
        ) from None


def _name(i: int, s: TsgSeries, direction: str) -> str:
    safe = re.sub(r"[^0-9A-Za-z.]+", "_", f"{s.src}_{s.dst}")
    return f"tsg-{i:02d}-{direction}-{safe}"


def plot_tsg(s: TsgSeries, path_base: str, title: str = "") -> list[str]:
    """Write path_base.png and path_base.svg; returns the paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.collections import LineCollection

    fig, ax = plt.subplots(figsize=(10, 6), dpi=100)
    if s.data:
        bars = [((t, a / MB), (t, b / MB)) for t, a, b in s.data]
        ax.add_collection(LineCollection(bars, colors="#1f4e9c", linewidths=1.0, label="data"))
    if s.retransmits:
        bars = [((t, a / MB), (t, b / MB)) for t, a, b in s.retransmits]
        ax.add_collection(LineCollection(bars, colors="#d62728", linewidths=2.0,
                                         label="retransmission"))  # fmt: skip
        ax.plot([t for t, _a, _b in s.retransmits], [b / MB for _t, _a, b in s.retransmits],
                "x", color="#d62728", markersize=4)  # fmt: skip
    if s.acks:
        ax.step([t for t, _ in s.acks], [a / MB for _, a in s.acks], where="post",
                color="#2ca02c", linewidth=1.0, label="ACK")  # fmt: skip
    if s.window:
        ax.step([t for t, _ in s.window], [w / MB for _, w in s.window], where="post",
                color="#ff7f0e", linewidth=1.0, label="receive window edge")  # fmt: skip
    ax.autoscale()
    ax.set_xlabel("time (s)")
    ax.set_ylabel("sequence (MB from the first byte)")
    scale = (
        "no SYN seen: windows unscaled" if s.window_scale is None else f"wscale {s.window_scale}"
    )
    ax.set_title(title or f"{s.flow}  ({s.bytes / MB:.1f} MB in {s.duration_s:.1f} s, {scale})")
    ax.legend(loc="upper left")
    ax.grid(True, alpha=0.3)
    out = []
    for ext in ("png", "svg"):
        fig.savefig(f"{path_base}.{ext}")
        out.append(f"{path_base}.{ext}")
    plt.close(fig)
    return out


def plot_all(series: list[TsgSeries], out_dir: str, remote: str | None = None) -> list[str]:
    """One PNG and one SVG per flow into out_dir; 'up' when the data went to `remote`
    (the far end), 'down' when it came from it."""
    os.makedirs(out_dir, exist_ok=True)
    written: list[str] = []
    for i, s in enumerate(series, 1):
        direction = "flow"
        if remote is not None:
            direction = "up" if s.dst == remote else "down"
        written += plot_tsg(s, os.path.join(out_dir, _name(i, s, direction)))
    return written
