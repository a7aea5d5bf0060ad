"""A loss-based sender's own sawtooth through a drop-tail queue shallower than the BDP.

Such a sender grows its window until the bottleneck's queue overflows, then multiplies it
by its decrease factor beta. Its window cycles between beta x W and W = 1 + q BDPs (q: the
queue in BDPs); while the window is below one BDP the line idles, so a healthy flow keeps it
busy only part of the time. Its losses are the queue's overflow under its own window — the
path's buffer, not losses that hold the window down — and no setting on either host changes
them. What tells them apart from losses that hold it down: the window's peaks reached the
BDP and a queue stood behind them (a window held below the BDP by loss neither fills the
line nor queues).
"""

from __future__ import annotations

from dataclasses import dataclass

from tcpwizard.advice.capacity_view import capacity as _capacity
from tcpwizard.advice.capacity_view import steady_mbps
from tcpwizard.advice.evidence import HEALTHY_SHARE, Evidence, sender_cc, shared_measured
from tcpwizard.advice.evidence import Direction as _Direction
from tcpwizard.advice.evidence import rtt_ms as _rtt_ms
from tcpwizard.advice.others_queue import others_queue
from tcpwizard.advice.rules.bufferbloat import BBR_CWND_GAIN
from tcpwizard.advice.rules.policer import model_based
from tcpwizard.advice.window_law import LOSS_BASED, backoff, sawtooth_utilisation
from tcpwizard.measure.engine.loaded_rtt import loaded_rtt, mss_of, percentile
from tcpwizard.measure.engine.rates import (
    IP_TCP_HEADERS,
    counts_of,
    path_rtt_s,
    sample_interval_s,
    settled_start,
    window_rates,
    window_s,
)
from tcpwizard.measure.model import ModeResult

# The peaks: the 90th percentile of the congestion window over the settled half (TCP_INFO,
# one sample per interval), the window just before the losses without the one sample a
# burst can lift.
PEAK_PERCENTILE = 0.9
# The least queue that shows one stood: a flow that keeps none reads up to 0.2 BDP above
# idle at the 90th percentile of its smoothed RTT (random-loss flows in the scenario
# matrix; own_overflow below).
QUEUE_SEEN_BDPS = 0.2


@dataclass(frozen=True)
class Overflow:
    """A sawtooth through the path's own queue: the window's peaks, and the queue that stood
    behind them, in BDPs; the share of the line such a sawtooth keeps busy."""

    window_bdps: float
    queue_bdps: float
    utilisation: float

    def note(self, cc: str) -> str:
        return (
            f"the {cc} window's peaks reached {self.window_bdps:.2f} BDP with a queue of "
            f"{self.queue_bdps:.2f} BDP behind them: its losses are the path's queue "
            f"overflowing under its own window, which through a queue that shallow keeps the "
            f"line {self.utilisation:.0%} busy"
        )


