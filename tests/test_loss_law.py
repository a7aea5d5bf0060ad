"""The loss law's two ends: the Mathis bound (no timeouts) and Padhye et al.'s floor
(timeouts included), and the band between them where loss holds a sender's rate."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tcpwizard.advice.window_law import (
    LOSS_BOUND_MARGIN,
    held_by_loss,
    mathis_mbps,
    timeout_floor_mbps,
)

MSS = 1448


def test_at_rare_loss_the_floor_is_the_bound_with_an_ack_per_two_segments() -> None:
    """No timeouts to speak of: sqrt(2bp/3) with b = 2 against Mathis' sqrt(2p/3), a ratio
    of 1/sqrt(2)."""
    floor = timeout_floor_mbps(MSS, 100.0, 1e-6)
    bound = mathis_mbps(MSS, 100.0, 1e-6)
    assert floor is not None and bound is not None
    assert floor / bound == pytest.approx(1 / math.sqrt(2), rel=0.01)


def test_on_a_short_lossy_path_timeouts_take_most_of_the_rate() -> None:
    """3 ms, 5 %: a 200 ms timeout costs 67 round trips, and one comes every few windows."""
    floor = timeout_floor_mbps(MSS, 3.0, 0.05)
    bound = mathis_mbps(MSS, 3.0, 0.05)
    assert floor is not None and bound is not None
    assert floor < 0.1 * bound


@given(
    rtt=st.floats(0.5, 500.0),
    loss=st.floats(1e-7, 0.3),
    more=st.floats(1.01, 10.0),
)
def test_the_floor_falls_with_loss_and_stays_under_the_bound(
    rtt: float, loss: float, more: float
) -> None:
    floor = timeout_floor_mbps(MSS, rtt, loss)
    bound = mathis_mbps(MSS, rtt, loss)
    assert floor is not None and bound is not None and 0 < floor < bound
    worse = timeout_floor_mbps(MSS, rtt, min(1.0, loss * more))
    assert worse is not None and worse < floor


@pytest.mark.parametrize("cc", ["reno", "cubic"])
def test_loss_holds_a_rate_between_its_floor_and_its_bound(cc: str) -> None:
    rtt, loss = 20.0, 0.002
    bound = mathis_mbps(MSS, rtt, loss, cc)
    floor = timeout_floor_mbps(MSS, rtt, loss)
    assert bound is not None and floor is not None
    assert held_by_loss(bound, MSS, rtt, loss, cc)
    assert held_by_loss(floor, MSS, rtt, loss, cc)
    assert not held_by_loss(1.01 * LOSS_BOUND_MARGIN * bound, MSS, rtt, loss, cc)
    assert not held_by_loss(0.99 * min(floor, bound) / LOSS_BOUND_MARGIN, MSS, rtt, loss, cc)
    assert not held_by_loss(bound, MSS, rtt, 0.0, cc)
