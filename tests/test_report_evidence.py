"""A saved check report read back into Evidence (benchmarks/report_evidence.py) and the
rejudge bench built on it: a real lab report (a bloated 15 Mbit/s x 6 ms path of the
scenario matrix) comes back field for field, and a golden report whose verdict the rules
gave is judged as it was."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from benchmarks.cli import main
from benchmarks.report_evidence import ReportError, evidence
from tcpwizard.advice.diagnose import diagnose
from tcpwizard.exitcodes import ExitCode
from tcpwizard.output import measure_json

RUN = Path(__file__).parent / "data" / "matrix-run"
REPORT = RUN / "reports" / "20261201.4.json"
GOLDEN = Path(__file__).parent / "golden"


# Figures the contract derives from others: from rounded inputs they agree to a few digits.
DERIVED = ("mbps_per_mb", "latency_under_load", "rate_plateau_mbps")


def _kept(mode: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in mode.items() if k not in DERIVED}


def _report() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(REPORT.read_text())
    return doc


def test_a_lab_reports_path_and_transfer_come_back_field_for_field() -> None:
    doc = _report()
    ev = evidence(doc)
    assert ev.path is not None and ev.transfer is not None
    assert measure_json.path_json(ev.path) == doc["path"]
    again = measure_json.transfer_json(ev.transfer, ev.path.rtt.min)
    # Fields added to the contract after the report was kept come back at their default.
    for m in again["modes"]:
        assert (m.pop("rate_bound_mbps"), m.pop("write_s")) == (None, None)
        for s in m["samples"]:
            assert s["tcp_info"] is None or s["tcp_info"].pop("snd_wnd") == 0
    assert [_kept(m) for m in again["modes"]] == [_kept(m) for m in doc["transfer"]["modes"]]
    for m, was in zip(again["modes"], doc["transfer"]["modes"], strict=True):
        assert m["mbps_per_mb"] == pytest.approx(was["mbps_per_mb"], rel=1e-3)
        assert m["rate_plateau_mbps"] == pytest.approx(was["rate_plateau_mbps"], rel=1e-3)
        lat, lat_was = m["latency_under_load"], was["latency_under_load"]
        assert lat["median_ms"] == lat_was["median_ms"]
        assert lat["queue_bdps"] == pytest.approx(lat_was["queue_bdps"], rel=1e-3)
    assert ev.peer is not None and ev.peer.sysctls == tuple(doc["peer"]["sysctls"].items())
    assert ev.peer_handshake is not None
    assert ev.peer_handshake.window_scaling is doc["peer_handshake"]["window_scaling"]


@pytest.mark.parametrize("name", ["middlebox", "policed"])
def test_a_golden_report_is_judged_again_as_it_was(name: str) -> None:
    doc = json.loads((GOLDEN / f"{name}.json").read_text())
    v = diagnose(evidence(doc)).verdict
    want = doc["verdict"]
    assert (v.limiting_factor, v.host_to_fix) == (want["limiting_factor"], want["host_to_fix"])


def test_a_file_that_is_no_check_report_is_one_error() -> None:
    with pytest.raises(ReportError):
        evidence({"host": {"hostname": "h"}})
    with pytest.raises(ReportError):
        evidence({"verdict": {}})
    shapes: list[Any] = [[], {"host": []}, {**_report(), "transfer": "x"}]
    for shape in shapes:
        with pytest.raises(ReportError):
            evidence(shape)


def test_rejudge_prints_then_and_now(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shutil.copytree(RUN, tmp_path / "run")
    assert main(["rejudge", str(tmp_path / "run"), "--list"]) == ExitCode.OK
    out = capsys.readouterr().out
    assert "| 1 | 1 | 1 | 0 | 0 | 0 | 0 |" in out  # measured right, judged the same again
    rows = tmp_path / "now.jsonl"
    assert main(["rejudge", str(tmp_path / "run"), "--rows", str(rows)]) == ExitCode.OK
    (row,) = [json.loads(line) for line in rows.read_text().splitlines()]
    assert row["verdict"]["factor"] == row["truth"]["factor"] == "bufferbloat"
    assert 0 < row["verdict"]["rule_confidence"] <= 1  # what `confidence` builds a table on


def test_rejudge_refuses_a_folder_without_a_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["rejudge", str(tmp_path)]) == ExitCode.USAGE
    assert "holds no matrix.jsonl" in capsys.readouterr().err
