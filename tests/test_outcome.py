"""The one exit-code decision (`outcome.exit_code`) against the meanings the README and the
man page give the codes, and the format registry behind the CLI's `--format` choices."""

from __future__ import annotations

import dataclasses
import io
from typing import TextIO

import pytest

from tcpwizard.advice.path_advice import path_advice
from tcpwizard.cli import build_parser
from tcpwizard.context import Context
from tcpwizard.documents import PathDocument
from tcpwizard.exitcodes import ExitCode
from tcpwizard.main import main
from tcpwizard.outcome import Outcome, Thresholds, exit_code
from tcpwizard.output import registry
from tcpwizard.output.document import Format, RenderOptions
from tests import path_data

OK, WARN, CRIT, UNKNOWN = ExitCode.OK, ExitCode.WARNING, ExitCode.CRITICAL, ExitCode.UNKNOWN


@pytest.mark.parametrize(
    ("outcome", "code"),
    [
        (Outcome(), OK),
        (Outcome(limits=("path-capacity",), findings=("crit",)), OK),  # the path is the limit
        (Outcome(limits=("receiver-window",)), WARN),  # a named limit, no gap measured
        (Outcome(limits=("receiver-window",), current_mbps=51.0, tuned_mbps=100.0), WARN),
        (Outcome(limits=("receiver-window",), current_mbps=50.0, tuned_mbps=100.0), CRIT),
        (Outcome(limits=("unknown",), findings=("ok", "warn")), WARN),  # the audit decides
        (Outcome(limits=("unknown",), findings=("crit",)), CRIT),
        (Outcome(limits=("unknown",), unmeasured=True), WARN),  # a prediction is never OK
        (Outcome(limits=("path-capacity", "unknown")), OK),  # conns: nothing fixable
        (Outcome(limits=("path-capacity", "application")), WARN),
        (Outcome(incomplete=True, limits=("path-capacity",)), UNKNOWN),
        (Outcome(pending=True), WARN),  # a dry run leaves changes to make
        (Outcome(given=ExitCode.USAGE), ExitCode.USAGE),  # a failure keeps its own code
        (Outcome(given=OK, parts=(CRIT,)), CRIT),  # a PMTU black hole on the hops
        (Outcome(given=UNKNOWN, parts=(CRIT,)), CRIT),  # ... explains a failed transfer
        (Outcome(given=UNKNOWN, parts=(WARN,)), UNKNOWN),
        (Outcome(given=CRIT, parts=(WARN, OK)), CRIT),
    ],
)
def test_exit_code_meanings(outcome: Outcome, code: ExitCode) -> None:
    assert exit_code(outcome) == code


def test_thresholds_move_a_verdict_never_an_unknown() -> None:
    slow = Outcome(given=OK, current_mbps=10.0, tuned_mbps=100.0)
    assert exit_code(slow, Thresholds.parse("20mbit", None)) == WARN
    assert exit_code(slow, Thresholds.parse(None, "gap:90%")) == CRIT
    assert exit_code(slow, Thresholds.parse(None, "5mbit")) == OK
    assert exit_code(
        dataclasses.replace(slow, given=UNKNOWN), Thresholds.parse(None, "gap:1%")
    ) == (UNKNOWN)


@pytest.mark.parametrize("blackhole", [False, True])
def test_path_document_agrees_with_the_hop_advice(blackhole: bool) -> None:
    hops = path_data.path(blackhole=blackhole)
    adv = path_advice(hops)
    assert PathDocument.of(hops, adv).exit_code == adv.exit_code
    unreached = dataclasses.replace(hops, reached=False)
    assert PathDocument.of(unreached, path_advice(unreached)).exit_code == UNKNOWN


def _choices(command: str) -> tuple[str, ...]:
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    parser = sub.choices[command]  # type: ignore[index]
    fmt = next(a for a in parser._actions if a.dest == "format" and a.choices)
    return tuple(fmt.choices)


def test_format_choices_come_from_the_registry() -> None:
    assert _choices("check") == ("text", "json", "prometheus", "nagios")
    for command in ("probe", "transfer", "calc", "history", "fix", "path", "conns"):
        assert _choices(command) == ("text", "json"), command


def test_a_format_a_command_cannot_print_is_a_usage_error() -> None:
    err = io.StringIO()
    argv = ["calc", "--rtt", "50ms", "--bandwidth", "1gbit", "--format", "prometheus"]
    code = main(argv, Context(stdout=io.StringIO(), stderr=err))
    assert code == ExitCode.USAGE and "invalid choice: 'prometheus'" in err.getvalue()


def test_a_new_format_is_one_registration(monkeypatch: pytest.MonkeyPatch) -> None:
    """A format registered for calc alone becomes a choice of calc and of nothing else."""

    def render(doc: object, stream: TextIO, opts: RenderOptions) -> None:
        stream.write("calc as csv\n")

    csv = Format("csv", {"calc": render})
    monkeypatch.setitem(registry.FORMATS, "csv", csv)
    assert _choices("calc") == ("text", "json", "csv")
    assert "csv" not in _choices("probe")
    out = io.StringIO()
    code = main(
        ["calc", "--rtt", "50ms", "--bandwidth", "1gbit", "--format", "csv"], Context(stdout=out)
    )
    assert (code, out.getvalue()) == (OK, "calc as csv\n")
