"""The evidence one verdict is drawn from, seen per direction of the test, and the
candidate limits the rules name. Rules (advice/rules/, one module per limiting factor) read
these types only; they never know which command or far end filled them."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace

from tcpwizard.advice.model import LimitingFactor
from tcpwizard.advice.window_law import WINDOW_FILLED, scaling_enabled, window_limit_mbps
from tcpwizard.checks.model import Fix, HostAudit, HostRole
from tcpwizard.measure.engine.rates import (
    MIN_STEADY_RATES,
    mode_steady_mbps,
    path_rtt_s,
    settled_from_s,
)
from tcpwizard.measure.model import CapacityEstimate, ModeResult, PathEstimate, TransferResult
from tcpwizard.measure.observe.handshake import HandshakeFacts
from tcpwizard.measure.probes.dispersion import AGREE
from tcpwizard.measure.probes.syntrace_model import SynTrace

# The share of the capacity a transfer the hosts do not hold back reaches: TCP/IP headers
# cost ~3.5 % at MTU 1500, a settled rate's sampling spread about as much again.
HEALTHY_SHARE = 0.85
# The available bandwidth at most this share of the capacity: others take more than 30 %
# of it, the path is shared.
CROSS_FREE_SHARE = 0.7


@dataclass(frozen=True)
class Evidence:
    local: HostAudit
    peer: HostAudit | None = None
    path: PathEstimate | None = None
    transfer: TransferResult | None = None
    # Fixes computed for the measured BDP, per host (the audits re-judged at that BDP).
    local_fixes: tuple[Fix, ...] = ()
    peer_fixes: tuple[Fix, ...] = ()
    # What the far end agreed to in the TCP handshake (no cooperation needed from it).
    peer_handshake: HandshakeFacts | None = None
    # `check --hops`: the SYN's options as each router quoted them (measure/probes/syntrace.py),
    # which names the hop of a device that rewrites the handshake.
    syn_hops: SynTrace | None = None
    # The far end's own process did not get to run: it took requests and answered none in
    # time after answering before (measure/farends/interface.py FarEnd.silent), in words.
    peer_silent: str | None = None

    @property
    def measured(self) -> bool:
        """At least one test transfer moved data: the verdict is not a prediction."""
        return self.transfer is not None and any(
            m.error is None and m.bytes > 0 for m in self.transfer.modes
        )

    @property
    def windows_unscaled(self) -> bool:
        """No window of a connection between the two hosts exceeds 64 KB: the handshake
        carried no window scaling (off at an end, or stripped on the way), or an audit says
        it is off. A window the kernel's chronograph may miss (it stops counting receive-
        window-limited time whenever TSQ or pacing ends a send round first)."""
        if self.peer_handshake is not None and not self.peer_handshake.window_scaling:
            return True
        return any(a is not None and scaling_enabled(a) is False for a in (self.local, self.peer))


@dataclass(frozen=True)
class Candidate:
    direction: str
    factor: LimitingFactor
    confidence: float
    host: HostRole | None
    explanation: str
    evidence: tuple[str, ...]
    # A measured healthy direction rules out every limit in that direction.
    decisive: bool = False
    # Congestion that the loss bound explains: parallel streams (N, each stream's bound).
    streams: tuple[int, float] | None = None
    # Fixes the rule itself computed (a cause outside the hosts' audited settings).
    fixes: tuple[Fix, ...] = ()


@dataclass(frozen=True)
class Direction:
    """One direction of the test, seen as sender -> receiver."""

    name: str
    sender: HostAudit | None
    receiver: HostAudit | None
    sender_role: HostRole
    receiver_role: HostRole
    current: ModeResult | None  # what an ordinary application gets (kernel autotuning)
    best: ModeResult | None  # the best tuned mode measured


def other_mode(d: Direction) -> ModeResult | None:
    """The best tuned mode of this direction when it is another transfer than the current
    one and measured: the check's second witness of what the path let through."""
    m = d.best
    return m if m is not None and m is not d.current and m.error is None else None


