"""`python -m benchmarks`: the benches run from a checkout, by name, with the product's rules
for bad input (one line, exit 64 while parsing; 77 without root, before any lab is built)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.cli import MATRIX, OWN_ARGUMENTS, OWN_PARSER, main
from tcpwizard.exitcodes import ExitCode

ROOT = Path(__file__).resolve().parent.parent


def _bench(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "benchmarks", *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_a_bad_value_is_refused_in_one_line_from_the_checkout() -> None:
    proc = _bench("paper", "--rtt", "0")
    assert proc.returncode == ExitCode.USAGE
    assert proc.stdout == ""
    assert proc.stderr.startswith("benchmarks: error: paper: argument --rtt: must be a finite")
    assert proc.stderr.count("\n") == 1


def test_every_bench_is_listed_by_name() -> None:
    proc = _bench("--help")
    assert proc.returncode == 0
    for name in (*MATRIX, *OWN_PARSER, *OWN_ARGUMENTS):
        assert name in proc.stdout


def test_a_bench_with_its_own_arguments_shows_its_own_help() -> None:
    proc = _bench("host", "--help")
    assert proc.returncode == 0
    assert proc.stdout.startswith("usage: python -m benchmarks host")
    assert "--causes" in proc.stdout


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        ([], "the following arguments are required: BENCH"),
        (["gigabit"], "invalid choice: 'gigabit'"),
        (["causes", "--rtt", "-5ms"], "causes: argument --rtt: must be"),
        (["drs-targets", "--loss", "abc"], "--loss: expected a percentage, not 'abc'"),
        (["drs-targets", "--loss", "50%"], "--loss: must be from 0 to under 50 %"),
        (["paper", "--loss", "1"], "unrecognized arguments: --loss 1"),
    ],
)
def test_usage_errors(argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == ExitCode.USAGE
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1


def test_without_root_no_lab_is_built(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    for name in MATRIX:
        assert main([name, "--quick", "--out", "/nonexistent"]) == ExitCode.NO_PERMISSION
        err = capsys.readouterr().err
        assert err.startswith("benchmarks: error:") and "root" in err and err.count("\n") == 1
