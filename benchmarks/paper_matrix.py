"""The experiment matrix of the seed papers, planned for the lab (`python -m benchmarks paper`).

Weigle & Feng 2002 §3: tuning x delay {0.5, 25, 50, 100} ms x parallel streams {1, 2, 4, 8},
128 MB per run. Engelhart, Gardner & Feng §5 add the drsFTP variants: stock 64 KB buffers,
static buffers sized from the BDP, over-provisioned buffers and DRS. Pure planning: no I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

from benchmarks import buffer_maxima
from tcpwizard.measure.model import Mode

Limits = Literal["default", "raised"]
Iperf3Kind = Literal["none", "fixed-64k", "auto", "static", "max"]

RATE_BPS = 100e6  # Fast Ethernet, as in the drsFTP paper; Python endpoints sustain it
# TCP goodput ceiling on the delay line: it counts IP bytes, and each 1500-byte packet
# carries 1448 bytes of payload (52 bytes of IP + TCP headers with timestamps).
GOODPUT_SHARE = 1448 / 1500
# The bottleneck's drop-tail queue: one BDP (the lab's default), but at least 100 packets.
# The lab's floor of 10 packets (1.2 ms at 100 Mbit/s) is shorter than the delay line's
# scheduling hiccups on two shared cores: at 0.5 ms it dropped bursts and even iperf3 got
# 56 Mbit/s with a spread of 20-40 %, measuring the emulator instead of the tuning.
MIN_QUEUE_BYTES = 100 * 1500
PAPER_BYTES = 128 * 1024 * 1024  # 128 messages of 1 MB (Weigle & Feng §3.2)
REPS = 3
RTTS_MS: tuple[float, ...] = (0.5, 25.0, 50.0, 100.0)
STREAMS: tuple[int, ...] = (1, 2, 4, 8)
# --quick: the delays the papers plot (Weigle & Feng omit the 50 ms graph as "not
# significantly different" from 100 ms) and streams that still show the slope.
QUICK_RTTS_MS: tuple[float, ...] = (0.5, 25.0, 100.0)
QUICK_STREAMS: tuple[int, ...] = (1, 2, 8)
# --quick runs last 1 s + 10 RTT: slow start and DRS's startup take a number of round trips,
# so a fixed length would time mostly startup at 100 ms (DRS runs of 1.5 s there spread by
# 14 %; 2.5 s runs by 4 % at most) and mostly steady state at 0.5 ms.
QUICK_BASE_S = 1.0
QUICK_RTTS = 10

# Linux's compiled-in autotuning ranges (net/ipv4/tcp.c, tcp_init) on a machine with this
# much memory; set explicitly so the "default" rows do not depend on what the host was
# tuned to (a child namespace would inherit the host's values).
DEFAULT_LIMITS = buffer_maxima(6291456, 4194304)
# "Kernel-only tuning": raise the autotuning ceilings. net.core.rmem_max/wmem_max are
# global and read-only in a child namespace, so setsockopt() stays capped by the host's.
RAISED_LIMITS = buffer_maxima(67108864, 67108864)

# Linux grants twice a SO_RCVBUF request (sk_rcvbuf = 131072 for 64 KB) and advertises
# sk_rcvbuf x skb->len/skb->truesize of received segments: 1448-byte segments in ~2360-byte
# buffers give 0.614 x 131072 = 80,480 B, read back as tcpi_snd_wnd at the sender (see
# docs/bench-calibrate.md). window/RTT with 65,536 B would be 18 % low.
UNTUNED_WINDOW_BYTES = 80480

# Time model for the budget, fitted to runs on this machine: each `tcpwizard transfer`
# call costs about 0.6 s (interpreter, control connection); each mode 0.2 s plus round
# trips that grow with the streams (one attach per stream, in turn) and the drain of what
# large send buffers still hold when a duration-limited sender stops; an iperf3 pair
# about 0.8 s beyond its -t.
CALL_OVERHEAD_S = 0.6
MODE_OVERHEAD_S = 0.2
MODE_RTTS = 5.0
STREAM_RTTS = 2.5
IPERF3_OVERHEAD_S = 0.8


@dataclass(frozen=True)
class Tuning:
    name: str
    label: str  # the papers' words
    mode: Mode  # the transfer engine's mode
    limits: Limits  # which autotuning ranges the lab hosts get
    iperf3: Iperf3Kind  # the iperf3 run that does the same thing, if any


TUNINGS: tuple[Tuning, ...] = (
    Tuning("untuned", "no tuning: 64 KB buffers (stock FTP)", "untuned", "default", "fixed-64k"),
    Tuning("autotune", "kernel autotuning, default limits", "autotune", "default", "auto"),
    Tuning("autotune-raised", "kernel-only tuning (raised limits)", "autotune", "raised", "auto"),
    Tuning("static", "user/kernel tuning: static 2 x BDP", "static", "raised", "static"),
    Tuning("overprovisioned", "over-provisioned (host max)", "overprovisioned", "raised", "max"),
    Tuning("drs", "DRS (user-space dynamic right-sizing)", "drs", "raised", "none"),
)
TUNING_BY_NAME = {t.name: t for t in TUNINGS}


@dataclass(frozen=True)
class Cell:
    tuning: str
    rtt_ms: float
    streams: int

    @property
    def key(self) -> str:
        return f"{self.tuning}/{self.rtt_ms:g}ms/x{self.streams}"


@dataclass(frozen=True)
class Group:
    """Cells that share one lab (RTT and limits) and one `transfer` call per repetition."""

    rtt_ms: float
    limits: Limits
    streams: int
    tunings: tuple[Tuning, ...]

    def cells(self) -> tuple[Cell, ...]:
        return tuple(Cell(t.name, self.rtt_ms, self.streams) for t in self.tunings)


@dataclass(frozen=True)
class Plan:
    quick: bool
    rate_bps: float
    rtts_ms: tuple[float, ...]
    streams: tuple[int, ...]
    tunings: tuple[Tuning, ...]
    reps: int
    duration_s: float | None  # duration-limited runs (--quick): this + duration_rtts x RTT...
    nbytes: int | None  # ...or byte-limited ones (the paper's 128 MB)
    duration_rtts: float = 0.0

    def run_seconds(self, rtt_ms: float) -> float | None:
        """Length of a duration-limited run at this delay (None: byte-limited)."""
        if self.duration_s is None:
            return None
        return round(self.duration_s + self.duration_rtts * rtt_ms / 1e3, 1)

    def length_text(self) -> str:
        if self.duration_s is None:
            return f"{(self.nbytes or 0) // 2**20} MiB per run (the paper's size)"
        rtts = f" + {self.duration_rtts:g} RTT" if self.duration_rtts else ""
        return f"{self.duration_s:g} s{rtts} per run"

    def cells(self) -> list[Cell]:
        return [c for g in self.groups() for c in g.cells()]

    def groups(self) -> list[Group]:
        """One lab per (RTT, limits): fewer lab setups, and the cells of one group run
        back to back under the same conditions."""
        out: list[Group] = []
        for rtt in self.rtts_ms:
            for limits in ("default", "raised"):
                tunings = tuple(t for t in self.tunings if t.limits == limits)
                if tunings:
                    out += [Group(rtt, limits, n, tunings) for n in self.streams]
        return out

    def iperf3_seconds(self, rtt_ms: float) -> int:
        """iperf3 3.12 takes whole seconds for -t: the run's length rounded up (0: bytes)."""
        run = self.run_seconds(rtt_ms)
        return 0 if run is None else math.ceil(run)

    def config(self) -> dict[str, Any]:
        """What a stored result must match to be reused (resume)."""
        return {
            "rate_bps": self.rate_bps,
            "min_queue_bytes": MIN_QUEUE_BYTES,
            "reps": self.reps,
            "duration_s": self.duration_s,
            "duration_rtts": self.duration_rtts,
            "nbytes": self.nbytes,
            "default_limits": dict(DEFAULT_LIMITS),
            "raised_limits": dict(RAISED_LIMITS),
        }


