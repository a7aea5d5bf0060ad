"""When a test transfer has seen enough: its rate has stopped growing.

A fixed length is either too short for a long path (still in slow start when it ends) or
too long for a short one (seconds of a rate that was clear after a few round trips). The
sender watches what the network delivered (bytes acknowledged, TCP_INFO) once per round
trip, as BBR's full-pipe test does: the rate is steady after `rounds` round trips that did
not bring `growth` more than the best so far, nor fell below the best by that factor (a
rate that collapsed after a burst has not settled). The verdicts read the second half of a
transfer as its settled part, so the last growth must also lie in the first 75 % of the
transfer; the caller's duration stays the cap, and for a long path that cap is counted in
round trips (`cap_s`).

A model-based sender (BBR) finds its full pipe by the same three rounds, then drains the
queue its startup built (up to 1.9 BDP at a pacing gain of 2.89) before its steady state.
A round counts as holding only once that queue is gone: the smoothed RTT back within
ProbeBW's own reach of the path's (its 1.25 gain phase queues a quarter of a BDP). Without
that, a transfer through a deep queue ended while its startup still filled it: at 1.4
Gbit/s x 52 ms a policer's large bucket still passed the line rate then, and the drops that
show the policer came after the end (matrix run 10, 187941889.46).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from tcpwizard.checks.behaviour_checks import DEFAULT_MSS
from tcpwizard.measure.engine.loaded_rtt import QUEUE_FREE_NOISE_MS
from tcpwizard.measure.engine.rates import RATE_BAND

INITIAL_WINDOW_SEGMENTS = 10  # RFC 6928, Linux's default


def slow_start_rounds(window_bytes: float, mss: int = DEFAULT_MSS) -> int:
    """Round trips from the initial window to `window_bytes`, and the one that finds the
    pipe full."""
    segments = max(1.0, window_bytes / mss)
    return max(0, math.ceil(math.log2(segments / INITIAL_WINDOW_SEGMENTS))) + 1


def cap_s(floor_s: float, rtt_s: float | None, bdp_bytes: float | None) -> float:
    """The longest a transfer that ends once steady may run on this path: twice the round
    trips of slow start to the BDP, so that the second half, which the verdicts read as the
    settled part, begins after it (at 400 ms x 1 Gbit/s slow start alone takes 13 round
    trips, 5.2 s); never less than `floor_s`."""
    if not rtt_s or not bdp_bytes or rtt_s <= 0 or bdp_bytes <= 0:
        return floor_s
    return max(floor_s, 2 * slow_start_rounds(bdp_bytes) * rtt_s)


@dataclass(frozen=True)
class SteadyStop:
    rounds: int = 3  # round trips without growth (BBR's full-pipe test: 3)
    growth: float = RATE_BAND  # more than the best rate by this factor is growth (BBR: 25 %)
    min_s: float = 0.6  # never before: the verdicts want a few samples after the ramp
    settled_share: float = 0.75  # the last growth lies within this share of the transfer
    min_round_s: float = 0.1  # a round is an RTT, but no shorter than this (sampling grid)
    # A loss-based sender (Reno, CUBIC) grows its window by a segment per RTT once out of
    # slow start, and its rate under loss saws over many RTTs: "no growth by a quarter for
    # three rounds" says nothing there, and a loss verdict needs several loss events. Those
    # transfers keep the fixed length check used before (3 s).
    loss_based_min_s: float = 3.0
    # A round holds only while the smoothed RTT stands within this share of the path's
    # (BBR's ProbeBW: pacing gain 1.25 queues at most a quarter of a BDP), plus the timer
    # noise of a short path (measure/engine/loaded_rtt.py QUEUE_FREE_NOISE_MS). None: no such
    # test (loss-based senders keep a standing queue by design and run the fixed length).
    drained_share: float | None = 1.25
    rtt_noise_s: float = QUEUE_FREE_NOISE_MS / 1e3

    def for_congestion_control(self, cc: str) -> SteadyStop:
        """The rule for a sender running `cc` (model-based BBR: as configured)."""
        if not cc or cc.startswith("bbr"):
            return self
        return replace(self, min_s=max(self.min_s, self.loss_based_min_s), drained_share=None)


class SteadyDetector:
    """Fed (time, bytes acknowledged, RTT) by the sender's sampling loop; says when to end.
    Free of sockets and clocks."""

    def __init__(self, config: SteadyStop, start: float) -> None:
        self.config = config
        self.start = start
        self._round_t = start
        self._round_bytes = 0
        self.best_bps = 0.0
        self.flat_rounds = 0
        self.last_growth_s = 0.0  # since start
        self.rounds_seen = 0

    def feed(
        self, now: float, acked: int, rtt_s: float | None, srtt_s: float | None = None
    ) -> bool:
        """True once the transfer may end. `rtt_s`: the path's RTT (TCP_INFO min_rtt);
        `srtt_s`: the smoothed RTT now, queue included."""
        c = self.config
        span = now - self._round_t
        # A tenth of slack: samples come on a grid, and a round a hair short of the RTT
        # would otherwise wait for the next sample and make every round two.
        if span >= 0.9 * max(c.min_round_s, rtt_s or 0.0):
            rate = (acked - self._round_bytes) * 8.0 / span
            self._round_t, self._round_bytes = now, acked
            self.rounds_seen += 1
            if rate > c.growth * self.best_bps:
                self.best_bps = rate
                self.flat_rounds = 0
                self.last_growth_s = now - self.start
            elif rate * c.growth >= self.best_bps:
                # The mark moves only on real growth: a rate that creeps up a tenth per
                # round passes it within a few rounds and counts as growth then. A round
                # over startup's standing queue neither holds nor breaks the count.
                if self._drained(rtt_s, srtt_s):
                    self.flat_rounds += 1
            else:
                # Far below the best: not growing, but not holding either (a burst that a
                # policer's full bucket let through, then its drops; a collapse after
                # loss). A rate holds when it stays within the same band of the best.
                self.flat_rounds = 0
        return self.steady(now)

    def _drained(self, rtt_s: float | None, srtt_s: float | None) -> bool:
        c = self.config
        if c.drained_share is None or not rtt_s or not srtt_s:
            return True
        return srtt_s <= c.drained_share * rtt_s + c.rtt_noise_s

    def steady(self, now: float) -> bool:
        c = self.config
        elapsed = now - self.start
        return (
            self.flat_rounds >= c.rounds
            and elapsed >= c.min_s
            and self.last_growth_s <= c.settled_share * elapsed
        )
