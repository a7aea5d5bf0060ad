"""When `path` has probed enough to say where loss begins, and where to probe next when not
(pure functions; measure/probes/hops.py sends the probes).

A loss rate p shows as lost probes only once a hop has had a few / p of them, so a few probes
per hop cannot tell a path losing a few percent from a clean one: at 10 per hop, 4 % loss
from the third of five hops shows no lost probe in 29 % of runs (0.96^30), and the change
point (hop_model.loss_start) needs MIN_LOST lost probes to name anything. So after its first
rounds `path` goes on, within its time budget, until one of these holds:

* loss is named and placed: the hop it starts at had probes enough to show its rate
  (probes x rate >= MIN_LOST), and the hop before it, if any, lost fewer than that rate
  would lose in its probes but with probability `level` (binomial): it is cleaner, not
  unlucky. Only those two hops are probed for this (the change point moves if either says
  otherwise); while too few probes are lost to name a start, every hop is;
* no probe was lost at the last answering hop in enough probes that a loss at the floor
  would have shown there but with probability `level` ((1 - floor)^n < level). Real loss
  only grows along the path, so the last hop carries all of it, and only that hop is probed
  for this.

`level` is hop_model's CONSISTENT_P (the binomial level that tells a hop's own loss from the
path's) shared over the looks the budget allows (Bonferroni: 15 looks of 2 s in 30 s, 0.07 %
each), so that looking again and again does not turn a fluke into a stop. With L = ln(1 /
level), ruling a rate f out at the last hop takes L / f probes, and placing a loss just above
it 2 L / f more (L / f at each of the two hops); the floor is the f for which both fit in
`max_time` at `interval`: f = 3 L x interval / max_time (1.5 % at `path`'s defaults, 20 ms
and 30 s). Ruling it out takes a third of the budget (10 s).

Simulated and measured on the lab: docs/path.md ("Probing").
"""

from __future__ import annotations

import math
from typing import Literal

from tcpwizard.measure.probes.hop_model import (
    CONSISTENT_P,
    MIN_LOST,
    HopCounts,
    binom_cdf,
    cadence_limited,
    loss_start,
)

Need = Literal["last", "all"]


def stop_level(look_s: float, max_time_s: float) -> float:
    """The binomial level of one look's stop: CONSISTENT_P shared over the looks the budget
    allows (Bonferroni), so that looking again and again does not make a fluke a stop."""
    return CONSISTENT_P * min(1.0, look_s / max_time_s)


def loss_floor(interval_s: float, max_time_s: float, level: float) -> float:
    """The smallest loss rate the budget can rule out at the last hop and, were it there,
    still place (see the module docstring)."""
    return min(1.0, 3 * -math.log(level) * interval_s / max_time_s)


def probes_wanted(counts: list[HopCounts], floor: float, level: float) -> tuple[int, ...]:
    """The TTLs to probe more before the counts settle where loss begins (or that no loss
    above `floor` is there); () when they do. Hops that answer on a token bucket's cadence
    say nothing of the path's loss and are left out, as hop_model.analyse leaves them out."""
    answering = [c for c in counts if c.rtts and not cadence_limited(c)]
    if not answering:
        return ()  # nothing answers: more probes would not either
    pairs = [(c.sent, c.sent - len(c.rtts)) for c in answering]
    start, rate = loss_start(pairs)
    if start is None:
        sent, lost = pairs[-1]
        if lost:
            return tuple(c.ttl for c in answering)  # too few lost to name a start: place them
        return () if (1.0 - floor) ** sent < level else (answering[-1].ttl,)
    around = tuple(c.ttl for c in answering[max(0, start - 1) : start + 1])
    if pairs[start][0] * rate < MIN_LOST:
        return around  # the start hop had too few probes to show the rate: a pooled guess
    if start == 0:
        return ()
    # A hop just before the start that answers on its own ICMP rate limit never looks
    # cleaner: the probing then runs to its budget, and the analysis (hop_model.analyse)
    # still sets that hop's loss apart and names the start.
    before_sent, before_lost = pairs[start - 1]
    return () if binom_cdf(before_lost, before_sent, rate) < level else around
