"""A check's time, stage by stage, against the floor its measurements need (wizard/timing.py)."""

from __future__ import annotations

import dataclasses

from tcpwizard.measure.engine.steady import slow_start_rounds
from tcpwizard.timing import StageClock, check_timing, floor_s
from tests.model_builders import mode, path, transfer_of


class _Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_stages_add_up_to_the_whole_check() -> None:
    c = _Clock()
    clock = StageClock(c)
    for stage, spent in (("audit", 0.2), ("probe", 0.9), ("transfer", 5.0), ("probe", 2.0)):
        clock.mark(stage)
        c.t += spent
    total, stages = clock.stages()
    assert round(total, 6) == 8.1
    assert dict(stages) == {"audit": 0.2, "probe": 2.9, "transfer": 5.0}


def test_slow_start_counts_doublings_from_the_initial_window() -> None:
    assert slow_start_rounds(14_480) == 1  # the initial window already: the full-pipe round
    assert slow_start_rounds(28_960) == 2
    assert slow_start_rounds(1_250_000) == 8  # 863 segments: 7 doublings from 10, and one


def test_floor_counts_round_trips_of_what_was_measured() -> None:
    p = path(100, 100)  # 100 ms x 100 Mbit/s: a BDP of 1.25 MB
    up, down = mode(90.0), mode(90.0, direction="down")
    serial = floor_s(p, dataclasses.replace(transfer_of(up), modes=(up, down)), at_once=False)
    both = floor_s(p, dataclasses.replace(transfer_of(up), modes=(up, down)), at_once=True)
    assert serial is not None and both is not None
    # 2 to reach, 3 to probe, per transfer 1 open + 8 slow start + 3 steady + 1 report
    assert round(serial[0], 3) == round((2 + 3 + 2 * 13) * 0.1, 3)
    assert round(both[0], 3) == round((2 + 3 + 13) * 0.1, 3)  # both ways at once count once
    assert "at 100.0 ms" in serial[1]
    assert floor_s(None, None, at_once=False) is None


def test_the_report_says_how_far_over_the_floor_it_ran() -> None:
    c = _Clock()
    clock = StageClock(c)
    clock.mark("probe")
    c.t += 6.2
    t = check_timing(clock, path(100, 100), None, at_once=False)
    assert t.floor_s == 0.5 and t.over_floor is not None and round(t.over_floor, 1) == 12.4
