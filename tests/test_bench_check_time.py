"""The check-time bench's table and summary (benchmarks/bench_check_time.py)."""

from __future__ import annotations

from benchmarks.bench_check_time import summary, table

ROW = {"factor": "path-capacity", "host": None, "confidence": 0.9, "measured": True,
       "wall_s": 12.0, "report_s": 11.5, "floor_s": 7.0}  # fmt: skip


def test_only_measured_path_capacity_counts_as_healthy() -> None:
    rows = [ROW, {**ROW, "measured": False}, {**ROW, "factor": "congestion", "host": "local"}]
    assert summary(rows).startswith("`path-capacity`, measured: 1/3; wall time median 12.0 s")


def test_an_error_row_is_shown_not_dropped() -> None:
    text = table([ROW, {"error": "no JSON (exit 1): serve went away"}])
    assert "| 1 | path-capacity (-) | 0.90 | yes | 12.0 | 11.5 | 7.0 | 1.64 |" in text
    assert "| 2 | error: no JSON (exit 1): serve went away |" in text
    assert summary([{"error": "x"}]) == "`path-capacity`, measured: 0/1."