def sender_cc(d: Direction) -> str:
    m = d.current
    return (m.congestion_control if m else "") or (d.sender.congestion_control if d.sender else "")


def pick_current(modes: Sequence[ModeResult]) -> ModeResult | None:
    for name in ("autotune", "untuned", "static", "drs", "overprovisioned"):
        for m in modes:
            if m.mode == name and m.error is None:
                return m
    return None


def directions(ev: Evidence) -> list[Direction]:
    # Failed modes measured nothing: with none left it is as if no transfer ran.
    modes = [m for m in (ev.transfer.modes if ev.transfer else ()) if m.error is None]
    out: list[Direction] = []
    for name in ("up", "down"):
        ms = [m for m in modes if m.direction == name]
        if not ms and (modes or name == "down"):
            continue
        up = name == "up"
        out.append(
            Direction(
                name,
                ev.local if up else ev.peer,
                ev.peer if up else ev.local,
                "local" if up else "peer",
                "peer" if up else "local",
                pick_current(ms),
                max(ms, key=lambda m: m.throughput_mbps, default=None),
            )
        )
    return out


def probe_capacity(ev: Evidence, d: Direction) -> CapacityEstimate | None:
    if ev.path and d.name == "down" and ev.path.capacity_down:
        # Asymmetric paths: the way back has its own.
        return corroborated(ev.path.capacity_down, ev.path.capacity)
    if ev.path and ev.path.capacity:
        return ev.path.capacity
    return None


def corroborated(down: CapacityEstimate, up: CapacityEstimate | None) -> CapacityEstimate:
    """The way back's estimate, confirmed where the way out's agrees with it. The way back
    has a train and no pairs (0.6 where pairs and a train that agree have 0.9,
    measure/probes/dispersion.py); an estimate of the way out from other packets, timed at
    the other host, that agrees within AGREE (the pairs' and train's own agreement) is the
    same confirmation: the down train gets the up estimate's confidence. Not where either
    flagged a limit of its own (a sender, coalescing, a shaper), nor past the up's."""
    if (
        up is None
        or down.confidence >= up.confidence
        or down.limited_by is not None
        or up.limited_by is not None
        or abs(down.mbps - up.mbps) > AGREE * up.mbps
    ):
        return down
    note = f"{down.note}; " if down.note else ""
    return replace(
        down,
        confidence=up.confidence,
        note=f"{note}agrees with the way out's {up.mbps:.1f} Mbit/s ({up.method})",
    )


def rtt_ms(ev: Evidence, d: Direction) -> float | None:
    if ev.path:
        return ev.path.rtt.min
    m = d.current
    if m and m.samples:
        rtts = [s.tcp_info.rtt_us for s in m.samples if s.tcp_info and s.tcp_info.rtt_us > 0]
        if rtts:
            return min(rtts) / 1e3
    return None


def mss(d: Direction) -> int:
    m = d.current
    if m:
        for s in m.samples:
            if s.tcp_info and s.tcp_info.snd_mss > 0:
                return s.tcp_info.snd_mss
    return 1448


def audit_of(ev: Evidence, role: HostRole) -> HostAudit | None:
    return ev.local if role == "local" else ev.peer if role == "peer" else None


# Of the transfer's time (TCP_INFO chrono counters): how long a window must hold the sender
# to be its limit. Measured on the 1,200 stored matrix reports (2,395 judged directions,
# docs/bench-matrix-two-seeds.md): a direction whose receive window was the cause read 0.2 or
# more in 95 %, one that no window held (healthy, loss, policer, cross traffic) below 0.2 in
# 97 %; 0.15 missed none of the first but passed 5.4 % of the second, 0.25 missed 8.6 %. A
# paced BBR sender meets a window only while probing (16-29 %): the window law speaks there.
CHRONO_SHARE = 0.2
# A sender with data in flight less than this share of the time was idle more than it sent:
# what it was given to send, not TCP, set its rate (a path at full rate the other half cannot
# make up the idle half). One figure for the check's transfers and `conns`.
BUSY_SHARE = 0.5


