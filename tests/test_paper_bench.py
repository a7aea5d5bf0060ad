"""`python -m benchmarks paper`: matrix planning, resume, table and plots on synthetic results."""

from __future__ import annotations

import io
import json
import struct
import time
from dataclasses import replace
from pathlib import Path

import pytest

from benchmarks.bench_paper import (
    _needs_work,
    budget_lines,
    iperf3_args,
    run_from_mode,
    run_plan,
)
from benchmarks.paper_matrix import (
    TUNING_BY_NAME,
    Cell,
    Plan,
    estimate_s,
    make_plan,
    window_reference_mbps,
)
from benchmarks.paper_plots import figure_pixels, write_plots
from benchmarks.paper_results import ResultStore, Run, steady_goodput
from benchmarks.paper_table import check_cell, markdown, summary_line
from tcpwizard.context import Context
from tcpwizard.exitcodes import UsageError
from tcpwizard.measure.model import ModeResult, TransferSample
from tcpwizard.output.measure_json import mode_json


def _run(mbps: float, steady: float | None = None, buf: int = 1_000_000) -> Run:
    return Run(mbps, mbps if steady is None else steady, buf, mbps / (buf / 1e6), 0, 1.5)


def _full_store(tmp_path: Path, quick: bool = True) -> tuple[ResultStore, Plan]:
    plan = make_plan(quick)
    store = ResultStore.open(str(tmp_path / "r.json"), plan)
    for c in plan.cells():
        ref = window_reference_mbps(c.rtt_ms, c.streams, plan.rate_bps)
        base = ref if c.tuning == "untuned" else 90.0 - c.streams
        for k in range(plan.reps):
            store.add_run(
                c, _run(base * (1 + 0.02 * k)), [(0.1 * i, 1000 * 2**i) for i in range(8)]
            )
        if TUNING_BY_NAME[c.tuning].iperf3 != "none":
            store.set_iperf3(c, base * 1.01, None)
    return store, plan


def test_matrix_covers_the_papers_and_quick_is_smaller() -> None:
    full, quick = make_plan(False), make_plan(True)
    assert len(full.cells()) == 6 * 4 * 4  # tunings x delays x streams
    assert len({c.key for c in full.cells()}) == len(full.cells())
    assert full.nbytes == 128 * 2**20 and full.duration_s is None
    assert len(quick.cells()) == 6 * 3 * 3 and quick.duration_s is not None
    # Tunings that need different autotuning limits never share a lab.
    for g in full.groups():
        assert {t.limits for t in g.tunings} == {g.limits}
        assert len({t.mode for t in g.tunings}) == len(g.tunings)  # one call, unique modes
    assert {t.name for g in full.groups() if g.limits == "default" for t in g.tunings} == {
        "untuned",
        "autotune",
    }


def test_subset_plan() -> None:
    plan = make_plan(True, rtts_ms=(25.0,), tunings=("drs",))
    assert [c.key for c in plan.cells()] == ["drs/25ms/x1", "drs/25ms/x2", "drs/25ms/x8"]
    assert all(g.limits == "raised" for g in plan.groups())


def test_window_reference_is_window_over_rtt_capped_by_the_bottleneck() -> None:
    assert window_reference_mbps(25.0, 1, 100e6) == pytest.approx(80480 * 8 / 0.025 / 1e6)
    assert window_reference_mbps(100.0, 2, 100e6) == pytest.approx(2 * 6.4384)
    assert window_reference_mbps(0.5, 1, 100e6) == pytest.approx(96.533, abs=1e-3)


def test_budget_shrinks_as_cells_are_measured(tmp_path: Path) -> None:
    plan = make_plan(True)
    cells = plan.cells()
    everything = estimate_s(plan, {c.key: 3 for c in cells}, {c.key for c in cells})
    half = estimate_s(plan, {c.key: 3 for c in cells[::2]}, set())
    assert 300 < everything < 600  # --quick must fit in 10 minutes
    assert 0 < half < everything
    assert estimate_s(plan, {}, set()) == 0
    full = make_plan(False)
    assert estimate_s(full, {c.key: 3 for c in full.cells()}, set()) > 3600


