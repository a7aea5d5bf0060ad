"""Every format of the registry against every document kind it renders, each against a
committed golden file, from constructed results (no network, fixed names and times): a
check (measured, predicted, policed, middlebox, with hops), probe, transfer, calc,
history, the buffer advice, a fix's plan, apply and rollback, path, conns, a capture, and
the error document. The exit code each document carries is the one `emit` returns.
Regenerate on purpose with `TCPWIZARD_UPDATE_GOLDEN=1 pytest tests/test_golden_documents.py`."""

from __future__ import annotations

import dataclasses
import io
import json
import os
from collections.abc import Callable
from pathlib import Path

import jsonschema
import pytest

from tcpwizard.advice.apply import Applied, ApplyReport, Skipped, apply_plan, make_plan, rollback
from tcpwizard.advice.path_advice import path_advice
from tcpwizard.buffer_advice import buffer_advice
from tcpwizard.checks.plan import buffer_plan
from tcpwizard.commands.probe import judged_probe
from tcpwizard.documents import (
    BufferDocument,
    CalcDocument,
    CaptureDocument,
    ErrorDocument,
    FixPlanDocument,
    FixResultDocument,
    HistoryDocument,
    PathDocument,
    ProbeDocument,
    TransferDocument,
)
from tcpwizard.exitcodes import ExitCode
from tcpwizard.history import HistoryRow
from tcpwizard.output import registry
from tcpwizard.output.document import Document, RenderOptions
from tcpwizard.timing import CheckTiming, floor_s
from tests import conns_data, path_data, tui_data
from tests import test_capture_units as capture_cases
from tests import test_golden_formats as check_cases
from tests.fakes import make_tree
from tests.model_builders import host_audit

ROOT = Path(__file__).parent.parent
GOLDEN = Path(__file__).parent / "golden"
EXT = {"text": "txt", "json": "json", "prometheus": "prom", "nagios": "nagios"}
HOST = "dtn1.example"
DAY = 86_400.0
T0 = 1_790_000_000.0  # 2026-09-21 14:13 UTC: fixed, so the tables do not move
SCHEMAS = {
    "check": "report.schema.json",
    "probe": "report.schema.json",
    "error": "report.schema.json",
    "path": "path.schema.json",
    "conns": "conns.schema.json",
    "capture": "capture.schema.json",
}


def _rows() -> tuple[HistoryRow, ...]:
    """Three checks a day apart: a small receive window, then the fix, then a busy path."""
    return (
        HistoryRow(1, T0, HOST, 50.2, 98.1, 10.5, "receiver-window", 2, 613_000.0),
        HistoryRow(2, T0 + DAY, HOST, 50.1, 97.6, 93.8, "path-capacity", 0, 610_000.0),
        HistoryRow(3, T0 + 2 * DAY, HOST, 61.4, None, 71.0, "congestion", 1, None),
    )


def _probe(tmp: Path) -> ProbeDocument:
    local = host_audit(tmp, "local", tui_data.SMALL_RMEM)
    est = tui_data.path_estimate()
    return ProbeDocument(HOST, est, judged_probe(HOST, est, local))


def _transfer(tmp: Path) -> TransferDocument:
    result = tui_data.report(tmp).transfer
    assert result is not None
    return TransferDocument.of(HOST, 5301, result)


def _fix_plan(tmp: Path) -> FixPlanDocument:
    tree = make_tree(tmp / "sys", tui_data.SMALL_RMEM)
    fixes = [f for f in tui_data.report(tmp).fixes if f.host == "local"]
    return FixPlanDocument.of(make_plan(fixes, str(tree), str(tmp / "sysctl.d")), dry_run=True)


def _applied(tmp: Path) -> tuple[str, str, str]:
    tree = make_tree(tmp / "sys", tui_data.SMALL_RMEM)
    fixes = [f for f in tui_data.report(tmp).fixes if f.host == "local"]
    conf, state = str(tmp / "sysctl.d"), str(tmp / "state")
    apply_plan(make_plan(fixes, str(tree), conf), str(tree), state)
    return str(tree), conf, state


def _fix_nothing(tmp: Path) -> FixPlanDocument:
    """The same fixes planned again after they were applied: nothing left to change."""
    tree, conf, _ = _applied(tmp)
    fixes = [f for f in tui_data.report(tmp).fixes if f.host == "local"]
    return FixPlanDocument.of(make_plan(fixes, tree, conf), dry_run=True)


def _fix_apply(tmp: Path) -> FixResultDocument:
    tree = make_tree(tmp / "sys", tui_data.SMALL_RMEM)
    fixes = [f for f in tui_data.report(tmp).fixes if f.host == "local"]
    plan = make_plan(fixes, str(tree), str(tmp / "sysctl.d"))
    return FixResultDocument.of(apply_plan(plan, str(tree), str(tmp / "state")))


def _fix_partial(tmp: Path) -> FixResultDocument:
    """An apply that had to leave one change out: pending, so a warning."""
    report = ApplyReport(
        (Applied("rmem_max", "net.core.rmem_max", "212992", "33554432"),),
        (Skipped("bbr", "net.ipv4.tcp_congestion_control", "tcp_bbr is not loaded"),),
        "/var/lib/tcpwizard/fix-backup.json",
    )
    return FixResultDocument.of(report)


def _fix_rollback(tmp: Path) -> FixResultDocument:
    tree, conf, state = _applied(tmp)
    return FixResultDocument.of(rollback(state, tree, conf))


def _path(blackhole: bool) -> Callable[[Path], PathDocument]:
    def build(tmp: Path) -> PathDocument:
        hops = path_data.path(blackhole=blackhole)
        return PathDocument.of(hops, path_advice(hops))

    return build


