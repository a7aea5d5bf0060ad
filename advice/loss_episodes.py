"""Loss episodes of one transfer, from the sender's retransmission count per sample: which
losses were the ramp's overshoot and which went on once the rate had settled.

Slow start (or BBR's startup) overshoots any queue once, and its recovery is one episode.
Losses after it are what holds a loss-based window down, or a bucket's drops. On a long
path the ramp ends late, so "the second half of the samples" is not "after the ramp": an
episode begun there is still the overshoot.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from tcpwizard.measure.engine import rates
from tcpwizard.measure.engine.loaded_rtt import mss_of
from tcpwizard.measure.model import ModeResult

# One recovery sends its retransmissions a round trip apart, so its intervals may skip one:
# a new loss episode begins only after more than this many round trips without any.
EPISODE_GAP_RTTS = 2
# Retransmissions after the ramp that make losses ongoing: more than a path without loss
# retransmits, a tail-loss probe's one segment (RFC 8985) and a spurious timeout's one more.
LATE_LOSS_EVENTS = 3


def episodes(m: ModeResult, rtt_ms: float, first_run: bool = False) -> list[list[float]]:
    """Loss recoveries in the transfer, each as the sender's smoothed RTTs (ms) of its
    intervals with new retransmissions and of the interval before its first: a new episode
    after a gap of more than two round trips without any (one recovery sends its
    retransmissions a round trip apart, so its intervals may skip one). `first_run`: the
    first episode goes on until an interval without loss: on a path whose two round trips
    are shorter than an interval (100 ms samples under 50 ms) adjacent lossy intervals show
    no pause, and the ramp's overshoot may take many recoveries."""
    out: list[list[float]] = []
    last, last_t, before = 0, -1e9, None
    gap_s = EPISODE_GAP_RTTS * rtt_ms / 1e3
    clean = True  # an interval without new retransmissions since the last with some
    for s in m.samples:
        ti = s.tcp_info
        if ti is None:
            continue
        if ti.total_retrans > last:
            if ((clean or not first_run or len(out) > 1) and s.t_s - last_t > gap_s) or not out:
                out.append([] if before is None else [before])
            out[-1].append(ti.rtt_us / 1e3)
            last_t = s.t_s
            clean = False
        else:
            clean = True
        last = max(last, ti.total_retrans)
        before = ti.rtt_us / 1e3
    return out


def _first_episode(rows: Sequence[tuple[float, int]], rtt_ms: float) -> tuple[int, int] | None:
    """(first, last) index of the rows (time, retransmissions so far) of the first loss
    episode; None without any loss."""
    gap_s = EPISODE_GAP_RTTS * rtt_ms / 1e3
    start = next((i for i in range(1, len(rows)) if rows[i][1] > rows[i - 1][1]), None)
    if start is None:
        return None
    end = start
    for i in range(start + 1, len(rows)):
        if rows[i][1] > rows[i - 1][1]:
            if rows[i][0] - rows[end][0] > gap_s:
                break
            end = i
    return start, end


def _settled_from(rows: Sequence[tuple[float, int]], rtt_ms: float) -> int | None:
    """The row from which losses count as the settled rate's: the end of the first
    episode, or the middle when that episode begun in the first half went on into the
    second, where the plateau is measured: losses that went on through it, as a bucket
    drops every round (Reno policed at 37 of 157 Mbit/s over 162 ms: 2.8 s of drops with no
    pause of two round trips, read as one episode and "no loss after the ramp"), or a
    sawtooth whose pauses the 100 ms samples cannot show on a short path. An episode begun
    in the second half is a late ramp's overshoot (a long path's slow start ends late).
    None without any loss."""
    first = _first_episode(rows, rtt_ms)
    if first is None:
        return None
    start, end = first
    half = len(rows) // 2
    return half if start <= half < end else end


def settled_loss(m: ModeResult, rtt_ms: float) -> float | None:
    """The share of bytes retransmitted once the rate had settled (_settled_from), over the
    bytes delivered since; None without any loss or with nothing delivered after it. 0.0:
    no loss after the ramp."""
    rows = [
        (s.t_s, s.tcp_info.total_retrans, s.delivered_bytes)
        for s in m.samples
        if s.tcp_info is not None and s.delivered_bytes is not None
    ]
    begin = _settled_from([(t, r) for t, r, _ in rows], rtt_ms)
    if begin is None:
        return None
    _, retrans0, delivered0 = rows[begin]
    _, retrans1, delivered1 = rows[-1]
    if delivered1 is None or delivered0 is None or delivered1 <= delivered0:
        return None
    return (retrans1 - retrans0) * mss_of(m) / (delivered1 - delivered0)


def loss_share(m: ModeResult, rtt_ms: float) -> float:
    """The share of bytes lost that held the rate: after the ramp's overshoot where the
    samples show it (settled_loss), else over the whole transfer."""
    settled = settled_loss(m, rtt_ms)
    if settled is not None:
        return settled
    return m.retransmits * mss_of(m) / m.bytes if m.bytes > 0 else 0.0


def settled_losses(m: ModeResult, rtt_ms: float) -> list[tuple[int, float]]:
    """The losses once the rate had settled (_settled_from), interval by interval: the
    segments retransmitted in it and the highest smoothed RTT (ms) of it and the interval
    before (the RTT the sender saw as it lost them; the smoothing lags a round trip)."""
    timed = [(s.t_s, s.tcp_info) for s in m.samples if s.tcp_info is not None]
    begin = _settled_from([(t, ti.total_retrans) for t, ti in timed], rtt_ms)
    if begin is None:
        return []
    infos = [ti for _, ti in timed[begin:]]
    return [
        (now.total_retrans - before.total_retrans, max(now.rtt_us, before.rtt_us) / 1e3)
        for before, now in itertools.pairwise(infos)
        if now.total_retrans > before.total_retrans
    ]


def late_retransmits(m: ModeResult, rtt_ms: float) -> int:
    """Retransmissions once the rate had settled: in the second half of the samples, less
    a late ramp's overshoot (an episode begun there; Reno over 251 ms lost 944 segments in
    its one overshoot at 2.2-2.6 s of 3.8 and none after, read as "repeated loss events")."""
    rows = [(s.t_s, s.tcp_info.total_retrans) for s in m.samples if s.tcp_info is not None]
    if len(rows) < 4:
        return 0
    begin = len(rows) // 2
    settled = _settled_from(rows, rtt_ms)
    if settled is not None and settled > begin:
        begin = settled
    return max(0, rows[-1][1] - rows[begin][1])


def settled_mbps(m: ModeResult) -> float:
    """The rate the loss bound is a law for: the steady state's, delivered over the settled
    half (a slow start's first burst before the losses lifts the whole transfer's average:
    Reno at 0.98 % loss over 386 ms averaged 1.2 Mbit/s, 0.2-0.6 in its second half, at
    the bound's 0.37); the whole average without samples."""
    settled = rates.mode_steady_mbps(m)
    return m.throughput_mbps if settled is None else settled
