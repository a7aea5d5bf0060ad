"""`tcpwizard history HOST --buffer`: the buffer an application should ask for on a path, from
the last measured BDPs (the largest of the newest five), with their age; shell, C, Python."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tcpwizard.buffer_advice import RECENT, buffer_advice, render_text
from tcpwizard.history import History, HistoryRow
from tcpwizard.main import main


def _row(ts: float, bdp: float | None) -> HistoryRow:
    return HistoryRow(0, ts, "dtn", 50.0, 100.0, 90.0, "path-capacity", 0, bdp)


def test_sizes_for_the_largest_recent_bdp_with_its_age() -> None:
    now = 100_000.0
    rows = [_row(now - 3600 * i, 600_000 + 10_000 * i) for i in range(8)]
    rows.append(_row(now - 10, None))  # a check without a probe: no BDP, ignored
    rows.append(_row(now - 86400 * 30, 9e9))  # a month-old giant BDP, beyond the newest five
    a = buffer_advice("dtn", rows, ram_bytes=64 << 30, now=now)
    assert a is not None
    assert len(a.samples) == RECENT
    assert [s.age_s for s in a.samples] == [0, 3600, 7200, 10800, 14400]
    assert a.bdp_bytes == 640_000  # the largest of those five
    assert a.buffer_bytes == 2 << 20  # 2 x 640 KB = 1.28 MB -> 2 MiB
    assert "iperf3 -c dtn -w 2M" in a.shell
    assert "2097152" in a.c and "SO_RCVBUF" in a.c and "getsockopt" in a.c
    assert "BUF = 2097152" in a.python
    text = render_text(a)
    assert "2.1 MB (2097152 bytes)" in text
    assert "640 KB 4 h ago" in text and "600 KB just now" in text
    for section in ("Shell:", "C:", "Python:"):
        assert section in text


def test_the_buffer_never_exceeds_what_the_host_can_spare() -> None:
    a = buffer_advice("dtn", [_row(0.0, 500e6)], ram_bytes=1 << 30, now=0.0)
    assert a is not None and a.buffer_bytes == (1 << 30) // 16


def test_no_measured_bdp_no_advice() -> None:
    assert buffer_advice("dtn", [_row(0.0, None)]) is None
    assert buffer_advice("dtn", []) is None


def _db(tmp_path: Path) -> Path:
    db = tmp_path / "h.sqlite3"
    h = History(db)
    for i, bdp in enumerate((500_000, 625_000)):
        h.append("dtn", {"path": {"rtt_ms": {"min": 50.0}, "bdp_bytes": bdp}, "exit_code": 0},
                 ts=1000.0 + i)  # fmt: skip
    h.append("peerless", {"path": None, "exit_code": 3}, ts=1000.0)
    return db


def test_history_buffer_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = str(_db(tmp_path))
    assert main(["history", "dtn", "--buffer", "--db", db]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Buffer for applications on the path to dtn: 2.1 MB (2097152 bytes)")
    assert main(["history", "dtn", "--buffer", "--db", db, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["buffer_bytes"] == 2097152 and doc["bdp_bytes"] == 625_000
    assert [s["bdp_bytes"] for s in doc["samples"]] == [625_000, 500_000]
    assert main(["history", "peerless", "--buffer", "--db", db, "--json"]) == 3
    captured = capsys.readouterr()
    assert captured.out.strip() == "null"
    assert captured.err.strip().count("\n") == 0 and "no measured" in captured.err


def test_the_python_snippet_runs(tmp_path: Path) -> None:
    a = buffer_advice("dtn", [_row(0.0, 100_000)], ram_bytes=1 << 30, now=0.0)
    assert a is not None
    script = tmp_path / "snippet.py"
    script.write_text(a.python)
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    # It either got its buffer or says which sysctl capped it.
    assert proc.stdout == "" or "raise net.core.rmem_max" in proc.stdout
