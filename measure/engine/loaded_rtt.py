"""Latency under load: the round-trip time a transfer caused, against the idle RTT.

Which RTT samples: the sender's smoothed RTT (TCP_INFO tcpi_rtt) read at every sampling
interval of the second half of the transfer — once the connection is up to speed, so slow
start's overshoot is left out, and the queue the transfer keeps standing is what is seen.
The sender's own RTT is the one the IETF draft "Responsiveness under Working Conditions"
(draft-ietf-ippm-responsiveness) calls a "self" probe: the round trip on the load-generating
connection itself. Responsiveness in round trips per minute is, as the draft defines it,
RPM = 60 / (RTT under load in seconds); we compute it from the median of those samples (the
draft trims outliers; the median is that trimming's limit).

The idle RTT is the path probe's minimum RTT before the transfer, or (no probe: a live
connection, a capture) the smallest RTT sample the connection itself saw.

Also here: the rate plateau a transfer held once up to speed (from delivered bytes), and
how its retransmissions were spread over time — what tells a policer from random loss.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from tcpwizard.measure.engine import rates
from tcpwizard.measure.engine.rates import ip_rate
from tcpwizard.measure.model import ModeResult

MIN_SAMPLES = 3  # fewer RTT samples say nothing about a distribution


@dataclass(frozen=True)
class LoadedRtt:
    """Milliseconds. median/p90 of the sender's smoothed RTT under load; rpm from median."""

    idle_ms: float
    median_ms: float
    p90_ms: float
    samples: int
    source: str  # "tcp_info srtt, second half"

    @property
    def rpm(self) -> float:
        return 60_000.0 / self.median_ms if self.median_ms > 0 else 0.0

    @property
    def queue_ms(self) -> float:
        """The standing queue the transfer kept (median RTT above idle)."""
        return max(0.0, self.median_ms - self.idle_ms)

    @property
    def queue_bdps(self) -> float:
        """That queue in bandwidth-delay products: a queue of Q bytes at capacity C delays
        by Q / C, and one BDP (C x idle RTT) delays by the idle RTT, so the ratio of delays
        is the ratio of bytes whatever the rate."""
        return self.queue_ms / self.idle_ms if self.idle_ms > 0 else 0.0


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..1) of a non-empty sequence."""
    ordered = sorted(values)
    rank = min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))
    return ordered[rank]


def srtts_ms(m: ModeResult) -> list[float]:
    """The sender's smoothed RTT of every sample that carries one (TCP_INFO), in ms."""
    return [s.tcp_info.rtt_us / 1e3 for s in m.samples if s.tcp_info and s.tcp_info.rtt_us > 0]


