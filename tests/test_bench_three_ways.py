"""The three-ways bench's table: every run a row, a reading that is not the cause's in bold,
and per cause the runs with one verdict, the expected one."""

from __future__ import annotations

from benchmarks.bench_three_ways import CASES, SUITE_CASES, table


def test_every_run_is_a_row_and_a_disagreeing_reading_is_bold() -> None:
    right = {
        "check": ("policer", "path"),
        "conns": ("policer", "path"),
        "pcap": ("policer", "path"),
    }
    wrong = {**right, "conns": ("congestion", "local")}
    text = table([("policer", 1, right), ("policer", 2, wrong)])
    rows = [line for line in text.splitlines() if line.startswith("| policer")]
    assert len(rows) == 2
    assert rows[0].endswith("| yes |") and "**" not in rows[0]
    assert "**congestion (local)**" in rows[1] and rows[1].endswith("| no |")
    assert "- policer: 1/2 runs with one verdict, the expected one" in text


def test_the_suite_runs_a_subset_of_the_benchs_causes() -> None:
    assert set(SUITE_CASES) < set(CASES)
    assert CASES["healthy"].expect == ("path-capacity", None)
