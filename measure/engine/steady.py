"""When a test transfer has seen enough: its rate has stopped growing.

A fixed length is either too short for a long path (still in slow start when it ends) or
too long for a short one (seconds of a rate that was clear after a few round trips). The
sender watches what the network delivered (bytes acknowledged, TCP_INFO) once per round
trip, as BBR's full-pipe test does: the rate is steady after `rounds` round trips that did
not bring `growth` more than the best so far, nor fell below the best by that factor (a
rate that collapsed after a burst has not settled). The verdicts read the second half of a
transfer as its settled part, so the last growth must also lie in the first 75 % of the
transfer; the caller's duration stays the cap.
"""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class SteadyStop:
    rounds: int = 3  # round trips without growth (BBR's full-pipe test: 3)
    growth: float = 1.25  # more than the best rate by this factor is growth (BBR: 25 %)
    min_s: float = 0.6  # never before: the verdicts want a few samples after the ramp
    settled_share: float = 0.75  # the last growth lies within this share of the transfer
    min_round_s: float = 0.1  # a round is an RTT, but no shorter than this (sampling grid)
    # A loss-based sender (Reno, CUBIC) grows its window by a segment per RTT once out of
    # slow start, and its rate under loss saws over many RTTs: "no growth by a quarter for
    # three rounds" says nothing there, and a loss verdict needs several loss events. Those
    # transfers keep the fixed length check used before (3 s).
    loss_based_min_s: float = 3.0

    def for_congestion_control(self, cc: str) -> SteadyStop:
        """The rule for a sender running `cc` (model-based BBR: as configured)."""
        if not cc or cc.startswith("bbr"):
            return self
        return replace(self, min_s=max(self.min_s, self.loss_based_min_s))


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

    def feed(self, now: float, acked: int, rtt_s: float | None) -> bool:
        """True once the transfer may end."""
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
                # round passes it within a few rounds and counts as growth then.
                self.flat_rounds += 1
            else:
                # Far below the best: not growing, but not holding either (a burst that a
                # policer's full bucket let through, then its drops; a collapse after
                # loss). A rate holds when it stays within the same band of the best.
                self.flat_rounds = 0
        return self.steady(now)

    def steady(self, now: float) -> bool:
        c = self.config
        elapsed = now - self.start
        return (
            self.flat_rounds >= c.rounds
            and elapsed >= c.min_s
            and self.last_growth_s <= c.settled_share * elapsed
        )
