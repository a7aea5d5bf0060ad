"""Loss episodes (advice/loss_episodes.py): the ramp's overshoot against losses that went on
once the rate had settled, on short and long paths."""

from __future__ import annotations

from tcpwizard.advice.diagnose import Evidence
from tcpwizard.advice.evidence import directions
from tcpwizard.advice.loss_episodes import episodes, late_retransmits
from tcpwizard.advice.rules import congestion
from tests.model_builders import path
from tests.test_policer_bloat_rules import audit, transfer

# Reno over 251 ms sharing nothing (scenario matrix 943070463.29, the download): slow start
# until 2.2 s, one overshoot lost 616 segments at 2.2-2.7 s, then 50 Mbit/s with no loss
# until the transfer ended at 3.8 s. Sampled every 0.25 s here.
LONG_RATES = [0.5, 1, 2, 3, 6, 9, 12, 25, 30, 36, 55, 58, 46, 52, 53, 56]
LONG_LOSSES = [0] * 9 + [81, 184, 351] + [0] * 4


def test_an_overshoot_begun_in_the_second_half_is_not_late_loss() -> None:
    t = transfer(LONG_RATES, [255.0] * len(LONG_RATES), LONG_LOSSES, "reno")
    m = t.modes[0]
    assert len(episodes(m, 251.0)) == 1
    assert late_retransmits(m, 251.0) == 0
    # On a 20 ms path the samples, 0.25 s apart, are more than two round trips apart: three
    # episodes, and the two after the first count.
    t2 = transfer(LONG_RATES, [20.0] * len(LONG_RATES), LONG_LOSSES, "reno")
    assert late_retransmits(t2.modes[0], 20.0) == 184 + 351


def test_losses_all_along_a_short_path_are_late_loss() -> None:
    """Random loss on a 5 ms path: every interval loses, the episodes merge (the samples
    are 50 round trips apart), and the second half's losses are ongoing."""
    rates = [20.0, 40.0] + [30.0] * 14
    losses = [0, 5] + [3] * 14
    t = transfer(rates, [5.5] * len(rates), losses, "reno")
    assert late_retransmits(t.modes[0], 5.0) == 3 * 7  # from the middle sample on


def test_one_late_overshoot_is_no_repeated_loss_event_for_the_congestion_rule() -> None:
    t = transfer(LONG_RATES, [255.0] * len(LONG_RATES), LONG_LOSSES, "reno")
    ev = Evidence(audit("reno"), audit("reno"), path(251.0, 74.5), t)
    (d,) = directions(ev)
    c = congestion.rule(ev, d)
    assert c is not None
    assert not any("repeated loss events" in e for e in c.evidence)
    assert c.confidence <= 0.3


def test_the_loss_bound_is_read_against_the_settled_rate_not_the_first_burst() -> None:
    """Reno at ~1 % random loss over 386 ms (scenario matrix 20261202.164): slow start's
    first burst lifts the whole average to several times the bound, the second half sits at
    it. The bound is a steady-state law: it holds the window, `congestion` on the sender."""
    rates = [0.2, 0.6, 1.2, 2.3, 3.6, 3.0, 1.9, 1.3] + [0.4, 0.3, 0.4, 0.3] * 3
    losses = [0, 0, 0, 1, 0, 1, 2, 0] + [0, 1, 0, 0] * 3
    t = transfer(rates, [387.0] * len(rates), losses, "reno")
    ev = Evidence(audit("reno"), audit("reno"), path(386.0, 9.3), t)
    (d,) = directions(ev)
    c = congestion.rule(ev, d)
    assert c is not None and d.current is not None
    assert d.current.throughput_mbps > 1.5 * 0.4  # the whole average is far above the bound
    assert (c.factor, c.host, c.confidence) == ("congestion", "local", 0.85)