def _path_middlebox(tmp: Path) -> PathDocument:
    hops = path_data.rewritten()
    return PathDocument.of(hops, path_advice(hops))


def _check_hops(tmp: Path) -> Document:
    hops = path_data.path(blackhole=True)
    return dataclasses.replace(tui_data.report(tmp), hops=hops, hops_advice=path_advice(hops))


def _timed(tmp: Path) -> Document:
    report = check_cases.measured(tmp)
    floor = floor_s(report.path, report.transfer, at_once=False)
    assert floor is not None
    stages = (("audit", 0.2), ("peer", 0.2), ("probe", 0.86), ("transfer", 6.9), ("diagnose", 0.02))
    return dataclasses.replace(report, timing=CheckTiming(8.18, stages, floor[0], floor[1]))


def _error(tmp: Path) -> ErrorDocument:
    why = f"{HOST} did not answer any probe: connection refused"
    return ErrorDocument(HOST, 5301, why, ExitCode.UNKNOWN, f"tcpwizard: error: {why}")


@dataclasses.dataclass(frozen=True)
class Case:
    kind: str
    build: Callable[[Path], Document]
    code: ExitCode  # what the result means (README, "Exit codes")


def _buffer(tmp: Path) -> BufferDocument:
    return BufferDocument.of(HOST, buffer_advice(HOST, _rows(), 8 << 30, T0 + 3 * DAY))


# Golden file name -> the case.
CASES: dict[str, Case] = {
    "measured": Case("check", check_cases.measured, ExitCode.CRITICAL),
    "predicted": Case("check", check_cases.predicted, ExitCode.UNKNOWN),
    "policed": Case("check", check_cases.policed, ExitCode.WARNING),
    "middlebox": Case("check", check_cases.middlebox, ExitCode.CRITICAL),
    "shared-way-back": Case("check", check_cases.shared_way_back, ExitCode.WARNING),
    "check-hops": Case("check", _check_hops, ExitCode.CRITICAL),
    "check-timed": Case("check", _timed, ExitCode.CRITICAL),
    # No transfer, so no factor named: this host's worst finding (a warning) decides.
    "probe": Case("probe", _probe, ExitCode.WARNING),
    "transfer": Case("transfer", _transfer, ExitCode.OK),
    "calc": Case("calc", lambda tmp: CalcDocument.of(buffer_plan(0.150, 500e6)), ExitCode.OK),
    "history": Case("history", lambda tmp: HistoryDocument.of(HOST, _rows()), ExitCode.OK),
    "history-empty": Case("history", lambda tmp: HistoryDocument.of(HOST, ()), ExitCode.UNKNOWN),
    "buffer": Case("buffer", _buffer, ExitCode.OK),
    "buffer-none": Case("buffer", lambda tmp: BufferDocument.of(HOST, None), ExitCode.UNKNOWN),
    "fix-plan": Case("fix-plan", _fix_plan, ExitCode.WARNING),
    "fix-nothing": Case("fix-plan", _fix_nothing, ExitCode.OK),
    "fix-apply": Case("fix-result", _fix_apply, ExitCode.OK),
    "fix-partial": Case("fix-result", _fix_partial, ExitCode.WARNING),
    "fix-rollback": Case("fix-result", _fix_rollback, ExitCode.OK),
    "path": Case("path", _path(False), ExitCode.CRITICAL),
    "path-blackhole": Case("path", _path(True), ExitCode.CRITICAL),
    "path-middlebox": Case("path", _path_middlebox, ExitCode.CRITICAL),
    "conns": Case("conns", lambda tmp: conns_data.report(), ExitCode.WARNING),
    "capture": Case(
        "capture", lambda tmp: CaptureDocument.of(capture_cases.report()), ExitCode.WARNING
    ),
    "error": Case("error", _error, ExitCode.UNKNOWN),
}
PAIRS = [
    (name, fmt)
    for name, case in CASES.items()
    for fmt, f in registry.FORMATS.items()
    if case.kind in f.kinds
]


def _no_terminal(fd: int = 0) -> os.terminal_size:
    raise OSError("not a terminal")


@pytest.mark.parametrize(("case", "fmt"), PAIRS)
def test_document_matches_golden(
    case: str, fmt: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # rich sizes the history table by COLUMNS, else by the terminal of any std stream.
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.setattr(os, "get_terminal_size", _no_terminal)
    expected = CASES[case].code
    doc = CASES[case].build(tmp_path)
    assert doc.kind == CASES[case].kind and fmt in registry.names_for(doc.kind)
    out = io.StringIO()
    code = registry.emit(doc, fmt, out, RenderOptions(color=False))
    text = out.getvalue().replace(str(tmp_path), "TMP")
    path = GOLDEN / f"{case}.{EXT[fmt]}"
    if os.environ.get("TCPWIZARD_UPDATE_GOLDEN"):
        path.write_text(text)
    assert text == path.read_text(), f"{path.name} changed (TCPWIZARD_UPDATE_GOLDEN=1 to accept)"
    assert code == doc.exit_code == expected
    if fmt == "json" and doc.kind in SCHEMAS:
        parsed = json.loads(out.getvalue())
        jsonschema.validate(parsed, json.loads((ROOT / "docs" / SCHEMAS[doc.kind]).read_text()))
        assert parsed["exit_code"] == expected


def test_every_kind_of_every_format_has_a_golden_case() -> None:
    covered = {(CASES[name].kind, fmt) for name, fmt in PAIRS}
    offered = {(kind, name) for name, f in registry.FORMATS.items() for kind in f.kinds}
    assert offered == covered
