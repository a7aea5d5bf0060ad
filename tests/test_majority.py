"""The majority-of-tries judgement of measurement tests (tests/majority.py), run by pytest
itself on tests whose tries follow a script."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.majority import decided

ROOT = Path(__file__).resolve().parent.parent

SCRIPTED = """
import json, pathlib, pytest

SCRIPT = {script!r}
COUNT = pathlib.Path(__file__).with_suffix(".count")

@pytest.mark.measurement
def test_scripted() -> None:
    n = int(COUNT.read_text()) if COUNT.exists() else 0
    COUNT.write_text(str(n + 1))
    assert SCRIPT[n] == "P", f"try {{n + 1}} fails"
"""


@pytest.mark.parametrize(
    ("script", "passed", "tries"),
    [
        ("P", True, 1),
        ("FPP", True, 3),
        ("FPF", False, 3),
        ("FF", False, 2),
        ("PFF", True, 1),  # a first pass decides: a majority of the one try it needed
    ],
)
def test_tries_until_a_majority(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    script: str,
    passed: bool,
    tries: int,
) -> None:
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    pytester.makeconftest('pytest_plugins = ["tests.majority"]')
    path = pytester.makepyfile(test_scripted=SCRIPTED.format(script=script))
    result = pytester.runpytest_subprocess("-p", "no:randomly", "-p", "no:cacheprovider")
    assert path.with_suffix(".count").read_text() == str(tries)
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed", 0) == int(passed)
    assert outcomes.get("failed", 0) == int(not passed)
    if tries > 1:
        result.stdout.fnmatch_lines(["*R*"])


def test_decided() -> None:
    assert decided([True]) is True
    assert decided([False]) is None
    assert decided([False, True]) is None
    assert decided([False, False]) is False
    assert decided([False, True, True]) is True
    assert decided([False, True, False]) is False


def test_a_tests_own_tries_stop_when_two_agree() -> None:
    from tests.majority import until_decided

    def runs(script: str) -> int:
        it = iter(script)
        return len(until_decided(lambda: next(it), lambda x: x == "P"))

    assert runs("PPF") == 2 and runs("FFP") == 2
    assert runs("PFP") == 3 and runs("FPF") == 3