def test_steady_goodput_skips_warmup_and_drain() -> None:
    samples = [(0.1, 5.0), (0.2, 10.0), (0.3, 50.0), (0.4, 50.0), (0.5, 50.0), (0.6, 3.0)]
    assert steady_goodput(samples, warmup_s=0.2) == pytest.approx(50.0)
    assert steady_goodput(samples, warmup_s=0.0) == pytest.approx(33.0)
    assert steady_goodput(samples[:2], warmup_s=5.0) == pytest.approx(7.5)  # too short: all


def test_store_round_trip_and_resume(tmp_path: Path) -> None:
    plan = make_plan(True, rtts_ms=(25.0,), tunings=("untuned", "drs"))
    path = str(tmp_path / "bench-paper.json")
    store = ResultStore.open(path, plan)
    cell = Cell("drs", 25.0, 1)
    store.add_run(cell, _run(80.0), [(0.1, 1000), (0.2, 2000)])
    store.add_run(cell, replace(_run(0.0), error="peer vanished"))
    store.save()
    again = ResultStore.open(path, plan)
    assert again.runs_missing(cell, plan.reps) == 2  # the failed run does not count
    assert again.get(cell).trace == ((0.1, 1000), (0.2, 2000))
    assert again.get(cell).runs[1].error == "peer vanished"
    for mbps in (82.0, 78.0):
        again.add_run(cell, _run(mbps))
    assert again.runs_missing(cell, plan.reps) == 0
    assert again.get(cell).median_mbps == 80.0
    assert again.get(cell).spread == pytest.approx(0.025)
    # A complete group needs no lab; an incomplete one does.
    group = next(g for g in plan.groups() if g.streams == 1 and g.limits == "raised")
    assert not _needs_work(plan, group, again)
    other = next(g for g in plan.groups() if g.streams == 2 and g.limits == "raised")
    assert _needs_work(plan, other, again)
    again.save()
    lines = budget_lines(plan, ResultStore.open(path, plan))
    assert "1 cells kept" in lines[1]


def test_store_refuses_another_configuration(tmp_path: Path) -> None:
    path = str(tmp_path / "bench-paper.json")
    store = ResultStore.open(path, make_plan(True))
    store.add_run(Cell("drs", 25.0, 1), _run(80.0))
    store.save()
    with pytest.raises(UsageError, match="another configuration"):
        ResultStore.open(path, make_plan(False))


def test_run_from_the_transfer_json() -> None:
    samples = tuple(
        TransferSample(0.1 * i, 20.0 if i < 5 else 90.0, 1000 * i, 0) for i in range(1, 16)
    )
    m = ModeResult("drs", "up", 1, 18_000_000, 1.5, 96.0, 2_000_000, 3, samples)
    run, trace = run_from_mode(json.loads(json.dumps(mode_json(m))), rtt_ms=25.0)
    assert run.mbps == 96.0 and run.max_buffer_bytes == 2_000_000 and run.retransmits == 3
    assert run.mbps_per_mb == pytest.approx(48.0)
    assert run.steady_mbps == pytest.approx(90.0)  # 0.5 s warm-up at 25 ms leaves 90s
    assert trace[0] == (0.1, 1000) and len(trace) == 15


def test_iperf3_equivalents() -> None:
    assert iperf3_args(Cell("untuned", 25.0, 2), 100e6, 4194304) == ("-P", "2", "-w", "64K")
    assert iperf3_args(Cell("autotune", 25.0, 1), 100e6, 4194304) == ("-P", "1")
    assert iperf3_args(Cell("static", 25.0, 1), 100e6, 4194304) == ("-P", "1", "-w", "312500")
    over = iperf3_args(Cell("overprovisioned", 25.0, 8), 100e6, 4194304)
    assert over is not None and over[-1] == "4194304"
    assert iperf3_args(Cell("drs", 25.0, 1), 100e6, 4194304) is None


def test_checks_repeatability_and_window(tmp_path: Path) -> None:
    store, plan = _full_store(tmp_path)
    good = store.get(Cell("untuned", 100.0, 1))
    ch = check_cell(good, plan)
    assert ch.repeatable and ch.window_ok and ch.window_ratio == pytest.approx(1.02)
    noisy = replace(good, runs=(_run(6.4), _run(6.4), _run(8.0)))
    assert check_cell(noisy, plan).repeatable is False
    slow = replace(good, runs=(_run(5.0),) * 3)
    assert check_cell(slow, plan).window_ok is False
    short = replace(good, runs=good.runs[:2])
    assert check_cell(short, plan).repeatable is None
    assert "54/54 cells" in summary_line(plan, store)