def chrono(m: ModeResult | None) -> tuple[float | None, float | None, float | None]:
    if m is None:
        return None, None, None
    return m.rwnd_limited, m.sndbuf_limited, m.busy


def window_held(m: ModeResult | None) -> bool:
    """The receive window or the send buffer held the sender long enough to be its limit;
    then the rules that look past the windows have nothing to say."""
    rwnd, sndbuf, _ = chrono(m)
    return (rwnd or 0.0) >= CHRONO_SHARE or (sndbuf or 0.0) >= CHRONO_SHARE


def settled_rwnd_limited(m: ModeResult) -> float | None:
    """The share of the settled part's busy time the sender waited for the receive window
    (TCP_INFO's cumulative counters at the samples), the part the steady rate is read
    from (rates.settled_start); the whole transfer's share when the samples carry no
    counters. A window that held only the ramp (autotuning still growing it behind slow
    start) says nothing of the settled rate."""
    infos = [s.tcp_info for s in m.samples if s.tcp_info is not None]
    if len(infos) < 4:
        return m.rwnd_limited
    mid, last = infos[len(infos) // 2], infos[-1]
    settled = settled_from_s(m.samples)
    if settled is not None:
        mid = next(
            (s.tcp_info for s in m.samples if s.tcp_info is not None and s.t_s >= settled), mid
        )
    busy = last.busy_time_us - mid.busy_time_us
    if busy <= 0:
        return m.rwnd_limited
    return max(0.0, min(1.0, (last.rwnd_limited_us - mid.rwnd_limited_us) / busy))


def offered_window_fill(m: ModeResult) -> float | None:
    """How much of the window the receiver offered the sender delivered per idle round trip
    over the settled part: the settled goodput over the window law's rate for the median
    window offered (TCP_INFO snd_wnd) and the path's round trip (the transfer's least
    smoothed RTT). At WINDOW_FILLED or more the offered window held the sender whatever
    the chrono counter says: a paced sender (BBR) measures the window-bound delivery rate
    as the path's and paces at it, so it rarely waits on the window it is held by (lab, 80
    Mbit/s x 60 ms: 0.99-1.0 through the far end's 256 KB tcp_rmem, the untuned 64 KB
    window 0.88; a healthy upload 0.06-0.08, autotuning offering about twice what arrives
    per round trip). None without the window (older kernels, far ends that report none)."""
    settled = settled_from_s(m.samples)
    if settled is None:
        return None
    infos = [
        s.tcp_info
        for s in m.samples
        if s.tcp_info is not None and s.t_s >= settled and s.tcp_info.snd_wnd > 0
    ]
    if len(infos) < MIN_STEADY_RATES:  # as few as the settled rate itself needs
        return None
    window = statistics.median(i.snd_wnd for i in infos)
    rtt_s, rate = path_rtt_s(m.samples), mode_steady_mbps(m)
    if rate is None or not rtt_s or window <= 0:
        return None
    return rate / window_limit_mbps(window, rtt_s * 1e3)


def offered_window_full(m: ModeResult) -> bool:
    """The window the receiver offered held the sender (offered_window_fill at least
    WINDOW_FILLED, the one figure of the check's receiver view, `conns` and captures)."""
    fill = offered_window_fill(m)
    return fill is not None and fill >= WINDOW_FILLED


def shared_measured(ev: Evidence, d: Direction) -> bool:
    """Others' traffic shares this direction's bottleneck, measured: the available bandwidth
    that way at most CROSS_FREE_SHARE of the capacity before the transfer."""
    av = ev.path.available_for(d.name) if ev.path else None
    return av is not None and bool(av.loaded) and av.free_share <= CROSS_FREE_SHARE
