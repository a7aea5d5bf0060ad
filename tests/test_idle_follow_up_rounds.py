"""The idle follow-up in rounds (wizard/run.py idle_follow_ups): a follow-up that lost a
probe on a path with some random loss beside its policer gets one more, planned for losing
at the share it lost (advice/idle_loss.py probes_to_plan); never a third, never in
`--quick`, never past the follow-ups' budget."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from tcpwizard.advice import idle_follow_up, idle_loss
from tcpwizard.measure.model import IdleLoss, TransferResult
from tcpwizard.run import CheckRequest, idle_follow_ups
from tests.model_builders import path
from tests.test_policer_bloat_rules import policed

FULL, QUICK = CheckRequest("198.51.100.7"), CheckRequest("198.51.100.7", quick=True)


def _policed() -> TransferResult:
    t = policed().transfer  # BBR at a fifth of the line, 17 % of its segments lost
    assert t is not None
    return t


def _echo(losses: list[int], asked: list[int]) -> Callable[[int, str], IdleLoss]:
    def echo(count: int, why: str) -> IdleLoss:
        asked.append(count)
        return IdleLoss(count, min(count, losses[len(asked) - 1]), "udp-echo")

    return echo


def test_a_follow_up_that_lost_one_gets_one_more_round_planned_for_losing() -> None:
    asked: list[int] = []
    got, notes = idle_follow_ups(FULL, path(40.0, 100), _policed(), _echo([1, 0], asked))
    assert len(asked) == 2 and len(notes) == 2, (asked, notes)
    assert got.idle_loss == IdleLoss(sum(asked), 1, "udp-echo")
    # The second round is what the counts after the first plan (probes_to_plan).
    after_first = dataclasses.replace(path(40.0, 100), idle_loss=IdleLoss(asked[0], 1, "udp-echo"))
    assert asked[1] == idle_follow_up.wanted(after_first, _policed(), again=True)[0] > 0
    # The first round is planned for none of its probes lost.
    assert asked[0] == idle_follow_up.wanted(path(40.0, 100), _policed())[0]


def test_a_follow_up_that_decided_is_the_only_one() -> None:
    asked: list[int] = []
    got, notes = idle_follow_ups(FULL, path(40.0, 100), _policed(), _echo([0, 0], asked))
    assert len(asked) == 1 and got.idle_loss == IdleLoss(asked[0], 0, "udp-echo")
    assert len(notes) == 1


def test_quick_sends_one_round_at_most() -> None:
    asked: list[int] = []
    idle_follow_ups(QUICK, path(40.0, 100), _policed(), _echo([1, 0], asked))
    assert len(asked) <= 1


def test_the_plan_counts_the_losses_the_probes_have_shown() -> None:
    none_lost = IdleLoss(20, 0, "udp-echo")
    assert idle_loss.probes_to_plan(0.113, none_lost) == idle_loss.probes_to_decide(
        0.113, none_lost
    )
    one_lost = IdleLoss(39, 1, "udp-echo")  # matrix 20261231.12: the follow-up lost one
    planned = idle_loss.probes_to_plan(0.113, one_lost)
    silent = idle_loss.probes_to_decide(0.113, one_lost)
    assert planned is not None and silent is not None and planned > silent
