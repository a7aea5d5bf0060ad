"""When `check` sends more round-trip probes after the transfers, and how many.

A loss-based sender that held a plateau below the line with no queue, near the loss bound
of the share it lost, is read two ways: random loss at that share holds it there (the
congestion rule), or a token bucket drops what exceeds its rate (the policer rule). So is
a BBR sender's flat plateau far below the line with losses: BBR holds its rate through
light random loss, but not through any (its recoveries overlap on a long fat path).
Random loss would drop the idle probes too (advice/idle_loss.py). When the RTT probe's
own count cannot yet tell, and a bounded number more could turn the policer test, the
check sends them: evidence before a verdict, not a guess between two causes.
"""

from __future__ import annotations

import math

from tcpwizard.advice import idle_loss
from tcpwizard.advice.evidence import pick_current
from tcpwizard.advice.loss_episodes import loss_share
from tcpwizard.advice.path_jitter import path_jitter_ms
from tcpwizard.advice.rules.policer import model_based, policing, same_way
from tcpwizard.advice.window_law import LOSS_BASED
from tcpwizard.measure.model import IdleLoss, PathEstimate, TransferResult
from tcpwizard.measure.probes.rtt import FOLLOW_UP_INTERVAL_S
from tcpwizard.units import format_mbps

# `--quick` sends a follow-up only this short: no longer than the RTT probe of a full check
# (20 echoes 10 ms apart), 50 probes at the follow-up's spacing. Every BBR policer of the
# scenario matrix was decided by 7-50 (docs/check.md); a longer one is left open, with a note.
QUICK_FOLLOW_UP_S = 0.2


# A follow-up that lost more than planned may be followed by one more, planned with what it
# lost; no further: each look at the counts may rule random loss out at RANDOM_LOSS_ALPHA, so
# two looks keep a random path named a policer under twice that (Bonferroni).
FOLLOW_UP_ROUNDS = 2


def fits_quick(count: int) -> bool:
    """Whether `count` follow-up probes fit what `--quick` spends on them."""
    return count * FOLLOW_UP_INTERVAL_S <= QUICK_FOLLOW_UP_S + 1e-9


def wanted(
    path: PathEstimate | None, transfer: TransferResult | None, again: bool = False
) -> tuple[int, str]:
    """How many more idle probes could decide between random loss and a policer, and why
    ((0, "") when none could change the verdict). The first follow-up is planned for none
    of its probes lost (the RTT probe's 20 are too few to say how many will be: 2 of 20 lost
    at 1.9 % random loss made any plan for losing at 10 % give up); `again`, after one, for
    the new probes losing at the share all of them lost so far."""
    if path is None or path.capacity is None or transfer is None:
        return 0, ""
    idle = idle_loss.of_path(path)
    base = idle or IdleLoss(0, 0, path.rtt.method)
    best: tuple[int, str] = (0, "")
    # The policer test reads its "no queue" from the top of a jittery path's range.
    idle_ms = path.rtt.min + path_jitter_ms(path, transfer.modes)
    for direction in ("up", "down"):
        m = pick_current([x for x in transfer.modes if x.direction == direction and not x.error])
        cc = m.congestion_control if m is not None else ""
        if m is None or m.retransmits <= 0 or not (cc in LOSS_BASED or model_based(cc)):
            continue
        cap = path.capacity_down if direction == "down" and path.capacity_down else path.capacity
        p = loss_share(m, idle_ms)
        n = (idle_loss.probes_to_plan if again else idle_loss.probes_to_decide)(p, idle)
        if not n or n <= best[0]:
            continue  # decided already, or no count within the cap decides
        others = same_way(transfer.modes, m)
        if policing(m, idle_ms, cap.mbps, cc, idle, others) is not None:
            continue  # the policer test holds already
        share = base.lost / base.sent if base.sent and again else 0.0
        planned = IdleLoss(base.sent + n, base.lost + math.ceil(n * share), base.method)
        if policing(m, idle_ms, cap.mbps, cc, planned) is None:
            continue  # no count of probes turns it: something else decides
        best = (
            n,
            f"the {direction}load lost {p:.1%} of its segments below the "
            f"{format_mbps(cap.mbps)} the probe saw: at random, or only above a rate?",
        )
    return best