def loaded_rtt(m: ModeResult, idle_ms: float | None = None) -> LoadedRtt | None:
    """The RTT under load of one transfer, or None without enough TCP_INFO samples (a far
    end that reports none, a transfer too short)."""
    rtts = srtts_ms(m)
    if m.error is not None or len(rtts) < 2 * MIN_SAMPLES:
        return None
    loaded = rtts[len(rtts) // 2 :]
    idle = idle_ms if idle_ms is not None and idle_ms > 0 else min(rtts)
    return LoadedRtt(
        idle_ms=idle,
        median_ms=percentile(loaded, 0.5),
        p90_ms=percentile(loaded, 0.9),
        samples=len(loaded),
        source="sender's TCP_INFO smoothed RTT, second half of the transfer",
    )


# The RTT under load of a flow that keeps no queue stands up to this far above the idle
# minimum on a short path: the sender's smoothed RTT carries the ACK clock's and the delay
# line's scheduling. Measured over the scenario matrix's saved reports (docs/bench-matrix.md,
# runs 9-13): in every transfer held by a window, a send buffer or random loss at an idle
# RTT under 6 ms, the median RTT under load stood 0.06-0.41 ms above the idle minimum; with
# TCP flows of others beside it, 0.59-3.9 ms.
QUEUE_FREE_NOISE_MS = 0.5


def flow_rtt_ms(m: ModeResult, idle_ms: float) -> float:
    """The RTT the flow itself ran at, for the loss bound (Mathis et al.: rate = MSS x C /
    (RTT x sqrt(p)), RTT the flow's average): the median RTT under load where a queue stood,
    never less than the idle RTT. With the idle RTT a Reno sawtooth through a deep buffer
    (100 ms under load, 21 ms idle, 5 Mbit/s) sat "at its bound" and read as held by loss."""
    lr = loaded_rtt(m, idle_ms)
    return max(idle_ms, lr.median_ms) if lr is not None else idle_ms


def mss_of(m: ModeResult) -> int:
    return next((s.tcp_info.snd_mss for s in m.samples if s.tcp_info and s.tcp_info.snd_mss), 1448)


def plateau_mbps(m: ModeResult) -> float | None:
    """The rate the transfer held once up to speed, at the IP layer (what a policer or a
    shaper counts): the bytes delivered over the second half, over its time
    (measure/engine/rates.py steady_mbps), headers added back. Not a median of window rates: on
    a 2-core machine under load, lumps at the windows' edges lifted that median to 104-108
    Mbit/s on a 100 Mbit/s lab line. Bytes over seconds pass the line only by the share of
    the half a count was read late or early, and are held to it where it is known
    (rates.mode_steady_mbps)."""
    steady = rates.mode_steady_mbps(m)
    if steady is None:
        return None
    return ip_rate(steady, mss_of(m))


def plateau_spread(m: ModeResult) -> float | None:
    """How flat the plateau is: the interquartile range of the second half's goodput over
    its median (0: perfectly flat)."""
    rates = [s.goodput_mbps for s in m.samples[len(m.samples) // 2 :]]
    if len(rates) < 2 * MIN_SAMPLES:
        return None
    mid = percentile(rates, 0.5)
    if mid <= 0:
        return None
    return (percentile(rates, 0.75) - percentile(rates, 0.25)) / mid


@dataclass(frozen=True)
class LossPattern:
    """Retransmissions over the sampling intervals: how many intervals saw any, and what
    share of all retransmissions the busiest fifth of the intervals holds."""

    retransmits: int
    intervals: int
    lossy_intervals: int
    top_share: float

    @property
    def bursty(self) -> bool:
        # Random loss at rate p hits an interval carrying n segments with probability
        # 1 - (1 - p)^n (at 1 % and 20 Mbit/s, 430 segments per 0.25 s: 99 %), so nearly
        # every interval is lossy and the busiest fifth holds about a fifth of the losses. A
        # token bucket drops everything above the rate once it is empty and nothing while
        # it refills: the losses sit in the few intervals where it ran dry. Either sign,
        # at the midpoint between the two (most losses in a fifth of the intervals, or
        # losses in at most half of them), makes the losses bursts.
        if self.retransmits <= 0 or self.intervals <= 0:
            return False
        few = self.lossy_intervals <= BURSTY_LOSSY_SHARE * self.intervals
        return self.top_share >= BURSTY_TOP_SHARE or few


BURSTY_TOP_SHARE = 0.6
BURSTY_LOSSY_SHARE = 0.5


def loss_pattern(m: ModeResult) -> LossPattern | None:
    counts = [s.tcp_info.total_retrans for s in m.samples if s.tcp_info is not None]
    if len(counts) < 2 * MIN_SAMPLES:
        return None
    deltas = [max(0, b - a) for a, b in zip([0, *counts[:-1]], counts, strict=True)]
    total = sum(deltas)
    top = sorted(deltas, reverse=True)[: max(1, len(deltas) // 5)]
    return LossPattern(
        retransmits=total,
        intervals=len(deltas),
        lossy_intervals=sum(1 for d in deltas if d > 0),
        top_share=sum(top) / total if total else 0.0,
    )


def peak_mbps(series: Sequence[tuple[float, int]], window_s: float = 0.25) -> float:
    """The highest rate a cumulative byte series (time, bytes) held over any `window_s`
    (0: too short to tell) — a captured flow's line-rate burst while a policer's bucket
    was full."""
    best = 0.0
    j = 0
    for i, (t, b) in enumerate(series):
        while j < i and t - series[j + 1][0] >= window_s:
            j += 1
        if j < i and t - series[j][0] >= window_s:
            best = max(best, (b - series[j][1]) * 8 / (t - series[j][0]) / 1e6)
    return best


def window_segments(m: ModeResult) -> int | None:
    """The congestion window over the second half (median, segments; TCP_INFO)."""
    cwnds = sorted(s.tcp_info.snd_cwnd for s in m.samples[len(m.samples) // 2 :] if s.tcp_info)
    return cwnds[len(cwnds) // 2] if cwnds else None


# Linux's delayed-ACK timer at its floor (TCP_ATO_MIN, 40 ms; RFC 1122 allows up to 500):
# a segment with no second one behind it waits that long for its ACK.
DELACK_MS = 40.0
# The samples' mean deviation against their mean excess over idle, at and above which the
# excess came now and then rather than standing: samples raised by D in a share f of them
# deviate 2f(1-f)D on average against a mean excess of fD, a ratio of 2(1-f): 1 or more
# when at most every second round waits on a delayed ACK, near 0 for a queue that stands.
# Half is f = 3/4. (Reno at 5 % random loss with 4-5 segments a window, 9 Mbit/s x 29 ms:
# 0.80-1.11, read `cross-traffic`; queues others kept in the scenario matrix: 0.00-0.44.)
NOW_AND_THEN = 0.5


def delayed_ack_ms(m: ModeResult, window: int | None, excess_ms: float) -> float:
    """What the receiver's delayed ACKs add to a small window's mean RTT (TCP_INFO's
    smoothed RTT): with W segments a round and an ACK per two, an odd one waits DELACK_MS
    for its ACK, one sample in about W/2: up to DELACK_MS / (W + 1) on the mean. Counted
    only when the samples' mean deviation says the excess came now and then (NOW_AND_THEN);
    a queue others keep raises every sample alike."""
    if window is None or window <= 0 or excess_ms <= 0:
        return 0.0
    half = [s.tcp_info.rttvar_us / 1e3 for s in m.samples[len(m.samples) // 2 :] if s.tcp_info]
    if not half or sorted(half)[len(half) // 2] < NOW_AND_THEN * excess_ms:
        return 0.0
    return DELACK_MS / (window + 1)
