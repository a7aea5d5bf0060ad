"""One direction of one transfer as a view sees it, in the terms of the verdict ladder
(advice/ladder.py): a live connection's TCP_INFO over an interval (`conns`) or one direction
of a captured flow (`check --pcap`). Each adapter holds its view's own tests and thresholds;
the ladder reads only the Observation, so both views are judged by one set of steps.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

from tcpwizard.advice.application import reader_falling_behind
from tcpwizard.advice.evidence import BUSY_SHARE, CHRONO_SHARE, HEALTHY_SHARE
from tcpwizard.advice.rules.policer import no_queue_ms
from tcpwizard.advice.window_law import (
    LOSS_BASED,
    LOSS_BOUND_MARGIN,
    QUEUE_RTT,
    WINDOW_FILLED,
    WINDOW_FULL_ROUNDS,
    held_by_loss,
    mathis_mbps,
    window_limit_mbps,
)
from tcpwizard.checks.model import HostRole
from tcpwizard.measure.observe.capture import FlowDirection, SynOptions
from tcpwizard.measure.observe.conns import ConnObservation

# How the receiving application was seen not reading: the window it offered closed to zero,
# closed far below what it had offered, unread data piling up in its queue (its own host), its
# ACKs held back until the reader made room, or data acknowledged with its right edge still.
ReaderSign = Literal["zero-window", "window-closing", "unread-queue", "acks-held", "edge-still"]
# Losses that went on with no queue standing: with the rate at a loss-based sender's Mathis
# bound, above it, or only as segments out of order at the receiver (the sender unseen).
LossSign = Literal["at-bound", "above-bound", "upstream"]
# A queue at the bottleneck: the RTT under load stood above its minimum, or did at times.
QueueSign = Literal["standing", "at-times", "none"]
# Where the view stands: in the sending host's kernel, the receiving host's, or on the wire.
Vantage = Literal["sender", "receiver", "wire"]

# --- conns (TCP_INFO)
# A paced sender (BBR) meets the peer's window only in its probing phases: 16-29 % of the
# time on a 100 Mbit/s x 50 ms path whose far end's tcp_rmem holds it to 25 Mbit/s. Its
# rate x RTT filling the whole window, with some stalls on it, says the same. "Filling":
# the healthy share of the window law (advice/evidence.py HEALTHY_SHARE: the largest window
# sampled is compared, the rate is its average); "some": under half of the one round in
# eight in which BBR probes (its gain cycle), so a window met in most probing rounds counts.
WINDOW_FULL = HEALTHY_SHARE
SOME_STALLS = 0.05
WSCALE_KEY = "net.ipv4.tcp_window_scaling"
SACK_KEY = "net.ipv4.tcp_sack"

# --- captures
# Of the transfer's time with a zero window: the reader is the limit. A zero window stops
# the sender outright, so stops for a share z hold the rate to (1 - z) of what the path gave
# the rest of the time: past 1 - HEALTHY_SHARE they alone keep it under the healthy share,
# the same margin every window rule allows (the lab's stalled reader: zero windows for most
# of its transfer; a healthy one: none).
ZERO_SHARE = 1 - HEALTHY_SHARE
# Of the time with nothing in flight and the window open: the application, not TCP, set the
# rate. The wire's twin of evidence.BUSY_SHARE (data in flight less than half the time): one
# figure for the kernel's view and the wire's (iperf3 captures: idle shares near 0).
IDLE_SHARE = 1 - BUSY_SHARE
# Loss episodes in the second half that make losses ongoing: one may still be the ramp's
# overshoot on a long path (advice/loss_episodes.py), a second is not.
LATE_EPISODES = 2
# Of the bytes acknowledged, the share acknowledged while the receiver's right edge stood
# still. A reader that keeps up frees what arrives before the next ACK leaves, so the edge
# moves with nearly every ACK (healthy 100 Mbit/s x 50 ms lab captures, taken at the sender
# and at the receiver: 0.00); a reader that runs now and then leaves the edge still between
# its reads (all of it in between). Half is the midpoint of the two: most of the data then
# waited for the reader. Measured across the reader bench (benchmarks/bench_application.py,
# docs/bench-application.md, 2026-11-28: 20 captures at 200 Mbit/s x 150 and 250 ms): 0.00 in
# every one, readers under a quota included; those the held ACKs below name. This sign is
# for a reader whose kernel ACKs promptly yet frees nothing, which that bench does not make.
STILL_SHARE = 0.5
# Of the bytes acknowledged, the share under ACKs the receiver held back
# (measure/observe/capture.py HELD_SPAN_S): healthy lab captures 0.00, a reader under a CPU quota
# 0.88-0.94; half is the midpoint, most of the data then waited for the reader. The reader
# bench again (2026-11-28, 200 Mbit/s x 150 and 250 ms): healthy iperf3 0.00 (6 captures),
# scp 0.00 (4), readers under a quota 0.80-0.93 (10).
HELD_SHARE = 0.5


@dataclass(frozen=True)
class Observation:
    """One direction of one transfer. None: this view cannot see it."""

    vantage: Vantage
    sender: HostRole  # the host that sends the data
    receiver: HostRole  # the host that receives it
    rate_mbps: float  # the settled rate: the current side of the verdict's gap
    rtt_min_ms: float | None  # the path's RTT with no queue
    rtt_loaded_ms: float | None  # the RTT while the data moved
    window_max: int  # the largest window the receiver offered (0: none seen)
    window_min: int  # the smallest (the median send's, for a capture)
    window_mbps: float  # the window law's rate for the offered window at the RTT (0: unknown)
    scaling_agreed: bool | None  # both SYNs carried the window scale option
    scaling_missing: HostRole | None  # the host(s) to blame where scaling was not agreed
    sack_agreed: bool | None  # both SYNs offered SACK
    sack_missing: HostRole | None  # the host(s) to blame where SACK was not agreed
    reader_stall: ReaderSign | None  # the receiving application stopped reading, as seen
    reader_behind: bool | None  # the reader falls behind, its window not yet closed
    window_held: bool  # the offered window held the sender long enough to be its limit
    window_filled: bool | None  # the rate filled the offered window every round trip
    sndbuf_held: bool | None  # the sender's send buffer held it long enough to be its limit
    sender_idle: bool | None  # the sender had nothing to send much of the time
    retransmits: int  # segments sent again
    loss: float  # the share of the data retransmitted
    loss_bound_mbps: float | None  # the Mathis bound at that loss (None: no loss or RTT)
    losses: LossSign | None  # losses that hold the sender with no queue standing
    queue: QueueSign | None  # a queue at the bottleneck
    congestion_control: str | None  # the sender's algorithm
    rcvbuf: int | None  # the receive buffer's size, where seen
    sndbuf: int | None  # the send buffer's size, where seen


def from_conn(obs: ConnObservation, sysctls: Mapping[str, str] | None = None) -> Observation:
    """A live connection: this host sends (the chrono counters say what stalled it) or
    receives (its queue and the window it offers say what it did)."""
    if obs.sending:
        return _conn_sender(obs, sysctls)
    rate = obs.recv_mbps
    rtt = obs.rcv_rtt_ms or obs.min_rtt_ms or obs.rtt_ms
    window_mbps = window_limit_mbps(obs.rcv_wnd_max, rtt) if rtt > 0 else 0.0
    piled = bool(obs.rcvbuf) and obs.rqueue_max >= 0.25 * (obs.rcvbuf or 0)
    closed = obs.rqueue_max > 0 and obs.rcv_wnd_min < 0.1 * obs.rcv_wnd_max
    filled = window_mbps > 0 and rate >= WINDOW_FILLED * window_mbps
    return Observation(
        vantage="receiver",
        sender="peer",
        receiver="local",
        rate_mbps=rate,
        rtt_min_ms=obs.min_rtt_ms,
        rtt_loaded_ms=rtt,
        window_max=obs.rcv_wnd_max,
        window_min=obs.rcv_wnd_min,
        window_mbps=window_mbps,
        scaling_agreed=obs.window_scaling,
        scaling_missing=_scaling_missing(obs.window_scaling, sysctls),
        sack_agreed=obs.sack,
        sack_missing=_sack_missing(obs.sack, sysctls),
        reader_stall="unread-queue" if piled or closed else None,
        reader_behind=None,
        window_held=filled,
        window_filled=filled,
        sndbuf_held=None,
        sender_idle=None,
        retransmits=0,
        loss=0.0,
        loss_bound_mbps=None,
        losses="upstream" if obs.ooo_packets else None,
        queue=None,
        congestion_control=None,
        rcvbuf=obs.rcvbuf,
        sndbuf=None,
    )


def _conn_sender(obs: ConnObservation, sysctls: Mapping[str, str] | None) -> Observation:
    rate, rtt = obs.send_mbps, obs.rtt_ms or obs.min_rtt_ms or obs.rcv_rtt_ms
    window_mbps = window_limit_mbps(obs.snd_wnd_max, rtt) if rtt > 0 else 0.0
    busy = max(obs.busy, 1e-9)
    stalled = obs.rwnd_limited / busy
    full = window_mbps > 0 and rate >= WINDOW_FULL * window_mbps and stalled >= SOME_STALLS
    held = (stalled >= CHRONO_SHARE or full) and not _window_to_spare(obs, rate)
    unused = window_mbps > 0 and rate < 0.5 * window_mbps
    closing = obs.snd_wnd_min < 0.5 * obs.snd_wnd_max
    stall: ReaderSign | None = None
    if held and obs.zero_window:
        stall = "zero-window"
    elif held and unused and closing:
        stall = "window-closing"
    idle = obs.busy < BUSY_SHARE
    loss = obs.retransmits / obs.segs_out if obs.segs_out else 0.0
    bound = mathis_mbps(obs.snd_mss or 1448, rtt, loss, obs.congestion_control) if rtt > 0 else None
    # Losses that came with a queue standing at the bottleneck are its overflow (this flow's
    # own sawtooth or others' traffic), not loss that holds the window below the path: the
    # capture judge's test, with its cut-off (window_law.QUEUE_RTT). A mostly idle sender's
    # losses did not hold it: what it was given to send did.
    queued = obs.min_rtt_ms > 0 and obs.rtt_ms >= QUEUE_RTT * obs.min_rtt_ms
    at_bound = (
        loss > 0
        and bound is not None
        and obs.congestion_control.lower() in LOSS_BASED
        and held_by_loss(rate, obs.snd_mss or 1448, rtt, loss, obs.congestion_control.lower())
        and not queued
        and not idle
    )
    return Observation(
        vantage="sender",
        sender="local",
        receiver="peer",
        rate_mbps=rate,
        rtt_min_ms=obs.min_rtt_ms,
        rtt_loaded_ms=rtt,
        window_max=obs.snd_wnd_max,
        window_min=obs.snd_wnd_min,
        window_mbps=window_mbps,
        scaling_agreed=obs.window_scaling,
        scaling_missing=_scaling_missing(obs.window_scaling, sysctls),
        sack_agreed=obs.sack,
        sack_missing=_sack_missing(obs.sack, sysctls),
        reader_stall=stall,
        reader_behind=reader_falling_behind(obs) is not None,
        window_held=held,
        window_filled=window_mbps > 0 and rate >= WINDOW_FILLED * window_mbps,
        sndbuf_held=obs.sndbuf_limited / busy >= CHRONO_SHARE,
        sender_idle=idle,
        retransmits=obs.retransmits,
        loss=loss,
        loss_bound_mbps=bound,
        losses="at-bound" if at_bound else None,
        # srtt at the last sample is one reading, not the interval's: only the losses' test
        # above uses it.
        queue=None,
        congestion_control=obs.congestion_control,
        rcvbuf=obs.rcvbuf,
        sndbuf=obs.sndbuf,
    )


def _window_to_spare(obs: ConnObservation, rate_mbps: float) -> bool:
    """The smallest window the peer offered carried, at the path's idle RTT, more than the
    rate with the healthy margin to spare (the window law, advice/evidence.py HEALTHY_SHARE):
    the sender met that window only while a queue or a loss recovery stretched its round
    trip, and a larger one would not have raised the rate. (A healthy iperf3 upload at 200
    Mbit/s x 250 ms met a 20 MB window, 3.4 x the BDP, in its recovery: `receiver-window`
    at the peer in 2 of 2 runs, docs/bench-application.md.)"""
    if obs.min_rtt_ms <= 0 or obs.snd_wnd_min <= 0:
        return False
    return HEALTHY_SHARE * window_limit_mbps(obs.snd_wnd_min, obs.min_rtt_ms) > rate_mbps


def _scaling_missing(agreed: bool, sysctls: Mapping[str, str] | None) -> HostRole | None:
    """Who to fix where the handshake agreed no window scaling: with this host's own setting
    on, only the far end (or a device on the path) can be at fault; else both may be."""
    if agreed:
        return None
    return "peer" if (sysctls or {}).get(WSCALE_KEY, "0") != "0" else "both"


def _sack_missing(agreed: bool, sysctls: Mapping[str, str] | None) -> HostRole | None:
    """Who to fix where the handshake agreed no SACK: this host where its own setting is
    off (SACK needs only one end to refuse, and check names this host alone then too), the
    far end (or a device) where it is on, both where this host's setting is unread."""
    if agreed:
        return None
    own = (sysctls or {}).get(SACK_KEY)
    if own is None:
        return "both"
    return "local" if own.strip() == "0" else "peer"