def own_overflow(ev: Evidence, d: _Direction) -> Overflow | None:
    """The sawtooth evidence of this direction's transfer, or None when its sender is not
    loss-based, lost nothing, or its window never reached the BDP with a queue behind it."""
    cur, cap, idle = d.current, _capacity(ev, d), _rtt_ms(ev, d)
    if cur is None or cap is None or idle is None or cap <= 0 or idle <= 0:
        return None
    cc = sender_cc(d)
    if cur.retransmits == 0:
        return None
    if model_based(cc):
        # Others' traffic lifts a shared flow's peaks (they give way) and fills the queue:
        # then neither the peaks nor the queue are its own.
        shared = shared_measured(ev, d) or others_queue(ev, d) is not None
        return None if shared else _paced_overflow(cur, cap, idle)
    if cc not in LOSS_BASED:
        return None
    settled = [s.tcp_info for s in cur.samples[len(cur.samples) // 2 :] if s.tcp_info]
    if not settled:
        return None
    bdp_segments = cap * 1e6 / 8 * idle / 1e3 / (mss_of(cur) + IP_TCP_HEADERS)
    peak = percentile([t.snd_cwnd for t in settled], PEAK_PERCENTILE) / bdp_segments
    if peak < 1.0:
        return None
    # The queue it overflows, two ways, each of which can only overstate it: what of the
    # window the BDP does not hold (a window the sender has not filled yet reads larger:
    # Reno at 253 ms, 2.06 BDP of cwnd over a 0.56-BDP queue), and the sender's smoothed
    # RTT above idle at its 90th percentile (noise lifts it: random-loss flows read up to
    # 0.2 BDP with no queue). The smaller is the least utilisation, the lenient side; the
    # window's peaks at the BDP are what tell the sawtooth from random loss (matrix: 0.54-
    # 0.67 BDP under random loss, 1.0-3.7 through a shallow queue).
    queue = peak - 1.0
    lr = loaded_rtt(cur, idle)
    if lr is not None:
        queue = min(queue, max(0.0, lr.p90_ms - idle) / idle)
    return Overflow(peak, queue, sawtooth_utilisation(queue, backoff(cc)))


def _paced_overflow(cur: ModeResult, cap: float, idle: float) -> Overflow | None:
    """BBR through a queue shallower than what it keeps in flight beyond the line: its
    losses are its own probing overflowing that queue when its RTT stood at the queue's
    full depth, and between them it filled the line. No law gives the share such a flow
    keeps (its recovery, not a fixed decrease, sets the dips), so it is the one measured:
    the settled rate over its round-trip peaks. Shown only where those peaks reached the
    healthy share of the capacity (a flow that losses held below the line never reaches
    it) and a queue of QUEUE_SEEN_BDPS to under 1 BDP stood (random loss leaves none; a
    deeper queue holds BBR's inflight and is not overflowed by its design)."""
    lr = loaded_rtt(cur, idle)
    if lr is None:
        return None
    queue = max(0.0, lr.p90_ms - idle) / idle
    # Linux BBR keeps up to BBR_CWND_GAIN x the BDP in flight: a queue under (gain - 1) BDP
    # cannot hold what it sends beyond the line, so its probing overflows it by design.
    if not QUEUE_SEEN_BDPS <= queue < BBR_CWND_GAIN - 1.0:
        return None
    peak = _peak_mbps(cur)
    if peak is None or peak < HEALTHY_SHARE * cap:
        return None
    steady = steady_mbps(cur)
    settled = [s.tcp_info for s in cur.samples[len(cur.samples) // 2 :] if s.tcp_info]
    bdp_segments = cap * 1e6 / 8 * idle / 1e3 / (mss_of(cur) + IP_TCP_HEADERS)
    window = percentile([t.snd_cwnd for t in settled], PEAK_PERCENTILE) / bdp_segments
    return Overflow(window, queue, min(1.0, steady / peak))


def _peak_mbps(cur: ModeResult) -> float | None:
    """The PEAK_PERCENTILE of the settled part's round-trip rates (delivered bytes over
    windows of at least a round trip, measure/engine/rates.py), capped at the line where
    it is known."""
    counts = counts_of(cur.samples)
    start = settled_start(cur.samples, counts)
    if start is None:
        return None
    window = window_s(path_rtt_s(cur.samples), sample_interval_s(counts))
    rates = [r for t, r in window_rates(counts, window) if t >= counts[start].t_s + window]
    if not rates:
        return None
    peak = percentile(rates, PEAK_PERCENTILE)
    return peak if cur.rate_bound_mbps is None else min(peak, cur.rate_bound_mbps)


def healthy_share(ev: Evidence, d: _Direction) -> tuple[float, Overflow | None]:
    """The share of the capacity a transfer the hosts do not hold back reaches this way: the
    healthy share, times the sawtooth's utilisation when its own overflow is shown."""
    over = own_overflow(ev, d)
    return (HEALTHY_SHARE * over.utilisation if over else HEALTHY_SHARE), over
