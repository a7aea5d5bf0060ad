"""The verdicts' confidence calibration (advice/calibration.py) and its bench
(benchmarks/bench_confidence.py): the table's arithmetic, its file, its use by the engine,
and the leave-one-out error that says what it is worth."""

from __future__ import annotations

import dataclasses
import io
import json
from pathlib import Path
from typing import Any

import pytest

from benchmarks.bench_confidence import leave_one_out, load, report, triples
from benchmarks.cli import main
from benchmarks.matrix_report import calibration as bins
from benchmarks.matrix_report import ece
from tcpwizard.advice import calibration as cal
from tcpwizard.advice.diagnose import diagnose
from tcpwizard.context import Context
from tcpwizard.exitcodes import ExitCode
from tests.test_policer_bloat_rules import policed


def _row(i: int, factor: str, conf: float, ok: bool, truth: str | None = None) -> dict[str, Any]:
    return {
        "id": f"7.{i}",
        "seed": 7,
        "index": i,
        "when": "2026-11-26 10:00 UTC",
        "truth": {"factor": factor if ok else (truth or "congestion"), "host": "path"},
        "verdict": {"factor": factor, "host": "path", "confidence": conf},
    }


def test_a_factor_right_every_time_gains_and_one_mostly_wrong_loses() -> None:
    table = cal.build([("policer", 0.9, False)] * 8 + [("policer", 0.9, True)] * 2
                      + [("window-scaling", 0.8, True)] * 10)  # fmt: skip
    # Beta posterior: (2 + 4 x 0.9) / (10 + 4) = 0.4
    assert table.records["policer"].accuracy() == pytest.approx(0.4)
    assert table.confidence("policer", 0.9) == pytest.approx(0.4)
    assert table.confidence("window-scaling", 0.8) > 0.9
    # The rule's ordering of its own situations stays; nothing reaches 0 or 1.
    assert table.confidence("policer", 0.75) < table.confidence("policer", 0.9)
    assert cal.FLOOR <= table.confidence("policer", 0.7) <= table.confidence("policer", 0.8)
    assert table.confidence("window-scaling", 0.99) <= cal.CEILING
    # A factor the matrix never named, and `unknown`, keep their rule's value.
    assert table.confidence("host-cpu", 0.7) == 0.7
    assert "unknown" not in cal.build([("unknown", 0.0, False)]).records


def test_a_rules_weak_claims_are_weighed_apart() -> None:
    """Below WEAK a rule names its factor only when nothing else explains the rate: strong
    claims right every time say nothing of those."""
    table = cal.build([("receiver-window", 0.9, True)] * 10)
    assert table.confidence("receiver-window", 0.35) == 0.35
    assert table.confidence("receiver-window", 0.55) == 0.55  # one line of evidence
    assert table.confidence("receiver-window", 0.9) > 0.9
    weak = cal.build([("congestion", 0.3, False)] * 6)
    assert weak.confidence("congestion", 0.3) < 0.3
    assert weak.confidence("congestion", 0.85) == 0.85


def test_only_the_matrixs_situation_is_weighed() -> None:
    """The matrix runs check against serve with transfers: a verdict without a peer audit
    keeps its rule's confidence."""
    ev = policed()
    with_peer = diagnose(ev).verdict
    without = diagnose(dataclasses.replace(ev, peer=None)).verdict
    assert without.basis is None
    assert (with_peer.basis is None) == (cal.table().record("policer", 0.9) is None)


def test_few_runs_keep_most_of_the_rule() -> None:
    one_miss = cal.build([("policer", 0.9, False)])
    assert 0.6 < one_miss.confidence("policer", 0.9) < 0.9


def test_the_table_round_trips_and_bad_tables_are_named(tmp_path: Path) -> None:
    table = cal.build([("congestion", 0.85, True), ("congestion", 0.9, False)], "2 runs")
    again = cal.parse(json.loads(json.dumps(table.to_json())))
    assert again.records["congestion"].runs == 2 and again.measured == "2 runs"
    assert again.confidence("congestion", 0.7) == pytest.approx(
        table.confidence("congestion", 0.7), abs=1e-3
    )
    with pytest.raises(cal.CalibrationError, match="factors"):
        cal.parse([])
    with pytest.raises(cal.CalibrationError, match="'policer'"):
        cal.parse({"factors": {"policer": {"runs": "x"}}})
    assert cal.table(tmp_path / "absent.json").records == {}


def test_the_shipped_table_weighs_the_engines_verdict() -> None:
    """The package's table (advice/calibration.json) is what a report's confidence rests
    on: the verdict carries its rule's value and the matrix's runs beside it."""
    shipped = cal.table()
    v = diagnose(policed()).verdict
    record = shipped.record("policer", 0.9)
    if record is None:
        assert v.basis is None
    else:
        assert v.basis is not None and v.basis.runs == record.runs
        assert v.confidence == round(shipped.confidence("policer", v.basis.rule_confidence), 2)


def test_leave_one_out_never_judges_a_row_by_itself() -> None:
    # Every policer verdict wrong but one: that one, judged by the others, gets a low
    # confidence; with itself in the table it would get a higher one.
    rows = [_row(i, "policer", 0.9, i == 0) for i in range(6)]
    loo = leave_one_out(rows, cal.PRIOR_RUNS)
    fitted = cal.build(triples(rows))
    assert loo[0]["verdict"]["confidence"] < fitted.confidence("policer", 0.9)
    # Honest rules stay honest: 90 % right at 0.9 keeps its calibration error small.
    good = [_row(i, "window-scaling", 0.9, i % 10 != 0) for i in range(40)]
    assert ece(bins(leave_one_out(good, cal.PRIOR_RUNS))) == pytest.approx(0.0, abs=0.05)


def test_the_bench_prints_the_table_and_writes_it(tmp_path: Path) -> None:
    rows = [_row(i, "policer", 0.9, i < 3) for i in range(10)]
    rows += [_row(10 + i, "receiver-window", 0.75, True) for i in range(5)]
    store = tmp_path / "matrix.jsonl"
    store.write_text("".join(json.dumps(r) + "\n" for r in rows))
    loaded = load([store])
    text = report(loaded, cal.build(triples(loaded)))
    assert "| policer | 10 | 3 | 0.90 | 0.47 |" in text
    assert "leave-one-out, prior 4 runs" in text
    out, err = io.StringIO(), io.StringIO()
    target = tmp_path / "calibration.json"
    code = main(["confidence", str(store), "--write", "--table", str(target)],
                Context(stdout=out, stderr=err))  # fmt: skip
    assert code == ExitCode.OK, err.getvalue()
    assert cal.parse(json.loads(target.read_text())).records["policer"].right == 3


def test_bad_rows_are_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json\n")
    err = io.StringIO()
    code = main(["confidence", str(bad)], Context(stdout=io.StringIO(), stderr=err))
    assert code == ExitCode.USAGE
    assert err.getvalue().count("\n") == 1 and "line 1 is not a matrix row" in err.getvalue()
