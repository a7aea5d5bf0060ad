"""Exporter scheduling and target parsing (the scrape over loopback is in test_exporter_e2e)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from tcpwizard.exitcodes import UsageError
from tcpwizard.exporter import Exporter, Target, parse_targets


def test_parse_targets() -> None:
    ts = parse_targets("# fleet\ndtn1.example:5301 site=lanl\n[fd00::2]:7000\nfd00::3\nhost\n")
    assert ts[0] == Target("dtn1.example", 5301, (("site", "lanl"),))
    assert (ts[1].host, ts[1].port) == ("fd00::2", 7000)
    assert (ts[2].host, ts[2].port) == ("fd00::3", None)
    assert ts[3].name == "host"


@pytest.mark.parametrize(
    "text",
    [
        "",
        "# only\n",
        "h:99999",
        "h bad-label",
        "[fd00::zz]:1",
        "h target=x",
        "h __name__=x",
        "h mode=prod",
        "h:1\nh:1\n",
    ],
)
def test_bad_targets(text: str) -> None:
    with pytest.raises(UsageError):
        parse_targets(text)


def test_checks_are_spread_over_the_interval() -> None:
    ex = Exporter([Target(f"h{i}", None) for i in range(4)], 900.0, lambda t: {})
    starts = [t for t, _ in ex.schedule(100.0)]
    assert starts == [100.0, 325.0, 550.0, 775.0]


def test_a_crashing_check_is_down_not_fatal() -> None:
    def check(t: Target) -> Mapping[str, Any]:
        raise ConnectionRefusedError("refused")

    ex = Exporter([Target("gone", 1)], 60.0, check)
    ex.run_one(ex.targets[0])
    fams = {f.name: f for f in ex.collect()}
    assert fams["tcpwizard_up"].samples[0].value == 0.0


def test_an_overrunning_check_does_not_leave_the_schedule_behind() -> None:
    now = [0.0]
    starts: list[float] = []

    def check(t: Target) -> Mapping[str, Any]:
        starts.append(now[0])
        if len(starts) == 1:
            now[0] += 35.0  # one check far longer than the interval
        if len(starts) == 4:
            ex.stop()
        return {"exit_code": 0}

    def fake_wait(timeout: float | None = None) -> bool:
        now[0] += timeout or 0.0
        return ex._stop.is_set()

    ex = Exporter([Target("h", None)], 10.0, check, clock=lambda: now[0])
    ex._stop.wait = fake_wait  # type: ignore[method-assign]
    ex.loop()
    # No burst of back-to-back checks to "catch up" on missed slots: the spacing resumes.
    assert starts == [0.0, 35.0, 45.0, 55.0]
