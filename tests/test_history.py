"""History: concurrent writers, corrupted rows reported but not fatal."""

from __future__ import annotations

import multiprocessing
import sqlite3
from pathlib import Path

import pytest

from tcpwizard import history as history_module
from tcpwizard.history import History, HistoryError
from tcpwizard.main import main


def report(rtt: float, mbps: float, factor: str) -> dict[str, object]:
    return {
        "schema_version": 1,
        "path": {"rtt_ms": {"min": rtt}, "capacity_mbps": 100.0},
        "transfer": {
            "modes": [
                {"mode": "autotune", "throughput_mbps": mbps},
                {"mode": "drs", "throughput_mbps": mbps * 2},
            ]
        },
        "verdict": {"limiting_factor": factor},
        "exit_code": 1,
    }


def test_append_and_read_trend(tmp_path: Path) -> None:
    h = History(tmp_path / "h.sqlite3")
    for i in range(5):
        h.append("dtn.example", report(50 + i, 10.0 + i, "receiver-window"), ts=1000.0 + i)
    h.append("other", report(5, 90, "path-capacity"), ts=1000.0)
    rows, bad = h.rows("dtn.example")
    assert not bad
    assert [r.rtt_min_ms for r in rows] == [50, 51, 52, 53, 54]
    assert rows[-1].throughput_mbps == 28.0  # the best mode of that run
    assert rows[0].limiting_factor == "receiver-window" and rows[0].exit_code == 1
    assert h.hosts() == ["dtn.example", "other"]


def _writer(path: str, n: int, tag: int) -> None:
    h = History(path)
    for i in range(n):
        h.append("concurrent", report(float(tag), float(i), "path-capacity"))


def test_concurrent_writers_lose_nothing(tmp_path: Path) -> None:
    path = str(tmp_path / "h.sqlite3")
    procs = [multiprocessing.Process(target=_writer, args=(path, 40, t)) for t in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    rows, bad = History(path).rows("concurrent")
    assert len(rows) == 160 and not bad


def test_corrupted_row_is_reported_not_fatal(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite3"
    h = History(path)
    h.append("x", report(10, 5, "congestion"), ts=1.0)
    h.append("x", report(11, 6, "congestion"), ts=2.0)
    with sqlite3.connect(path) as db:
        db.execute("UPDATE checks SET report = '{not json' WHERE ts = 1.0")
    rows, bad = h.rows("x")
    assert [r.rtt_min_ms for r in rows] == [11]
    assert len(bad) == 1 and bad[0].ts == 1.0


def test_history_command_table_and_plot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "h.sqlite3"
    h = History(db)
    for i, mbps in enumerate([10.0, 40.0, 90.0]):
        h.append("dtn", report(50, mbps, "receiver-window"), ts=1_700_000_000.0 + 3600 * i)
    assert main(["history", "dtn", "--db", str(db), "--no-color"]) == 0
    out = capsys.readouterr().out
    assert "receiver-window" in out and "2023-11-14" in out
    assert "▁" in out and "█" in out  # throughput rose: the plot spans low to high
    assert main(["history", "nobody", "--db", str(db)]) == 3


def test_a_schema_read_that_meets_a_checkpoint_is_tried_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Read without a lock, the schema can look malformed while another writer
    # checkpoints: a moment later it reads whole. A file that stays malformed is refused.
    path = tmp_path / "h.sqlite3"
    History(path).append("a", report(1.0, 1.0, "path-capacity"))
    real = history_module._schema_of
    failures = iter([True, True])

    def flaky(uri: str) -> tuple[set[str], set[str]]:
        if next(failures, False):
            raise sqlite3.DatabaseError("database disk image is malformed")
        return real(uri)

    monkeypatch.setattr(history_module, "_schema_of", flaky)
    History(path).append("a", report(1.0, 2.0, "path-capacity"))
    assert len(History(path).rows("a")[0]) == 2

    def broken(uri: str) -> tuple[set[str], set[str]]:
        raise sqlite3.DatabaseError("database disk image is malformed")

    monkeypatch.setattr(history_module, "_schema_of", broken)
    with pytest.raises(HistoryError, match="malformed"):
        History(path).append("a", report(1.0, 3.0, "path-capacity"))