def test_drs_table_compares_with_the_better_autotune_and_every_other_buffer(
    tmp_path: Path,
) -> None:
    from benchmarks.paper_table import drs_table

    store, plan = _full_store(tmp_path)  # every tuning but untuned: 90 - streams, 1 MB
    cell = Cell("drs", 100.0, 1)
    store.cells[cell.key] = replace(store.get(cell), runs=(_run(87.0, buf=500_000),) * 3)
    raised = Cell("autotune-raised", 100.0, 1)
    store.cells[raised.key] = replace(store.get(raised), runs=(_run(91.0),) * 3)
    lines = drs_table(plan, store)
    # 87 / 91 (autotune-raised, the better one) = 0.96; 174 Mbit/s per MB against 89-91.
    assert any(
        line.startswith("| 100 ms | 1 | 87.0 | 91.0 (autotune-raised) | 0.956 | 0.956 | 174.0 |")
        and line.endswith("| yes |")
        for line in lines
    )
    # The other cells: DRS equal to autotune (1.00) with the same buffer: not more per MB.
    assert lines[-1] == (
        "DRS >= 0.95 x the better autotune: 9/9 cells; more Mbit/s per MB than every other "
        "tuning but untuned: 1/9 cells."
    )
    assert "## DRS against kernel autotuning" in markdown(plan, store, "")


def test_markdown_and_plots(tmp_path: Path) -> None:
    store, plan = _full_store(tmp_path)
    store.meta.update(kernel="6.18", cpus=2, congestion_control="bbr")
    text = markdown(plan, store, "notes here")
    assert "| 25 ms | 2 | 52.5 |" in text  # untuned 2 x 25.75 Mbit/s x 1.02 (median run)
    assert "![Throughput against parallel streams" in text and "notes here" in text
    paths = write_plots(plan, store, str(tmp_path / "img"))
    assert len(paths) == 3
    for path in paths:
        with open(path, "rb") as f:
            head = f.read(24)
        assert head[:8] == b"\x89PNG\r\n\x1a\n"
        width, height = struct.unpack(">II", head[16:24])
        assert (width, height) == figure_pixels(Path(path).name, plan)
        assert Path(path).stat().st_size < 150_000  # small enough to commit


@pytest.mark.lab
def test_one_real_cell_over_the_lab_then_resume(tmp_path: Path) -> None:
    from .lab_fixtures import lab_unavailable

    reason = lab_unavailable()
    if reason:
        pytest.skip(reason)
    plan = replace(
        make_plan(True, rtts_ms=(25.0,), tunings=("untuned",)), streams=(1,), duration_rtts=0
    )
    out = io.StringIO()
    ctx = Context(stdout=out, stderr=io.StringIO())
    t0 = time.monotonic()
    run_plan(plan, str(tmp_path), ctx)
    first = time.monotonic() - t0
    store = ResultStore.open(str(tmp_path / "bench-paper.json"), plan)
    cr = store.get(Cell("untuned", 25.0, 1))
    assert len(cr.good_runs) == 3, cr.runs
    ch = check_cell(cr, plan)
    # The kernel's 64 KB window: 80,480 B / 25 ms = 25.8 Mbit/s, within 10 %.
    assert ch.window_ok, (cr.median_steady_mbps, ch.window_ratio)
    assert ch.repeatable, [r.mbps for r in cr.runs]
    assert cr.iperf3_mbps is not None and abs(cr.iperf3_mbps / cr.median_mbps - 1) < 0.15
    assert (tmp_path / "bench-paper.md").exists() and (tmp_path / "img").is_dir()
    # A second run keeps the measured cell: no lab, no transfer, same numbers.
    t0 = time.monotonic()
    run_plan(plan, str(tmp_path), ctx)
    assert time.monotonic() - t0 < first / 2
    again = ResultStore.open(str(tmp_path / "bench-paper.json"), plan).get(cr.cell)
    assert again.runs == cr.runs
