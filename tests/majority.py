"""pytest plugin: a measurement test is judged by the majority of its tries.

Tests over real TCP (the lab, network namespaces) measure on a machine other programs share
(a CI runner's neighbours, a hypervisor's steal). One try that passes is a majority of one;
a try that fails is not the verdict yet: the test runs again until one outcome holds a
majority of MEASUREMENT_TRIES (2 of 3). So a test that fails once and then passes twice
passes, and one that passes once in three fails. Tries that did not decide are shown as R
in pytest's progress line (pytest-rerunfailures' status), and the final report lists every
try's outcome.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

import pytest
from _pytest.reports import TestReport
from _pytest.runner import runtestprotocol

MEASUREMENT_TRIES = 3
T = TypeVar("T")
MARKER = "measurement"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}: judged by the majority of up to {MEASUREMENT_TRIES} tries (tests/majority.py)",
    )


def decided(outcomes: Sequence[bool], tries: int = MEASUREMENT_TRIES) -> bool | None:
    """The verdict of the tries so far: True/False once one outcome holds a majority of
    `tries` (a first pass is a majority of the one try it needed), None until then."""
    if len(outcomes) == 1 and outcomes[0]:
        return True
    passes = sum(outcomes)
    fails = len(outcomes) - passes
    if 2 * passes > tries:
        return True
    if 2 * fails > tries:
        return False
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> bool | None:
    if item.get_closest_marker(MARKER) is None:
        return None
    outcomes: list[bool] = []
    verdict: bool | None = None
    while verdict is None:
        item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
        reports = runtestprotocol(item, nextitem=nextitem, log=False)
        outcomes.append(not any(r.failed for r in reports))
        verdict = decided(outcomes)
        if verdict is None:
            _log_undecided(item, reports)
            _forget_failed_setup(item)
    tries = ", ".join("passed" if ok else "failed" for ok in outcomes)
    for report in reports:
        if len(outcomes) > 1:
            report.sections.append(("tries", f"{tries}: judged by the majority"))
        item.ihook.pytest_runtest_logreport(report=report)
    item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
    return True


def _log_undecided(item: pytest.Item, reports: Sequence[TestReport]) -> None:
    """An undecided try's failure is shown as a rerun; its passes are not reported (the
    deciding try's reports stand for the test)."""
    for report in reports:
        if report.failed:
            report.outcome = "rerun"  # type: ignore[assignment]
            item.ihook.pytest_runtest_logreport(report=report)


def _forget_failed_setup(item: pytest.Item) -> None:
    """A fixture that failed in this try is built again in the next, not replayed from
    its cached error."""
    info = getattr(item, "_fixtureinfo", None)
    for defs in getattr(info, "name2fixturedefs", {}).values():
        for fixturedef in defs:
            cached = getattr(fixturedef, "cached_result", None)
            if cached is not None and cached[2] is not None:
                fixturedef.cached_result = None
                finalizers = getattr(fixturedef, "_finalizers", None)
                if finalizers is not None:
                    finalizers.clear()
    stack = item.session._setupstate.stack
    if item in stack:
        del stack[item]


def until_decided(attempt: Callable[[], T], ok: Callable[[T], bool], tries: int = 3) -> list[T]:
    """A test's own tries of a measurement: `attempt` runs until one outcome holds a
    majority of `tries` (2 right or 2 wrong of 3), not the full count when two agree."""
    out: list[T] = []
    need = tries // 2 + 1
    while len(out) < tries:
        out.append(attempt())
        right = sum(1 for x in out if ok(x))
        if right >= need or len(out) - right >= need:
            break
    return out
