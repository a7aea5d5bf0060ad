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
from tcpwizard.advice.evidence import HEALTHY_SHARE, Evidence, sender_cc
from tcpwizard.advice.evidence import Direction as _Direction
from tcpwizard.advice.evidence import rtt_ms as _rtt_ms
from tcpwizard.advice.window_law import LOSS_BASED, backoff, sawtooth_utilisation
from tcpwizard.measure.engine.loaded_rtt import loaded_rtt, mss_of, percentile
from tcpwizard.measure.engine.rates import IP_TCP_HEADERS

# The peaks: the 90th percentile of the congestion window over the settled half (TCP_INFO,
# one sample per interval), the window just before the losses without the one sample a
# burst can lift.
PEAK_PERCENTILE = 0.9


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
    if cc not in LOSS_BASED or cur.retransmits == 0:
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


def healthy_share(ev: Evidence, d: _Direction) -> tuple[float, Overflow | None]:
    """The share of the capacity a transfer the hosts do not hold back reaches this way: the
    healthy share, times the sawtooth's utilisation when its own overflow is shown."""
    over = own_overflow(ev, d)
    return (HEALTHY_SHARE * over.utilisation if over else HEALTHY_SHARE), over
