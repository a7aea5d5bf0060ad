"""PNG plots of `python -m benchmarks paper` in the papers' shapes (matplotlib, Agg: no display).

- throughput against parallel streams, one panel per delay (Weigle & Feng, Figures 2-10);
- receive buffer over time for DRS (Engelhart et al., Figure 6), kernel autotuning beside;
- Mbit/s per MB of buffer per tuning (Engelhart et al., Figure 9).
"""

from __future__ import annotations

import math
import os

import matplotlib

matplotlib.use("Agg")  # before pyplot: headless machines, tests, no DISPLAY

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from benchmarks.paper_matrix import Cell, Plan
from benchmarks.paper_results import ResultStore

DPI = 80  # small PNGs (they are committed under docs/img)
PANEL_IN = (3.6, 3.2)  # one delay's panel, inches
WIDE_IN = (8.0, 3.6)


def figure_pixels(name: str, plan: Plan) -> tuple[int, int]:
    """Width and height in pixels of the PNG `name` for this plan (tests check it)."""
    w, h = _size_in(name, plan)
    return round(w * DPI), round(h * DPI)


def _size_in(name: str, plan: Plan) -> tuple[float, float]:
    if name == "paper-streams.png":
        return PANEL_IN[0] * len(plan.rtts_ms), PANEL_IN[1] + 0.6
    return WIDE_IN


def _log_y(ax: Axes) -> None:
    """Log scale with plain numbers (0.1, 1, 10), no 4x10^1 labels on minor ticks."""
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_formatter(NullFormatter())


def _save(fig: Figure, path: str) -> None:
    # No bbox_inches="tight": it would change the size from what figure_pixels promises.
    fig.savefig(path, dpi=DPI)
    plt.close(fig)


def plot_streams(plan: Plan, store: ResultStore, path: str) -> None:
    fig, axes = plt.subplots(
        1, len(plan.rtts_ms), figsize=_size_in("paper-streams.png", plan), squeeze=False
    )
    colors = plt.get_cmap("tab10")
    for ax, rtt in zip(axes[0], plan.rtts_ms, strict=True):
        for i, t in enumerate(plan.tunings):
            xs, ys, lo, hi, ips = [], [], [], [], []
            for n in plan.streams:
                cr = store.get(Cell(t.name, rtt, n))
                good = [r.mbps for r in cr.good_runs]
                if not good:
                    continue
                med = cr.median_mbps
                xs.append(n)
                ys.append(med)
                lo.append(med - min(good))
                hi.append(max(good) - med)
                ips.append(cr.iperf3_mbps if cr.iperf3_mbps is not None else math.nan)
            if not xs:
                continue
            color = colors(i)
            ax.errorbar(xs, ys, yerr=[lo, hi], marker="o", ms=4, capsize=2, color=color,
                        label=t.name)  # fmt: skip
            if any(not math.isnan(v) for v in ips):
                ax.plot(xs, ips, linestyle="none", marker="x", color=color)
        ax.set_xscale("log", base=2)
        ax.set_xticks(list(plan.streams), [str(n) for n in plan.streams])
        ax.set_title(f"{rtt:g} ms RTT", fontsize=10)
        ax.set_xlabel("parallel streams")
        ax.set_ylim(bottom=0, top=plan.rate_bps / 1e6 * 1.08)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("throughput, Mbit/s (x: iperf3)")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(plan.tunings), fontsize=8)
    width_in = fig.get_figwidth()
    # Room for the y label in inches, whatever the number of panels.
    fig.subplots_adjust(bottom=0.3, top=0.9, wspace=0.25, left=0.7 / width_in, right=0.98)
    _save(fig, path)


def plot_drs_buffer(plan: Plan, store: ResultStore, path: str) -> None:
    fig, ax = plt.subplots(figsize=WIDE_IN)
    colors = plt.get_cmap("tab10")
    streams = plan.streams[0]
    for i, rtt in enumerate(plan.rtts_ms):
        for tuning, style in (("drs", "-"), ("autotune-raised", ":")):
            trace = store.get(Cell(tuning, rtt, streams)).trace
            if trace:
                ax.plot([t for t, _ in trace], [b / 1e6 for _, b in trace], style,
                        color=colors(i), label=f"{tuning}, {rtt:g} ms")  # fmt: skip
        bdp2 = 2 * plan.rate_bps / 8 * rtt / 1e3 / 1e6
        ax.axhline(bdp2, color=colors(i), alpha=0.3, linewidth=0.8)
    _log_y(ax)  # 0.5 ms and 100 ms buffers differ by two orders of magnitude
    ax.set_xlabel("time, s")
    ax.set_ylabel("receive buffer, MB (thin: 2 x BDP)")
    ax.set_title(f"Receive buffer over one transfer ({streams} stream)", fontsize=10)
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5))
    else:  # a subset run without DRS: say so rather than leave a blank frame
        ax.text(0.5, 0.5, "no DRS or autotune traces in these results", ha="center",
                transform=ax.transAxes)  # fmt: skip
    fig.subplots_adjust(left=0.11, right=0.68, bottom=0.14, top=0.9)
    _save(fig, path)


def plot_efficiency(plan: Plan, store: ResultStore, path: str) -> None:
    fig, ax = plt.subplots(figsize=WIDE_IN)
    colors = plt.get_cmap("tab10")
    streams = plan.streams[0]
    width = 0.8 / max(1, len(plan.tunings))
    for i, t in enumerate(plan.tunings):
        xs, ys = [], []
        for j, rtt in enumerate(plan.rtts_ms):
            v = store.get(Cell(t.name, rtt, streams)).mbps_per_mb
            if v > 0:
                xs.append(j + (i - (len(plan.tunings) - 1) / 2) * width)
                ys.append(v)
        bars = ax.bar(xs, ys, width=width, color=colors(i), label=t.name)
        ax.bar_label(bars, fmt="%.3g", fontsize=6)
    ax.set_xticks(range(len(plan.rtts_ms)), [f"{r:g} ms" for r in plan.rtts_ms])
    _log_y(ax)
    ax.set_ylabel("Mbit/s per MB of rcv buffer")
    ax.set_title(f"Memory efficiency ({streams} stream)", fontsize=10)
    ax.grid(alpha=0.3, axis="y")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5))
    fig.subplots_adjust(left=0.11, right=0.75, bottom=0.12, top=0.9)
    _save(fig, path)


def write_plots(plan: Plan, store: ResultStore, img_dir: str) -> list[str]:
    os.makedirs(img_dir, exist_ok=True)
    out = []
    for name, fn in (
        ("paper-streams.png", plot_streams),
        ("paper-drs-buffer.png", plot_drs_buffer),
        ("paper-efficiency.png", plot_efficiency),
    ):
        path = os.path.join(img_dir, name)
        fn(plan, store, path)
        out.append(path)
    return out
