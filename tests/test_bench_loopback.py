"""The loopback bench's arithmetic and its table (the measurement itself needs the lab lock
and runs as `python -m benchmarks loopback`)."""

from __future__ import annotations

import pytest

from benchmarks.bench_loopback import LoopbackRow, main, render


def test_medians_and_ratio_of_alternating_runs() -> None:
    row = LoopbackRow(4, (60_000.0, 53_700.0, 65_800.0), (27_500.0, 31_400.0, 30_500.0))
    assert row.ours == 60_000.0 and row.iperf3 == 30_500.0
    assert row.ratio == pytest.approx(60_000 / 30_500)
    assert LoopbackRow(1, (1.0,), (0.0,)).ratio == 0.0  # iperf3 failed: no ratio to claim


def test_table_lists_every_run_and_the_lowest_ratio() -> None:
    rows = [
        LoopbackRow(1, (35_600.0, 34_800.0, 43_600.0), (33_700.0, 23_600.0, 36_100.0)),
        LoopbackRow(4, (60_000.0, 53_700.0, 65_800.0), (27_500.0, 31_400.0, 30_500.0)),
    ]
    text = render(rows, 3.0)
    assert "| 1 | 35.6; 35.6, 34.8, 43.6 | 33.7; 33.7, 23.6, 36.1 | 1.06 |" in text
    assert "| 4 | 60.0; 60.0, 53.7, 65.8 | 30.5; 27.5, 31.4, 30.5 | 1.97 |" in text
    assert "Lowest ratio 1.06" in text and "3 runs of 3 s" in text


@pytest.mark.parametrize("argv", [["--streams", "17"], ["--streams", "x"], ["--runs", "0"]])
def test_bad_arguments_are_one_line(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and "\n" not in err