def from_capture(d: FlowDirection, is_local: Callable[[str], bool]) -> Observation:
    """One captured direction, seen on the wire: the windows and ACKs the receiver sent,
    the gaps and losses of the sender, the RTT from data to its ACK."""
    snd: HostRole = "local" if is_local(d.sender) else "peer"
    rcv: HostRole = "local" if is_local(d.receiver) else "peer"
    rtt = d.rtt_min_ms or 0.0
    span = max(d.seconds, 1e-9)
    full = d.window_full_share >= WINDOW_FULL_ROUNDS
    stall: ReaderSign | None = None
    if d.zero_windows and d.zero_window_s / span >= ZERO_SHARE:
        stall = "zero-window"
    elif d.held_ack_share >= HELD_SHARE:
        stall = "acks-held"
    elif full and d.edge_still_share >= STILL_SHARE:
        stall = "edge-still"
    loss = d.retransmitted_bytes / d.bytes if d.bytes else 0.0
    bound = mathis_mbps(d.mss, d.rtt_p50_ms or rtt, loss) if rtt and loss else None
    queue: QueueSign | None = None
    if d.rtt_min_ms is not None:
        queue = "none"
        if d.rtt_p50_ms is not None and d.rtt_p50_ms >= QUEUE_RTT * d.rtt_min_ms:
            queue = "standing"
        elif _queue_at_times(d):
            queue = "at-times"
    losses: LossSign | None = None
    if d.late_loss_episodes >= LATE_EPISODES and bound is not None and queue != "standing":
        if held_by_loss(d.steady_mbps, d.mss, d.rtt_p50_ms or rtt or 0.0, loss, ""):
            losses = "at-bound"
        elif d.steady_mbps > LOSS_BOUND_MARGIN * bound:
            losses = "above-bound"
    ends = (snd, d.sender_syn), (rcv, d.receiver_syn)
    missing = _syn_missing(ends, lambda syn: syn.wscale is not None) if d.scaling is False else None
    sack = _syn_agreed(ends, lambda syn: syn.sack)
    sack_missing = _syn_missing(ends, lambda syn: syn.sack) if sack is False else None
    return Observation(
        vantage="wire",
        sender=snd,
        receiver=rcv,
        rate_mbps=d.steady_mbps or d.rate_mbps,
        rtt_min_ms=d.rtt_min_ms,
        rtt_loaded_ms=d.rtt_p50_ms,
        window_max=d.max_window,
        window_min=d.window_p50,
        window_mbps=window_limit_mbps(d.window_p50, rtt) if rtt else 0.0,
        scaling_agreed=d.scaling,
        scaling_missing=missing,
        sack_agreed=sack,
        sack_missing=sack_missing,
        reader_stall=stall,
        reader_behind=None,
        window_held=full,
        window_filled=full,
        sndbuf_held=None,
        sender_idle=d.idle_share >= IDLE_SHARE,
        retransmits=d.retransmits,
        loss=loss,
        loss_bound_mbps=bound,
        losses=losses,
        queue=queue,
        congestion_control=None,
        rcvbuf=None,
        sndbuf=None,
    )


