"""Rates from delivered bytes, over honest intervals (docs/transfer.md, "How rates are
computed"). Pure functions over a transfer's samples; no sockets.

A rate is bytes the receiver got (or the sender saw acknowledged) between two counts, over
the time between them. The interval is never shorter than one round trip of the path, nor
than the sampling interval: TCP delivers a window per round trip, and a receiver that reads
in batches (a busy host, ACKs released together) counts bytes in lumps, so a shorter
interval splits one lump in two and reads 0.2 then 222 Mbit/s on a 150 Mbit/s path. Over a
round trip or more the lumps average out; the steady figure is the rate over the whole
settled part (the second half, or from where slow start's repair ended), which one late or
early count hardly moves.
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from tcpwizard.measure.model import ModeResult, TransferSample

# The settled part of a transfer: its second half. A 3-5 s test on a long path spends a
# noticeable share of its first half in slow start, which says nothing about the steady rate.
SETTLED_FROM = 0.5
# IPv4 20 + TCP 20 + the timestamps option 12 bytes per packet: what turns goodput (payload)
# into the IP-layer rate a probe, a shaper or a policer counts.
IP_TCP_HEADERS = 52
MIN_STEADY_RATES = 3  # samples in the settled part: fewer, and it is one or two intervals
# A rate within this factor of the best so far holds; below it, it collapsed; above it, it
# grew (BBR's full-pipe band, 25 %; measure/engine/steady.py ends a transfer on it).
RATE_BAND = 1.25
# Round trips after the first round that did not grow in which slow start's overshoot still
# collapses the rate: BBR's full-pipe test (3 rounds without growth, then the queue its
# startup built overflows) and the round that detects the losses. A first collapse later is
# the steady state's own (BBR v1 through a one-BDP queue both ways at once: 10-14 round trips
# after its pipe filled, read as the repair, left a settled part of 3 samples inside the next
# dip, `congestion` on a healthy path; at 5 Gbit/s x 50 ms the overshoot's collapse came 4).
OVERSHOOT_ROUNDS = 4


@dataclass(frozen=True)
class Count:
    """A cumulative byte count and the time it was read, seconds since the transfer began."""

    t_s: float
    bytes: int


def counts_of(samples: Sequence[TransferSample]) -> list[Count]:
    """The cumulative delivered-byte counts of a sample series, from the transfer's start
    (0, 0). Samples that carry no count (results recorded before counts were kept) are
    integrated from their per-interval rate, which came from the same bytes."""
    out = [Count(0.0, 0)]
    total = 0.0
    prev_t = 0.0
    for s in samples:
        if s.t_s <= out[-1].t_s:
            continue
        if s.delivered_bytes is not None:
            total = float(s.delivered_bytes)
        else:
            total += max(0.0, s.goodput_mbps) * 1e6 / 8 * (s.t_s - prev_t)
        prev_t = s.t_s
        out.append(Count(s.t_s, round(total)))
    return out


def sample_interval_s(counts: Sequence[Count]) -> float:
    """The median spacing of the counts (the sampler's interval), 0 with fewer than two."""
    gaps = [b.t_s - a.t_s for a, b in itertools.pairwise(counts) if b.t_s > a.t_s]
    return statistics.median(gaps) if gaps else 0.0


def path_rtt_s(samples: Sequence[TransferSample]) -> float | None:
    """The path's round trip as the sender's TCP_INFO saw it: the smallest smoothed RTT of
    the transfer (the queue it built inflates the later ones)."""
    rtts = [s.tcp_info.rtt_us for s in samples if s.tcp_info is not None and s.tcp_info.rtt_us]
    return min(rtts) / 1e6 if rtts else None


def window_s(rtt_s: float | None, interval_s: float) -> float:
    """The shortest interval a rate is taken over: a round trip, or the sampling interval
    when that is longer (counts come no faster)."""
    return max(rtt_s or 0.0, interval_s)


def window_rates(counts: Sequence[Count], window: float) -> list[tuple[float, float]]:
    """(end time, Mbit/s) at each count after the first: the bytes delivered since the latest
    earlier count at least `window` before it, over the time between the two. Counts too
    close to the start to have such a partner are measured from the start."""
    out: list[tuple[float, float]] = []
    j = 0
    for i in range(1, len(counts)):
        end = counts[i]
        # Advance the partner while the next one still leaves a full window.
        while j + 1 < i and end.t_s - counts[j + 1].t_s >= window:
            j += 1
        start = counts[j]
        dt = end.t_s - start.t_s
        if dt <= 0:
            continue
        out.append((end.t_s, max(0, end.bytes - start.bytes) * 8 / dt / 1e6))
    return out


def sample_rates(
    samples: Sequence[TransferSample], rtt_s: float | None = None
) -> list[tuple[float, float]]:
    """Per-sample rates of a series over windows of window_s(path RTT, sampling interval):
    what a goodput plot or a per-interval column shows."""
    counts = counts_of(samples)
    rtt = rtt_s if rtt_s is not None else path_rtt_s(samples)
    return window_rates(counts, window_s(rtt, sample_interval_s(counts)))


def until(counts: Sequence[Count], end_s: float | None) -> list[Count]:
    """The counts up to `end_s`, the last one interpolated there (all of them when None or
    past the last)."""
    if end_s is None or end_s >= counts[-1].t_s:
        return list(counts)
    kept = [c for c in counts if c.t_s <= end_s]
    a, b = kept[-1], counts[len(kept)]
    if end_s > a.t_s:
        kept.append(
            Count(end_s, round(a.bytes + (b.bytes - a.bytes) * (end_s - a.t_s) / (b.t_s - a.t_s)))
        )
    return kept


def steady_mbps(samples: Sequence[TransferSample], end_s: float | None = None) -> float | None:
    """The rate once up to speed: the bytes delivered over the settled part (the second
    half of the samples), over its time (from a receiver's count, the least lifted of a
    few starts: below); None with fewer than MIN_STEADY_RATES samples there. One interval
    of many round trips: a lump counted late moves it by the lump's share of the whole
    half, not by a factor of two. Not the median of round-trip window
    rates: on a path shared with two other TCP flows (100 Mbit/s x 20 ms, lab) that median
    read 6 % under the receiver's count, the windows' rates being skewed by the sawtooth.
    `end_s`: where the settled part ends (drain_end), None for the last count."""
    counts = until(counts_of(samples), end_s)
    settled = _settled(samples, counts)
    if settled is None:
        return None
    start, ceiling = settled
    n = len(counts) - 1
    last = counts[-1]
    # Without the sender's TCP_INFO the counts are the receiver's in-order bytes, which
    # stand still through a loss recovery while data keeps arriving and then jump by all
    # of it: a half that begins inside such a hole starts from a count too low, which can
    # only raise its rate (105 Mbit/s on a 100 Mbit/s lab line, an HTTP download). The
    # smallest of the rates from the half's first quarter of counts to its last is the one
    # a hole lifts least; each still spans at least three quarters of the half.
    # A sender's count (acknowledged and SACKed bytes) has no hole: one start. Reports from
    # before the counter was recorded: samples with the sender's TCP_INFO were its count.
    sender_counted = any(
        x.delivered_by == "sender" or (x.delivered_by is None and x.tcp_info is not None)
        for x in samples
    )
    starts = 1 if sender_counted else max(1, (n - start) // 4)
    rates = [
        average_mbps(max(0, last.bytes - c.bytes), last.t_s - c.t_s)
        for c in counts[start : start + starts]
        if last.t_s > c.t_s
    ]
    if ceiling is not None:
        rates.append(ceiling)
    return min(rates) if rates else None


def drain_end(samples: Sequence[TransferSample], write_s: float | None) -> float | None:
    """Where the settled part ends: the last count before the rate collapsed after the
    sender stopped writing (below the last round trip's before the stop by more than
    RATE_BAND), None while it holds to the end. What the send buffer held then goes out at
    the path's rate (the 5 Gbit/s lab line's last 0.2 s at 4.8 Gbit/s); a loss in its last
    flight, with nothing new to send, is recovered at a crawl (38.8 then 18.9 Mbit/s on a
    100 Mbit/s lab line): no part of the steady state."""
    counts = counts_of(samples)
    if write_s is None or len(counts) < 2:
        return None
    before, last = 0.0, 0.0
    for t, rate in window_rates(counts, window_s(path_rtt_s(samples), sample_interval_s(counts))):
        if t <= write_s:
            before = rate
        elif rate * RATE_BAND < before:
            return last
        last = t
    return None


def mode_steady_mbps(m: ModeResult) -> float | None:
    """steady_mbps of a mode's samples up to the end of its buffer's drain (drain_end), at
    most its rate bound where the line rate is known (ModeResult.rate_bound_mbps): bytes
    over seconds pass the line by the share of the interval a count was read late or early
    (102.4 Mbit/s at the IP layer over a 0.9 s half on a 100 Mbit/s lab line, the half's
    first count read while deliveries lagged)."""
    steady = steady_mbps(m.samples, drain_end(m.samples, m.write_s))
    if steady is None or m.rate_bound_mbps is None:
        return steady
    return min(steady, m.rate_bound_mbps)


def settled_start(
    samples: Sequence[TransferSample], counts: Sequence[Count] | None = None
) -> int | None:
    """Where the settled part begins, as an index into counts_of(samples) (whose first
    entry is the origin): the second half, or later where slow start's overshoot was
    repaired only after it (repair_end: no part of the settled rate). None with fewer than
    MIN_STEADY_RATES samples in it."""
    settled = _settled(samples, counts_of(samples) if counts is None else counts)
    return None if settled is None else settled[0]


def _settled(
    samples: Sequence[TransferSample], counts: Sequence[Count]
) -> tuple[int, float | None] | None:
    """(settled_start, the most its rate can be: None, or where it begins at a repair's end,
    the best round trip before the collapse). A part that begins there starts on a count the
    recovery may have left behind (what was delivered through it counted as it is
    acknowledged after): a few samples' span then reads above the line (102 Mbit/s at the
    IP layer on a 100 Mbit/s lab line). The pipe it refilled was full at the best rate
    before the collapse, which the settled rate cannot exceed."""
    found = _half_and_repair(counts, path_rtt_s(samples))
    if found is None:
        return None
    n, start, repair = found
    if repair is None or repair[0] <= start or n - repair[0] < MIN_STEADY_RATES:
        return start, None
    return repair


def _half_and_repair(
    counts: Sequence[Count], rtt_s: float | None
) -> tuple[int, int, tuple[int, float] | None] | None:
    """(samples with a count, the index ending the first half, repair_end), None with fewer
    than MIN_STEADY_RATES samples in the second half."""
    n = len(counts) - 1  # samples with a count
    start = int(n * SETTLED_FROM)  # counts[0] is the origin: counts[start] ends the first half
    if n - start < MIN_STEADY_RATES:
        return None
    return n, start, repair_end(counts, window_s(rtt_s, sample_interval_s(counts)), rtt_s)


def counts_stand(counts: Sequence[Count], rtt_s: float | None) -> bool:
    """The settled part of a transfer with these delivered-byte `counts` (from the origin)
    stands on its own: MIN_STEADY_RATES samples, and where slow start's repair ended after
    the half, that many after its end. A transfer that ends sooner is read over its second
    half with the repair's dip in it (BBR at 5 Gbit/s x 50 ms: back at 1.40 s, ended at
    1.56 s with two samples after it, settled at 0.85 of the line: `congestion` on a
    healthy path). What the steady stop (measure/engine/steady.py) calls holding, round by
    round, this reads over the sampling windows the settled rate is taken over."""
    found = _half_and_repair(counts, rtt_s)
    if found is None:
        return False
    n, start, repair = found
    return repair is None or repair[0] <= start or n - repair[0] >= MIN_STEADY_RATES


def settled_from_s(samples: Sequence[TransferSample]) -> float | None:
    """The time the settled part begins (settled_start), seconds since the transfer began."""
    counts = counts_of(samples)
    start = settled_start(samples, counts)
    return None if start is None else counts[start].t_s


def repair_end(
    counts: Sequence[Count], window: float, rtt_s: float | None = None
) -> tuple[int, float] | None:
    """(the index of the count where the rate is back after its first collapse, the best
    round-trip rate before that collapse), None without one. A collapse is a round trip's
    rate below the best so far by more than RATE_BAND. The first one after the pipe filled is
    slow start's overshoot being repaired (the queue it overflowed, the losses sent again)
    when it begins within OVERSHOOT_ROUNDS round trips of the first round that did not grow
    (each seen up to a window late). Later collapses are the sender's own steady state (a
    loss-based sawtooth, BBR's probing through a shallow queue) and stay in the rate."""
    index = {c.t_s: i for i, c in enumerate(counts)}
    # Both the first flat round and the collapse are seen on the sampling grid through
    # window rates, each up to a window after it happened.
    reach = OVERSHOOT_ROUNDS * (rtt_s or window) + 2 * window
    best = 0.0
    full_t: float | None = None
    collapsed = False
    for t, rate in window_rates(counts, window):
        if not collapsed:
            collapsed = rate * RATE_BAND < best
            if collapsed and full_t is not None and t - full_t > reach:
                return None  # a collapse of the steady state, not slow start's
            if full_t is None and best > 0 and rate <= best * RATE_BAND:
                full_t = t
            best = max(best, rate)
        elif rate * RATE_BAND >= best:
            return index[t], best
    return None


def average_mbps(nbytes: int, seconds: float) -> float:
    """A transfer's rate over its whole time."""
    return nbytes * 8 / seconds / 1e6 if seconds > 0 else 0.0


class LiveRate:
    """A progress display's rate while a transfer runs: over the latest window of at least
    a round trip (the sampling interval until one is known), like sample_rates."""

    # Counts kept: at 100 ms sampling, 6.4 s of them, longer than any round trip measured.
    KEEP = 64

    def __init__(self) -> None:
        self.counts: list[Count] = [Count(0.0, 0)]
        self.rtt_s: float | None = None

    def add(self, t_s: float, nbytes: int, rtt_s: float | None = None) -> float:
        """The rate up to this count, in Mbit/s."""
        if rtt_s:
            self.rtt_s = rtt_s if self.rtt_s is None else min(self.rtt_s, rtt_s)
        if t_s <= self.counts[-1].t_s:
            return 0.0
        self.counts = [*self.counts[-(self.KEEP - 1) :], Count(t_s, nbytes)]
        window = window_s(self.rtt_s, sample_interval_s(self.counts))
        return window_rates(self.counts, window)[-1][1]


def ip_rate(goodput_mbps: float, mss: int) -> float:
    """The IP-layer rate of a goodput carried in segments of `mss` payload bytes."""
    return goodput_mbps * (mss + IP_TCP_HEADERS) / mss if mss > 0 else goodput_mbps
