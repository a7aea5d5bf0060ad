"""When `path` has probed enough to place loss (measure/probes/hop_settle.py): the
decisions on hand-made tallies, and a simulation of the whole loop against the must-show
(a few percent of loss from the third of five hops, placed at the defaults)."""

from __future__ import annotations

import random

import pytest

from tcpwizard.measure.probes.hop_model import HopCounts, loss_start
from tcpwizard.measure.probes.hop_settle import loss_floor, probes_wanted, stop_level
from tcpwizard.measure.probes.hops import SETTLE_LOOK_S


def hop(ttl: int, sent: int, lost: int) -> HopCounts:
    got = sent - lost
    return HopCounts(ttl, sent, (10.0 + ttl,) * got, (f"10.0.0.{ttl}",) * got, False, 1.0)


LEVEL = 0.01


def test_the_floor_is_what_the_budget_could_place() -> None:
    level = stop_level(2.0, 30.0)  # 1 % over the 15 looks of 2 s in 30 s
    assert level == pytest.approx(0.01 / 15)
    assert loss_floor(0.02, 30.0, level) == pytest.approx(0.0146, abs=1e-4)
    assert loss_floor(0.5, 1.0, level) == 1.0


def test_a_clean_path_is_probed_at_its_last_hop_until_the_floor_is_ruled_out() -> None:
    floor = 0.01
    few = [hop(t, 10, 0) for t in range(1, 6)]
    assert probes_wanted(few, floor, LEVEL) == (5,)
    enough = [*few[:-1], hop(5, 460, 0)]  # none lost where 1 % would lose some but at 1 %
    assert probes_wanted(enough, floor, LEVEL) == ()


def test_a_few_lost_probes_ask_for_rounds_over_every_hop() -> None:
    tally = [hop(1, 10, 0), hop(2, 10, 0), hop(3, 10, 1), hop(4, 10, 0), hop(5, 10, 1)]
    assert loss_start([(c.sent, c.sent - len(c.rtts)) for c in tally])[0] is None
    assert probes_wanted(tally, 0.01, LEVEL) == (1, 2, 3, 4, 5)


def test_loss_is_placed_once_the_hop_before_it_would_have_shown_it() -> None:
    # 4 % from hop 3: named, but none lost in hop 2's 20 probes is likely at 4 % (44 %)
    thin = [hop(1, 20, 0), hop(2, 20, 0), hop(3, 150, 6), hop(4, 150, 6), hop(5, 150, 7)]
    assert probes_wanted(thin, 0.01, LEVEL) == (2, 3)  # the hop before and the start
    # none lost in 150 at 4 % has a chance of 0.2 %: hop 2 is cleaner, loss starts at 3
    placed = [hop(1, 150, 0), hop(2, 150, 0), hop(3, 150, 6), hop(4, 150, 6), hop(5, 150, 7)]
    assert probes_wanted(placed, 0.01, LEVEL) == ()
    # named at the last hop, whose 300 probes saw it; the 10 before it cannot say cleaner
    last = [hop(1, 10, 0), hop(2, 10, 0), hop(3, 10, 0), hop(4, 10, 0), hop(5, 300, 9)]
    assert probes_wanted(last, 0.01, LEVEL) == (4, 5)
    # named at hop 1 by one pooled rate over hops with few probes: hop 1 must show it
    pooled = [hop(1, 10, 0), hop(2, 10, 1), hop(3, 10, 1), hop(4, 10, 1)]
    assert loss_start([(c.sent, c.sent - len(c.rtts)) for c in pooled])[0] == 0
    assert probes_wanted(pooled, 0.01, LEVEL) == (1,)


def test_loss_from_the_first_hop_is_placed_at_once() -> None:
    tally = [hop(1, 100, 5), hop(2, 100, 4), hop(3, 100, 6)]
    assert probes_wanted(tally, 0.01, LEVEL) == ()


def test_nothing_answering_asks_for_nothing() -> None:
    assert probes_wanted([HopCounts(1, 10, (), (), False)], 0.01, LEVEL) == ()


def _simulate(rng: random.Random, loss: float, start: int, hops: int = 5) -> int | None:
    """`path`'s loop at its defaults (10 rounds, 20 ms, 30 s) on a path losing `loss` from
    hop `start` on: the hop it names, with every probe it sends counted against the budget."""
    sent, lost = [0] * hops, [0] * hops
    budget = int(30.0 / 0.02)

    def probe(i: int) -> None:
        sent[i] += 1
        lost[i] += rng.random() < (loss if i + 1 >= start else 0.0)

    for _ in range(10):
        for i in range(hops):
            probe(i)
    level = stop_level(SETTLE_LOOK_S, 30.0)
    floor = loss_floor(0.02, 30.0, level)
    per_look = int(SETTLE_LOOK_S / 0.02)  # probes between two looks, as hops.py sends them
    while sum(sent) < budget:
        ttls = probes_wanted([hop(i + 1, sent[i], lost[i]) for i in range(hops)], floor, level)
        if not ttls:
            break
        for k in range(per_look):
            probe(ttls[k % len(ttls)] - 1)
    named, _ = loss_start(list(zip(sent, lost, strict=True)))
    return None if named is None else named + 1


def test_a_few_percent_from_the_third_hop_is_placed_in_nine_of_ten() -> None:
    rng = random.Random(20261128)
    for loss in (0.02, 0.03, 0.04):
        named = [_simulate(rng, loss, 3) for _ in range(200)]
        assert named.count(3) >= 0.9 * len(named), (loss, named.count(3))


def test_a_clean_path_names_no_loss() -> None:
    rng = random.Random(20261129)
    assert all(_simulate(rng, 0.0, 3) is None for _ in range(50))


def test_path_settles_unless_the_user_asked_for_a_count() -> None:
    from tcpwizard.cli import build_parser
    from tcpwizard.commands.path import options_from_args

    default = options_from_args(build_parser().parse_args(["path", "h.example"]))
    assert (default.count, default.settle) == (10, True)
    exact = options_from_args(build_parser().parse_args(["path", "h.example", "--count", "10"]))
    assert (exact.count, exact.settle) == (10, False)