SynEnds = tuple[tuple[HostRole, SynOptions | None], tuple[HostRole, SynOptions | None]]


def _syn_agreed(ends: SynEnds, offered: Callable[[SynOptions], bool]) -> bool | None:
    """Both SYNs carried the option (None: a SYN was not captured)."""
    syns = [syn for _, syn in ends]
    if any(syn is None for syn in syns):
        return None
    return all(offered(syn) for syn in syns if syn is not None)


def _syn_missing(ends: SynEnds, offered: Callable[[SynOptions], bool]) -> HostRole | None:
    """The host that kept the option out (None: a SYN was not captured, or both carried
    it): the one whose SYN lacked it, or, when both lacked it, the one that opened the
    connection (the answer can carry only what the SYN offered: SynOptions.answer); both
    where the capture cannot tell which SYN came first."""
    lacking = [(who, syn) for who, syn in ends if syn is not None and not offered(syn)]
    if any(syn is None for _, syn in ends) or not lacking:
        return None
    if len(lacking) == 1:
        return lacking[0][0]
    opened = [who for who, syn in lacking if not syn.answer]
    return opened[0] if len(opened) == 1 else "both"


def _queue_at_times(d: FlowDirection) -> bool:
    """A queue built during the second half: the RTT's 90th percentile past the delay line's
    and timers' noise (advice/rules/policer.py no_queue_ms). A sender held by its send
    buffer keeps less than the bandwidth-delay product in flight, so no queue ever builds;
    healthy 100 Mbit/s x 50 ms lab captures show +10 ms at the p90 with the median at +2-6 %."""
    if d.rtt_min_ms is None or d.rtt_p90_ms is None:
        return False
    return d.rtt_p90_ms - d.rtt_min_ms > no_queue_ms(d.rtt_min_ms)
