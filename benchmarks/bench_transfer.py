"""`python -m benchmarks transfer`: every transfer mode against iperf3 on an emulated path.

Runs `tcpwizard transfer` on host a against `tcpwizard serve` on host b, both directions,
then iperf3 with the equivalent buffer setting on the same path in the same run (`-w` for
fixed buffers, none for autotune; DRS is compared with autotuned iperf3, the best the
kernel does alone; `-R` for the way back), and prints a table with the ratios the
performance targets are stated in: goodput against the bottleneck, retransmits, and the
time each mode takes to reach 90 % of the bottleneck.

bench_transfer() runs on a Lab the caller built; run_bench_transfer() builds its own.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import platform
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from benchmarks import bench_loopback, buffer_maxima
from tcpwizard.context import Context
from tcpwizard.exitcodes import ExitCode, PermissionRequired
from tcpwizard.lab import Lab, LabSpec
from tcpwizard.lab.serving import SERVE_PORT, serving
from tcpwizard.lab.tools import iperf3_tcp
from tcpwizard.measure.engine import buffers
from tcpwizard.measure.engine.transfer import static_request
from tcpwizard.measure.model import Mode

ALL_MODES: tuple[Mode, ...] = ("untuned", "autotune", "static", "overprovisioned", "drs")
TCP_GOODPUT_SHARE = 1448 / 1500


@dataclass(frozen=True)
class BenchRow:
    mode: Mode
    streams: int
    mbps: float
    max_buffer_bytes: int
    mbps_per_mb: float
    retransmits: int
    iperf_mbps: float | None  # iperf3 with the equivalent buffer setting
    iperf_setting: str
    error: str | None = None
    forced: bool = False  # buffers set with SO_*BUFFORCE past rmem_max/wmem_max
    iperf_window: int | None = None  # the -w of the reference run (None: autotuning)
    direction: str = "up"  # up: a -> b (client sends); down: b -> a
    t90_s: float | None = None  # time to 90 % of the bottleneck's TCP goodput (None: never)
    seconds: float = 0.0  # the receiver's span, first byte to last
    # The largest receive buffer over the second half of the run: what the mode settled at.
    steady_buffer_bytes: int = 0
    # (t_s, megabits the receiver had by then), from the report's samples.
    delivered: tuple[tuple[float, float], ...] = ()

    @property
    def vs_iperf(self) -> float | None:
        if self.iperf_mbps is None or self.iperf_mbps <= 0:
            return None
        return self.mbps / self.iperf_mbps


def _iperf3(
    lab: Lab, seconds: float, streams: int, window: int | None, direction: str = "up"
) -> float:
    """Receiver-side goodput of one iperf3 run a -> b (down: b -> a, -R), Mbit/s."""
    extra = ("-P", str(streams)) + (("-w", str(window)) if window is not None else ())
    extra += ("-R",) if direction == "down" else ()
    return iperf3_tcp(lab, "a", seconds, extra).receiver_bps / 1e6


def _transfer(
    lab: Lab,
    mode: Mode,
    seconds: float,
    streams: int,
    rate_bps: float,
    force: bool = False,
    directions: Sequence[str] = ("up",),
) -> dict[str, dict[str, Any]]:
    """One `tcpwizard transfer` of `mode`, each direction: its JSON mode entry by direction."""
    both = len(directions) > 1
    argv = [sys.executable, "-m", "tcpwizard", "transfer", lab.addr("b")]
    argv += ["--port", str(SERVE_PORT), "--modes", mode, "--streams", str(streams)]
    argv += ["--direction", "both" if both else directions[0]]
    argv += ["--duration", f"{seconds:g}s", "--json"] + (["--force-buffers"] if force else [])
    argv += ["--rtt", f"{lab.rtt_s * 1000:g}ms", "--bandwidth", f"{rate_bps:g}"]
    done = lab.run("a", argv, capture_output=True, text=True, timeout=2 * seconds + 90)
    try:
        docs: list[dict[str, Any]] = json.loads(done.stdout)["transfer"]["modes"]
    except (ValueError, KeyError, TypeError):
        error = {"error": done.stderr.strip()[-300:] or "no output"}
        return {d: error for d in directions}
    missing = {"error": "no result for this direction"}
    return {d: next((m for m in docs if m.get("direction") == d), missing) for d in directions}


def time_to_share(
    samples: Sequence[dict[str, Any]], target_mbps: float, window_s: float
) -> float | None:
    """When the goodput first reached `target_mbps`, taken over a window of at least
    `window_s` (one interval's burst after a loss recovery is not a rate) and reported at
    the window's end; None if it never did. Samples are the report's (t_s, goodput_mbps of
    the interval ending at t_s)."""
    points = delivered_points(samples)
    start = 0
    for j in range(1, len(points)):
        while start + 1 < j and points[j][0] - points[start + 1][0] >= window_s:
            start += 1
        span = points[j][0] - points[start][0]
        if span >= window_s and (points[j][1] - points[start][1]) / span >= target_mbps:
            return points[j][0]
    return None


def delivered_points(samples: Sequence[dict[str, Any]]) -> list[tuple[float, float]]:
    """(t_s, megabits received so far) from a report's samples, starting at (0, 0)."""
    points: list[tuple[float, float]] = [(0.0, 0.0)]
    for s in samples:
        t, mbps = s.get("t_s"), s.get("goodput_mbps")
        if t is None or mbps is None or t <= points[-1][0]:
            continue
        points.append((float(t), points[-1][1] + float(mbps) * (float(t) - points[-1][0])))
    return points


def megabits_at(points: Sequence[tuple[float, float]], t: float) -> float:
    """Megabits received by time t, linear between samples (the last count past the end)."""
    for (t0, m0), (t1, m1) in itertools.pairwise(points):
        if t <= t1:
            return m0 + (m1 - m0) * (t - t0) / (t1 - t0) if t1 > t0 else m1
    return points[-1][1] if points else 0.0


def steady_buffer(samples: Sequence[dict[str, Any]], seconds: float) -> int:
    """The largest receive buffer over the second half of a run."""
    late = [int(s.get("rcvbuf_bytes") or 0) for s in samples if (s.get("t_s") or 0) > seconds / 2]
    return max(late, default=0)


def iperf_window(
    mode: Mode, rtt_s: float, rate_bps: float, limits: buffers.HostBufferLimits
) -> int | None:
    """The `iperf3 -w` that sets the buffers `mode` sets (None: no -w, autotuning)."""
    if mode == "untuned":
        return buffers.UNTUNED_BYTES
    if mode == "static":
        return static_request(rtt_s, rate_bps)
    if mode == "overprovisioned":
        return min(limits.rmem_max, limits.wmem_max)
    return None


def lab_limits(lab: Lab) -> buffers.HostBufferLimits:
    """The receiver's buffer limits as seen inside the lab (tcp_rmem is per namespace;
    rmem_max may be the host's, read-only in the lab)."""

    def ints(key: str) -> list[int]:
        return [int(x) for x in lab.sysctl("b", key).split()]

    r, w = ints("net.ipv4.tcp_rmem"), ints("net.ipv4.tcp_wmem")
    return buffers.HostBufferLimits(
        rmem_max=ints("net.core.rmem_max")[0],
        wmem_max=ints("net.core.wmem_max")[0],
        tcp_rmem=(r[0], r[1], r[2]),
        tcp_wmem=(w[0], w[1], w[2]),
    )


def force_overprovisioned(limits: buffers.HostBufferLimits) -> bool:
    """Whether `overprovisioned` needs --force-buffers to reach the host's TCP ceiling.

    The paper's over-provisioned case is the largest buffer the OS is set to allow (16 MB,
    with rmem_max raised to match). Where net.core.rmem_max is global and read-only in a
    namespace, the lab cannot raise it; forcing the socket to the receiver's tcp_rmem max
    stands in for that sysctl without touching the host."""
    reach = 2 * min(limits.rmem_max, limits.wmem_max)
    return min(limits.tcp_rmem[2], limits.tcp_wmem[2]) > reach


def bench_transfer(
    lab: Lab,
    *,
    modes: Sequence[Mode] = ALL_MODES,
    streams: Sequence[int] = (1,),
    seconds: float = 15.0,
    iperf: bool = True,
    out: TextIO | None = None,
    directions: Sequence[str] = ("up", "down"),
    force_drs: bool = False,
) -> list[BenchRow]:
    """Run the matrix modes x streams x directions between a and b; print the table to
    `out`. `force_drs`: DRS with --force-buffers, for paths whose BDP the host's rmem_max
    (global, read-only in the lab) would cap."""
    rate = lab.spec.forward.rate_bps
    rtt = lab.rtt_s
    limits = lab_limits(lab)
    force_over = force_overprovisioned(limits) and buffers.can_force()
    tcp_max = rate / 1e6 * TCP_GOODPUT_SHARE
    rows: list[BenchRow] = []
    iperf_cache: dict[tuple[int | None, int, str], float] = {}
    with serving(lab, "b", SERVE_PORT, "--max-duration", str(seconds + 5)):
        for n in streams:
            for mode in modes:
                force = (mode == "overprovisioned" and force_over) or (mode == "drs" and force_drs)
                docs = _transfer(lab, mode, seconds, n, rate, force, directions)
                window = iperf_window(mode, rtt, rate, limits)
                for d in directions:
                    doc = docs[d]
                    ref: float | None = None
                    if iperf:
                        key = (window, n, d)
                        if key not in iperf_cache:
                            iperf_cache[key] = _iperf3(lab, seconds, n, window, d)
                        ref = iperf_cache[key]
                    rows.append(
                        BenchRow(
                            mode=mode,
                            streams=n,
                            mbps=float(doc.get("throughput_mbps") or 0.0),
                            max_buffer_bytes=int(doc.get("max_buffer_bytes") or 0),
                            mbps_per_mb=float(doc.get("mbps_per_mb") or 0.0),
                            retransmits=int(doc.get("retransmits") or 0),
                            iperf_mbps=ref,
                            iperf_setting="no -w" if window is None else f"-w {window}",
                            error=doc.get("error"),
                            forced=bool(doc.get("forced")),
                            iperf_window=window,
                            direction=d,
                            t90_s=time_to_share(
                                doc.get("samples") or [], 0.9 * tcp_max, max(rtt, T90_WINDOW_S)
                            ),
                            seconds=float(doc.get("seconds") or 0.0),
                            steady_buffer_bytes=steady_buffer(
                                doc.get("samples") or [], float(doc.get("seconds") or 0.0)
                            ),
                            delivered=tuple(delivered_points(doc.get("samples") or [])),
                        )
                    )
    if out is not None:
        out.write(render_table(rows, rate, rtt) + "\n")
    return rows


T90_WINDOW_S = 0.3  # the time-to-90 % rate is taken over at least this (or an RTT)


def _t90(r: BenchRow | None) -> str:
    if r is None:
        return "-"
    return "never" if r.t90_s is None else f"{r.t90_s:.2f} s"


def render_table(rows: Sequence[BenchRow], rate_bps: float, rtt_s: float) -> str:
    """Markdown: one line per mode, direction and stream count, then the targets."""
    bdp = rate_bps / 8 * rtt_s
    lines = [
        f"Path {rate_bps / 1e6:g} Mbit/s x {rtt_s * 1e3:g} ms (BDP {bdp / 1e3:.0f} kB)",
        "",
        "| mode | dir | streams | Mbit/s | iperf3 Mbit/s (setting) | ratio | max buffer | "
        "buffer/BDP | Mbit/s per MB | retrans | time to 90 % |",
        "|---|---|---:|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        ref = "-" if r.iperf_mbps is None else f"{r.iperf_mbps:.1f} ({r.iperf_setting})"
        ratio = "-" if r.vs_iperf is None else f"{r.vs_iperf:.2f}"
        lines.append(
            f"| {r.mode}{'*' if r.forced else ''} | {r.direction} | {r.streams} | {r.mbps:.1f} | "
            f"{ref} | {ratio} | {r.max_buffer_bytes / 1e6:.2f} MB | "
            f"{r.max_buffer_bytes / bdp:.1f} | {r.mbps_per_mb:.1f} | {r.retransmits} | "
            f"{_t90(r)} |" + (f" error: {r.error}" if r.error else "")
        )
    # TCP over the bottleneck carries at most (MTU - 52) / MTU of its IP rate as goodput
    # (headers with timestamps; MTU 1500 assumed, as the lab uses).
    tcp_max = rate_bps / 1e6 * TCP_GOODPUT_SHARE
    by = {(r.mode, r.streams, r.direction): r for r in rows}
    drs = by.get(("drs", 1, "up"))
    untuned, over = by.get(("untuned", 1, "up")), by.get(("overprovisioned", 1, "up"))
    if drs is not None:
        lines.append("")
        lines.append(f"- DRS goodput / the bottleneck's TCP goodput: {drs.mbps / tcp_max:.2f}")
        lines.append(f"- DRS max buffer / BDP: {drs.max_buffer_bytes / bdp:.2f}")
        if untuned is not None and untuned.mbps > 0:
            lines.append(
                f"- DRS / untuned goodput: {drs.mbps / untuned.mbps:.1f}x (no mode can exceed "
                f"the bottleneck's TCP goodput / untuned = {tcp_max / untuned.mbps:.1f}x here)"
            )
        if over is not None and over.mbps_per_mb > 0:
            lines.append(
                f"- DRS / overprovisioned Mbit/s per MB: {drs.mbps_per_mb / over.mbps_per_mb:.1f}x"
                f" (overprovisioned {over.max_buffer_bytes / 1e6:.2f} MB)"
            )
        if over is not None and over.forced and over.iperf_window and over.iperf_mbps:
            # What the efficiency would be at the largest buffer setsockopt reaches without
            # force, with the throughput iperf3 measured at that setting.
            capped = over.iperf_mbps / (2 * over.iperf_window / 1e6)
            lines.append(
                f"- the same against the {2 * over.iperf_window / 1e6:.2f} MB that setsockopt "
                f"reaches without force (iperf3 {over.iperf_setting}): "
                f"{drs.mbps_per_mb / capped:.1f}x"
            )
    for d in ("up", "down"):
        line = drs_vs_autotune(by.get(("drs", 1, d)), by.get(("autotune", 1, d)), tcp_max)
        if line:
            lines.append(f"- {d}: {line}")
    if any(r.forced for r in rows):
        lines += [
            "",
            "\\* forced (SO_RCVBUFFORCE/SO_SNDBUFFORCE) past net.core.rmem_max/wmem_max, which "
            "are global on this kernel and cannot be raised inside the lab (overprovisioned: to "
            "the receiver's tcp_rmem max, the paper's 'OS allows up to 16 MB'; DRS: free to "
            "size itself); iperf3 -w stays capped at rmem_max.",
        ]
    return "\n".join(lines)


def drs_vs_autotune(drs: BenchRow | None, auto: BenchRow | None, tcp_max: float) -> str | None:
    """The targets in one line: DRS >= 0.90 of the bottleneck's TCP goodput, retransmits no
    more than autotune's, time to 90 % <= 1.2 x autotune's."""
    if drs is None or auto is None:
        return None
    parts = [
        f"DRS {drs.mbps / tcp_max:.2f} of the bottleneck (autotune {auto.mbps / tcp_max:.2f}; "
        f"target >= 0.90)",
        f"retransmits {drs.retransmits} vs autotune's {auto.retransmits} "
        f"({'ok' if drs.retransmits <= auto.retransmits else 'more'})",
    ]
    if drs.t90_s is not None and auto.t90_s is not None and auto.t90_s > 0:
        parts.append(
            f"time to 90 % {drs.t90_s:.2f} s vs {auto.t90_s:.2f} s = "
            f"{drs.t90_s / auto.t90_s:.2f}x (target <= 1.2)"
        )
    else:
        parts.append(f"time to 90 % {_t90(drs)} vs autotune's {_t90(auto)}")
    return "; ".join(parts)


# ---------------------------------------------------------------------------- the benchmark

BIG_BUFFERS = buffer_maxima(16777216, 16777216)
# The matrix reaches 12.5 MB of BDP (500 Mbit/s x 200 ms): autotuning needs room for it.
HUGE_BUFFERS = buffer_maxima(67108864, 67108864)
# (rate bit/s, RTT s): the paper's emulated set-up, then a second, longer path.
PATHS = ((100e6, 0.100), (50e6, 0.050))
# The DRS targets' paths: every mode both ways, against iperf3.
TARGET_PATHS = ((80e6, 0.060), (100e6, 0.100))
MATRIX_RTTS = (0.050, 0.100, 0.200)
MATRIX_RATES = (100e6, 200e6, 500e6)
PAPER_STREAMS = (1, 2, 4, 8)


def run_bench_transfer(
    quick: bool, out_dir: str, progress: Callable[[str], None] | None = None
) -> str:
    """The whole `python -m benchmarks transfer`: loopback against iperf3; every mode both ways
    against iperf3 on the paper's and two of the DRS targets' paths; DRS against autotune
    on all four targets' paths, 3 s and 8 s tests, every run; the matrix 50/100/200 ms x
    100/200/500 Mbit/s with each mode's time to 90 %; and (full run) the paper's modes x
    streams 1/2/4/8 at 50 ms. Builds and removes its own labs (root). Returns the Markdown
    it also writes to out_dir.
    --quick: shorter runs, one round of the DRS targets, no paper matrix."""
    say: Callable[[str], None] = progress or (lambda _m: None)
    seconds = 8.0 if quick else 15.0
    matrix_seconds = 5.0 if quick else 8.0
    modes: Sequence[Mode] = ALL_MODES
    run_id = uuid.uuid4().hex[:6]
    parts = [
        "# Transfer modes against iperf3 (`python -m benchmarks transfer`)",
        "",
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; kernel {platform.release()}, "
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at start; "
        f"{seconds:g} s per run, both directions (up: a -> b, down: b -> a); receiver "
        "tcp_rmem max 16 MB (64 MB in the matrix). Time to 90 %: when the goodput over an RTT "
        "(at least 0.3 s) first reached 90 % of the bottleneck's TCP goodput.",
        "",
    ]
    path = os.path.join(out_dir, "bench-transfer.md")
    os.makedirs(out_dir, exist_ok=True)

    def save() -> None:
        # After every section: a run of many minutes that fails late keeps what it measured.
        with open(path, "w") as f:
            f.write("\n".join(parts))

    say("loopback: autotune against iperf3, 1 and 4 streams ...")
    runs = 1 if quick else 3
    parts += ["## Loopback", "", bench_loopback.render(bench_loopback.measure(runs=runs), 3.0), ""]
    save()
    paths = TARGET_PATHS if quick else PATHS + TARGET_PATHS
    for i, (rate, rtt) in enumerate(paths):
        spec = LabSpec.symmetric(
            rate, rtt, sysctls_a=BIG_BUFFERS, sysctls_b=BIG_BUFFERS, name=f"twtb-{run_id}-{i}"
        )
        say(f"lab {rate / 1e6:g} Mbit/s x {rtt * 1e3:g} ms: every mode both ways and iperf3 ...")
        with Lab(spec, owner_pid=os.getpid()) as lab:
            rows = bench_transfer(lab, modes=modes, seconds=seconds)
            parts += [render_table(rows, rate, rtt), f"(load average {_load()})", ""]
            save()
            if (rate, rtt) == PATHS[-1] and not quick:
                say("the paper's matrix: modes x streams 1, 2, 4, 8 ...")
                matrix = bench_transfer(
                    lab, streams=PAPER_STREAMS, seconds=seconds, iperf=False, directions=("up",)
                )
                parts += ["## The paper's experiment in miniature", "", _matrix(matrix), ""]
    # DRS against autotune on the targets' paths, 3 s and 8 s tests, every run reported. As
    # an unprivileged check runs them: DRS within rmem_max, autotune within tcp_rmem max.
    from benchmarks import bench_drs_targets as drs_targets  # it imports this module

    say("DRS against autotune on the targets' paths, 3 s and 8 s, every run ...")
    parts += drs_targets.header()
    for rate, rtt in drs_targets.PATHS:
        pairs = drs_targets.measure_path(rate, rtt, 1 if quick else drs_targets.ROUNDS, say=say)
        parts += [drs_targets.render_path(rate, rtt, pairs), f"(load average {_load()})", ""]
        save()
    say("the matrix: 50/100/200 ms x 100/200/500 Mbit/s ...")
    cells: list[tuple[float, float, list[BenchRow]]] = []
    for rtt in MATRIX_RTTS:
        for rate in MATRIX_RATES:
            say(f"  {rate / 1e6:g} Mbit/s x {rtt * 1e3:g} ms ...")
            spec = LabSpec.symmetric(
                rate,
                rtt,
                sysctls_a=HUGE_BUFFERS,
                sysctls_b=HUGE_BUFFERS,
                name=f"twtm-{run_id}-{len(cells)}",
            )
            with Lab(spec, owner_pid=os.getpid()) as lab:
                limits = lab_limits(lab)
                rows = bench_transfer(
                    lab,
                    modes=modes,
                    seconds=matrix_seconds,
                    iperf=False,
                    force_drs=drs_needs_force(limits, rate, rtt) and buffers.can_force(),
                )
            cells.append((rate, rtt, rows))
            with open(path + ".matrix-partial", "w") as f:
                f.write(matrix_table(cells))
    parts += [
        f"## Time to 90 % of the bottleneck ({matrix_seconds:g} s per run)",
        "",
        matrix_table(cells),
        f"(load average {_load()} at the end)",
        "",
    ]
    save()
    with contextlib.suppress(OSError):
        os.remove(path + ".matrix-partial")
    return "\n".join(parts)


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def drs_needs_force(limits: buffers.HostBufferLimits, rate_bps: float, rtt_s: float) -> bool:
    """Whether DRS needs --force-buffers to size itself on this path: its startup may ask
    for ~3 x BDP, and plain setsockopt stops at rmem_max/wmem_max (global on this kernel,
    read-only in the lab)."""
    return 3 * rate_bps / 8 * rtt_s > min(limits.rmem_max, limits.wmem_max)


def matrix_table(cells: Sequence[tuple[float, float, Sequence[BenchRow]]]) -> str:
    """One line per path and direction; per mode: goodput, time to 90 %, retransmits. The
    lab column: the best goodput any mode reached, against the bottleneck's TCP goodput
    (the user-space delay line runs out of CPU before 500 Mbit/s)."""
    modes = [m for m in ALL_MODES if any(r.mode == m for _, _, rows in cells for r in rows)]
    lines = [
        "| path | dir | lab reached | "
        + " | ".join(f"{m}: Mbit/s, to 90 %, retr" for m in modes)
        + " |",
        "|---|---|---:|" + "---|" * len(modes),
    ]
    for rate, rtt, rows in cells:
        tcp_max = rate / 1e6 * TCP_GOODPUT_SHARE
        for d in ("up", "down"):
            mine = {r.mode: r for r in rows if r.direction == d}
            if not mine:
                continue
            best = max(r.mbps for r in mine.values())
            cells_txt = [
                "-"
                if (r := mine.get(m)) is None
                else f"{r.mbps:.1f}{'*' if r.forced else ''}, {_t90(r)}, {r.retransmits}"
                for m in modes
            ]
            lines.append(
                f"| {rate / 1e6:g} Mbit/s x {rtt * 1e3:g} ms | {d} | {best / tcp_max:.2f} | "
                + " | ".join(cells_txt)
                + " |"
            )
    lines += [
        "",
        "\\* forced (SO_RCVBUFFORCE/SO_SNDBUFFORCE) past this host's net.core.rmem_max, "
        "which the lab cannot raise: overprovisioned to the receiver's tcp_rmem max, DRS where "
        "3 x BDP is past rmem_max. 'never': 90 % was not reached in the run (the lab's own "
        "ceiling where 'lab reached' is below 0.9).",
    ]
    return "\n".join(lines)


def _matrix(rows: Sequence[BenchRow]) -> str:
    """Mbit/s by mode (rows) and stream count (columns)."""
    counts = sorted({r.streams for r in rows})
    modes = [m for m in ALL_MODES if any(r.mode == m for r in rows)]
    by = {(r.mode, r.streams): r for r in rows}
    lines = [
        "| mode | " + " | ".join(f"{n} stream{'s' if n > 1 else ''}" for n in counts) + " |",
        "|---|" + "---:|" * len(counts),
    ]
    for m in modes:
        cells = []
        for n in counts:
            r = by.get((m, n))
            cells.append("-" if r is None else f"{r.mbps:.1f} ({r.mbps_per_mb:.0f}/MB)")
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def run_bench_cli(quick: bool, out_dir: str, ctx: Context) -> int:
    """For `python -m benchmarks transfer` (MATRIX in benchmarks/cli.py)."""
    if os.geteuid() != 0:
        raise PermissionRequired("the transfer bench needs root (network namespaces)")
    text = run_bench_transfer(quick, out_dir, progress=ctx.progress)
    print(text, file=ctx.stdout)
    ctx.progress(f"wrote {os.path.join(out_dir, 'bench-transfer.md')}")
    return int(ExitCode.OK)
