"""Loss at idle: did the round-trip probes see the loss a transfer saw?

Random loss (a noisy link, a faulty card) drops a packet whatever the rate it was sent at;
a token bucket or a full buffer drops only what comes above a rate. The RTT probe's
packets are small and paced (measure/probes/rtt.py), so a bucket refilled between them and
no queue held them back: they pass a policer whole, and meet random loss at its rate. A
transfer that lost a share p of its segments while the idle probes lost far fewer than p
of theirs lost them to the rate it sent at, not at random. The test is binomial: how
likely are `lost` losses or fewer out of `sent` probes, each lost with probability p? Each
probe crosses the path twice (there and back), so random loss at p on the data's way alone
loses it with probability p at least; assuming no more keeps the test on the safe side for
one-way loss.
"""

from __future__ import annotations

import math

from tcpwizard.measure.model import IdleLoss, PathEstimate, RttStats

# The odds below which the probes' silence rules random loss at p out: one in a hundred,
# the same order as the other statistical tests the rules make (advice/rules/policer.py's
# Poisson burst test, 1 in 1,000, on many more events); at 1 % a path with random loss at
# exactly the transfer's rate is taken for rate-dependent loss once in a hundred checks,
# and only where the other tests of a policer (a plateau below the line, no queue) held too.
RANDOM_LOSS_ALPHA = 0.01
# A follow-up probe never sends more than this (10 ms apart: 2 s at most): enough to rule
# out random loss down to 2.3 % (ln 0.01 / ln(1 - 0.023) = 198).
MAX_FOLLOW_UP = 200


def from_rtt(rtt: RttStats | None) -> IdleLoss | None:
    """The probe's counts from its summary (it keeps the replies and the loss share)."""
    if rtt is None or rtt.samples <= 0 or rtt.loss_pct >= 100.0:
        return None
    sent = round(rtt.samples * 100.0 / (100.0 - rtt.loss_pct))
    return IdleLoss(sent, sent - rtt.samples, rtt.method)


def of_path(path: PathEstimate | None) -> IdleLoss | None:
    """Every idle probe the path's measurement sent: the RTT probe and any follow-up."""
    if path is None:
        return None
    first = from_rtt(path.rtt)
    more = path.idle_loss
    if first is None:
        return more
    if more is None:
        return first
    return IdleLoss(first.sent + more.sent, first.lost + more.lost, first.method)


def tail(sent: int, lost: int, p: float) -> float:
    """P(X <= lost) for X ~ Binomial(sent, p)."""
    if p <= 0.0:
        return 1.0
    if p >= 1.0:
        return 1.0 if lost >= sent else 0.0
    return min(1.0, sum(math.comb(sent, k) * p**k * (1 - p) ** (sent - k) for k in range(lost + 1)))


def rules_out_random(idle: IdleLoss | None, p: float) -> bool:
    """The idle probes lost too few for random loss at `p` (the transfer's share lost)."""
    return idle is not None and idle.sent > 0 and tail(idle.sent, idle.lost, p) < RANDOM_LOSS_ALPHA


def probes_to_decide(p: float, have: IdleLoss | None = None) -> int | None:
    """More probes, none lost, that rule out random loss at `p` beside those sent already
    (0: those rule it out; None: no count within MAX_FOLLOW_UP can)."""
    if p <= 0.0 or p >= 1.0:
        return None
    sent, lost = (have.sent, have.lost) if have is not None else (0, 0)
    for more in range(MAX_FOLLOW_UP + 1):
        if tail(sent + more, lost, p) < RANDOM_LOSS_ALPHA:
            return more
    return None