def make_plan(quick: bool, rtts_ms: tuple[float, ...] = (), tunings: tuple[str, ...] = ()) -> Plan:
    """The full matrix (128 MB runs) or the quick one; optionally a subset of delays and
    tunings (development, or re-measuring a few cells)."""
    chosen = tuple(TUNING_BY_NAME[n] for n in tunings) if tunings else TUNINGS
    return Plan(
        quick=quick,
        rate_bps=RATE_BPS,
        rtts_ms=rtts_ms or (QUICK_RTTS_MS if quick else RTTS_MS),
        streams=QUICK_STREAMS if quick else STREAMS,
        tunings=chosen,
        reps=REPS,
        duration_s=QUICK_BASE_S if quick else None,
        nbytes=None if quick else PAPER_BYTES,
        duration_rtts=QUICK_RTTS if quick else 0.0,
    )


def queue_bytes(rate_bps: float, rtt_ms: float) -> int:
    return max(round(rate_bps / 8 * rtt_ms / 1e3), MIN_QUEUE_BYTES)


def goodput_cap_mbps(rate_bps: float) -> float:
    return rate_bps * GOODPUT_SHARE / 1e6


def window_reference_mbps(rtt_ms: float, streams: int, rate_bps: float) -> float:
    """What untuned streams can carry: window/RTT each, up to the bottleneck's goodput."""
    per_stream = UNTUNED_WINDOW_BYTES * 8 / (rtt_ms / 1e3) / 1e6
    return min(streams * per_stream, goodput_cap_mbps(rate_bps))


def expected_run_s(plan: Plan, cell: Cell) -> float:
    """Transfer time of one run (budget only): the duration, or the bytes at the rate the
    tuning should reach (window/RTT untuned, 80 % of the bottleneck otherwise)."""
    run = plan.run_seconds(cell.rtt_ms)
    if run is not None:
        return run
    assert plan.nbytes is not None  # a Plan has a duration or a byte count
    if TUNING_BY_NAME[cell.tuning].mode == "untuned":
        mbps = window_reference_mbps(cell.rtt_ms, cell.streams, plan.rate_bps)
    else:
        mbps = 0.8 * goodput_cap_mbps(plan.rate_bps)
    return plan.nbytes * 8 / (mbps * 1e6)


def estimate_s(plan: Plan, runs_left: dict[str, int], iperf3_left: set[str]) -> float:
    """Seconds for the runs still to do: runs_left maps cell key -> repetitions missing;
    iperf3_left holds the keys of cells still without their iperf3 run."""
    total = 0.0
    for group in plan.groups():
        cells = group.cells()
        calls = max((runs_left.get(c.key, 0) for c in cells), default=0)
        total += calls * CALL_OVERHEAD_S
        for c in cells:
            run = expected_run_s(plan, c)
            extra = MODE_OVERHEAD_S + c.rtt_ms / 1e3 * (MODE_RTTS + STREAM_RTTS * c.streams)
            total += runs_left.get(c.key, 0) * (run + extra)
            if c.key in iperf3_left:
                total += (plan.iperf3_seconds(c.rtt_ms) or run) + IPERF3_OVERHEAD_S
    return total
