"""The idle probes' test of random loss (advice/idle_loss.py): the binomial tails, the
count that decides, and the RTT probe's summary read back as counts."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tcpwizard.advice import idle_loss
from tcpwizard.measure import stats
from tcpwizard.measure.model import IdleLoss, PathEstimate, RttStats
from tcpwizard.measure.probes.availbw import StreamResult


def _rtt(samples: int, loss_pct: float) -> RttStats:
    return RttStats(10.0, 10.0, 10.0, 10.0, 0.0, 10.0, loss_pct, 0.0, samples, "udp-echo")


def test_the_tails_are_the_binomial_ones() -> None:
    assert stats.binomial_at_most(20, 0, 0.1) == pytest.approx(0.9**20)
    assert stats.binomial_at_most(10, 1, 0.2) == pytest.approx(0.8**10 + 10 * 0.2 * 0.8**9)
    assert stats.binomial_at_most(5, 5, 0.3) == 1.0
    assert stats.binomial_at_most(5, 0, 0.0) == 1.0
    assert stats.binomial_at_least(10, 2, 0.2) == pytest.approx(1 - 0.8**10 - 10 * 0.2 * 0.8**9)
    assert stats.binomial_at_least(10, 0, 0.2) == 1.0


def test_twenty_silent_probes_rule_out_only_heavy_random_loss() -> None:
    twenty = IdleLoss(20, 0, "udp-echo")
    assert idle_loss.rules_out_random(twenty, 0.25)  # 0.75^20 = 0.3 %
    assert not idle_loss.rules_out_random(twenty, 0.093)  # 0.907^20 = 14 %
    assert not idle_loss.rules_out_random(None, 0.5)
    # A few lost where random loss at p would lose about as many: not ruled out.
    assert not idle_loss.rules_out_random(IdleLoss(100, 9, "udp-echo"), 0.1)


def test_the_count_that_decides() -> None:
    assert idle_loss.probes_to_decide(0.093) == 48  # 0.907^47 = 1.01 %, 0.907^48 = 0.92 %
    # Beside the RTT probe's 20, none lost, 28 more; one of them lost asks for more still.
    assert idle_loss.probes_to_decide(0.093, IdleLoss(20, 0, "udp-echo")) == 28
    assert (idle_loss.probes_to_decide(0.093, IdleLoss(20, 1, "udp-echo")) or 0) > 28
    assert idle_loss.probes_to_decide(0.3, IdleLoss(20, 0, "udp-echo")) == 0  # 0.7^20
    # Random loss at 1 % needs 459 silent probes: within the follow-up's cap of 500 (2 s at
    # 4 ms); at 0.5 % 919 are past it, so none can.
    assert idle_loss.probes_to_decide(0.01) == 459
    assert idle_loss.probes_to_decide(0.005) is None
    assert idle_loss.probes_to_decide(0.0) is None


@given(
    st.floats(min_value=0.009, max_value=0.99),
    st.integers(min_value=0, max_value=50),
    st.integers(min_value=0, max_value=3),
)
def test_the_count_that_decides_is_the_least_that_does(p: float, sent: int, lost: int) -> None:
    have = IdleLoss(sent, min(lost, sent), "udp-echo")
    n = idle_loss.probes_to_decide(p, have)

    def silent(more: int) -> IdleLoss:
        return IdleLoss(have.sent + more, have.lost, "udp-echo")

    if n is None:  # none can within the cap
        assert not idle_loss.rules_out_random(silent(idle_loss.MAX_FOLLOW_UP), p)
        return
    assert 0 <= n <= idle_loss.MAX_FOLLOW_UP
    assert idle_loss.rules_out_random(silent(n), p)
    assert n == 0 or not idle_loss.rules_out_random(silent(n - 1), p)


def test_the_rtt_probe_and_a_follow_up_add_up() -> None:
    assert idle_loss.from_rtt(_rtt(19, 5.0)) == IdleLoss(20, 1, "udp-echo")
    assert idle_loss.from_rtt(_rtt(20, 0.0)) == IdleLoss(20, 0, "udp-echo")
    path = PathEstimate(_rtt(19, 5.0), None, None, 1.0, "192.0.2.1", 5301)
    assert idle_loss.of_path(path) == IdleLoss(20, 1, "udp-echo")
    more = PathEstimate(
        _rtt(19, 5.0), None, None, 1.0, "192.0.2.1", 5301, idle_loss=IdleLoss(48, 2, "udp-echo")
    )
    assert idle_loss.of_path(more) == IdleLoss(68, 3, "udp-echo")
    assert idle_loss.of_path(None) is None
    assert idle_loss.random_share(more) == pytest.approx(3 / 68)
    assert idle_loss.random_share(None) == 0.0


@given(
    st.integers(min_value=1, max_value=5000),
    st.floats(min_value=0.0, max_value=1.0),
    st.floats(min_value=1e-6, max_value=1 - 1e-6),
)
def test_the_tails_hold_for_thousands_of_trials(n: int, share: float, p: float) -> None:
    """A stream of 2,000 packets that lost a thousand (the available-bandwidth probe at 1
    Gbit/s) once overflowed a float here."""
    k = round(share * n)
    low, high = stats.binomial_at_most(n, k, p), stats.binomial_at_least(n, k, p)
    assert 0.0 <= low <= 1.0 and 0.0 <= high <= 1.0
    # P(X <= k) + P(X >= k + 1) = 1
    assert low + stats.binomial_at_least(n, k + 1, p) == pytest.approx(1.0, abs=1e-9)
    assert StreamResult(1e9, 0.0, share, 5e8, n).overflowed(p) in (True, False)
