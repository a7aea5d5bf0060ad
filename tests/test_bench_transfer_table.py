"""The transfer bench's decisions and table, without a lab: when `overprovisioned` must be
forced to reach the host's TCP ceiling, and what the summary lines compute."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks.bench_transfer import (
    BenchRow,
    drs_needs_force,
    force_overprovisioned,
    iperf_window,
    matrix_table,
    render_table,
    time_to_share,
)
from tcpwizard.measure.engine.buffers import HostBufferLimits

MB = 1 << 20


def _limits(core: int, tcp_max: int) -> HostBufferLimits:
    return HostBufferLimits(core, core, (4096, 131072, tcp_max), (4096, 16384, tcp_max))


def test_overprovisioned_is_forced_only_when_setsockopt_falls_short() -> None:
    assert force_overprovisioned(_limits(4 * MB, 16 * MB))  # 8 MB reachable < 16 MB
    assert not force_overprovisioned(_limits(8 * MB, 16 * MB))  # 2 x 8 MB reaches it
    assert not force_overprovisioned(_limits(32 * MB, 16 * MB))


def test_iperf_reference_settings() -> None:
    lim = _limits(4 * MB, 16 * MB)
    assert iperf_window("untuned", 0.1, 100e6, lim) == 65536
    assert iperf_window("static", 0.1, 100e6, lim) == 1_250_000
    assert iperf_window("overprovisioned", 0.1, 100e6, lim) == 4 * MB
    assert iperf_window("autotune", 0.1, 100e6, lim) is None
    assert iperf_window("drs", 0.1, 100e6, lim) is None


def _row(mode: str, mbps: float, buf: int, **kw: object) -> BenchRow:
    return BenchRow(
        mode=mode,  # type: ignore[arg-type]
        streams=1,
        mbps=mbps,
        max_buffer_bytes=buf,
        mbps_per_mb=mbps / (buf / 1e6),
        retransmits=0,
        iperf_mbps=kw.pop("iperf", mbps),  # type: ignore[arg-type]
        iperf_setting=str(kw.pop("setting", "no -w")),
        **kw,  # type: ignore[arg-type]
    )


def test_summary_ratios_and_forced_footnote() -> None:
    rows = [
        _row("untuned", 6.0, 131_072),
        _row(
            "overprovisioned",
            90.0,
            16_000_000,
            forced=True,
            iperf_window=4_000_000,
            iperf=90.0,
            setting="-w 4000000",
        ),
        _row("drs", 87.0, 3_600_000),
    ]
    text = render_table(rows, 100e6, 0.1)
    assert "| overprovisioned* | up | 1 | 90.0 |" in text
    # 100 Mbit/s carries 96.5 Mbit/s of TCP goodput: 16.1x untuned is the ceiling
    assert "DRS / untuned goodput: 14.5x (no mode can exceed" in text
    assert "untuned = 16.1x here)" in text
    # (87 / 3.6) / (90 / 16) = 4.30
    assert "DRS / overprovisioned Mbit/s per MB: 4.3x (overprovisioned 16.00 MB)" in text
    # against 8 MB, the most setsockopt gives without force: (87 / 3.6) / (90 / 8) = 2.15
    assert "the same against the 8.00 MB that setsockopt reaches without force" in text
    assert text.rstrip().endswith("iperf3 -w stays capped at rmem_max.")
    assert "DRS max buffer / BDP: 2.88" in text


def test_unforced_table_has_no_footnote() -> None:
    text = render_table(
        [_row("overprovisioned", 90.0, 8_000_000), _row("drs", 87.0, 3_600_000)], 100e6, 0.1
    )
    assert "*" not in text.replace("**", "")
    assert "without force" not in text


def _samples(rates: list[float], dt: float = 0.1) -> list[dict[str, Any]]:
    return [{"t_s": round((i + 1) * dt, 3), "goodput_mbps": r} for i, r in enumerate(rates)]


def test_time_to_90_percent_is_a_rate_over_a_window_not_one_burst() -> None:
    # A 150 Mbit/s interval (a hole filled after a loss) alone does not count; the rate
    # is 90 in the intervals ending at 0.7 s and on: the 0.3 s window ending at 0.9 s.
    rates = [10.0, 20.0, 0.0, 150.0, 30.0, 60.0, 90.0, 90.0, 90.0, 90.0]
    assert time_to_share(_samples(rates), 90.0, 0.3) == 0.9
    assert time_to_share(_samples([10.0] * 10), 90.0, 0.3) is None
    assert time_to_share([], 90.0, 0.3) is None


def test_drs_against_autotune_lines_per_direction() -> None:
    rows = [
        _row("autotune", 89.0, 16_000_000, direction="up", t90_s=0.8),
        _row("drs", 88.0, 3_000_000, direction="up", t90_s=0.9),
        _row("autotune", 89.0, 16_000_000, direction="down", t90_s=0.8),
        _row("drs", 60.0, 3_000_000, direction="down", t90_s=None),
    ]
    text = render_table(rows, 100e6, 0.1)
    # 88 / 96.5 = 0.91; 0.9 / 0.8 = 1.12
    assert "- up: DRS 0.91 of the bottleneck" in text
    assert "time to 90 % 0.90 s vs 0.80 s = 1.12x (target <= 1.2)" in text
    assert "- down: DRS 0.62 of the bottleneck" in text
    assert "time to 90 % never vs autotune's 0.80 s" in text
    assert "| drs | down | 1 | 60.0 |" in text and text.count("| never |") == 1


def test_matrix_table() -> None:
    rows = [_row("autotune", 100.0, 8_000_000, direction=d, t90_s=1.5) for d in ("up", "down")]
    rows += [_row("drs", 97.0, 8_000_000, direction=d, t90_s=1.6) for d in ("up", "down")]
    matrix = matrix_table([(500e6, 0.2, rows)])
    # The lab carried at most 100 of 500 Mbit/s (482.7 of TCP goodput): 0.21.
    assert "| 500 Mbit/s x 200 ms | up | 0.21 | 100.0, 1.50 s, 0 | 97.0, 1.60 s, 0 |" in matrix


def test_drs_is_forced_only_where_rmem_max_would_cap_it() -> None:
    lim = _limits(4 * MB, 64 * MB)
    assert not drs_needs_force(lim, 100e6, 0.1)  # 3 x 1.25 MB < 4 MiB
    assert drs_needs_force(lim, 200e6, 0.1)  # 3 x 2.5 MB > 4 MiB


def _run(mode: Any, mbps: float, secs: float, retr: int, peak: int, steady: int) -> BenchRow:
    # A constant rate from t = 0: megabits delivered grow linearly over the span.
    return BenchRow(
        mode, 1, mbps, peak, 1.0, retr, None, "", t90_s=1.0, seconds=secs,
        steady_buffer_bytes=steady, delivered=((0.0, 0.0), (secs, mbps * secs)),
    )  # fmt: skip


def test_drs_targets_judge_every_run_and_compare_equal_spans() -> None:
    from benchmarks.bench_drs_targets import Pair, render_path

    bdp = 1_250_000  # 100 ms x 100 Mbit/s
    good = Pair(
        3.0,
        "up",
        _run("autotune", 82.0, 4.0, 1700, 16 * MB, 16 * MB),
        _run("drs", 78.0, 3.15, 0, 2 * bdp, 2 * bdp),
    )
    # Own spans: 78 / 82 = 0.95; by 3.15 s autotune (at a constant 82) had 258 Mbit, DRS 246.
    assert good.ratio == pytest.approx(78 / 82)
    assert good.same_span_ratio == pytest.approx(78 / 82)
    bad = Pair(
        3.0,
        "down",
        _run("autotune", 82.0, 4.0, 100, 16 * MB, 16 * MB),
        _run("drs", 70.0, 3.15, 200, int(3.5 * bdp), int(2.6 * bdp)),
    )
    text = render_path(100e6, 0.1, [good, bad])
    assert (
        "| 1 | up | 82.0 (4.00 s) | 78.0 (3.15 s) | 0.951 | 0.951 | 1.00 / 1.00 s | 2.00 | 2.00 | "
        "1700 / 0 |" in text
    )
    # One bad run of two fails every target it misses: judged per run, not on a median.
    assert "same span >= 0.95 1/2 ❌" in text and "peak <= 3 BDP 1/2 ❌" in text
    assert "steady <= 2.5 BDP 1/2 ❌" in text and "retransmits <= autotune's 1/2 ❌" in text
    only_good = render_path(100e6, 0.1, [good])
    assert "peak <= 3 BDP 1/1 ✅" in only_good and "retransmits <= autotune's 1/1 ✅" in only_good


def test_megabits_at_interpolates_the_samples() -> None:
    from benchmarks.bench_transfer import delivered_points, megabits_at

    pts = delivered_points([{"t_s": 1.0, "goodput_mbps": 10.0}, {"t_s": 2.0, "goodput_mbps": 30.0}])
    assert pts == [(0.0, 0.0), (1.0, 10.0), (2.0, 40.0)]
    assert megabits_at(pts, 1.5) == pytest.approx(25.0)
    assert megabits_at(pts, 5.0) == 40.0  # past the end: all of it


def _eight_seconds(
    direction: str, auto: tuple[float, int, int], drs: tuple[float, int, int]
) -> Any:
    """An 8 s autotune/DRS pair, each (Mbit/s, retransmits, buffer held throughout)."""
    from benchmarks.bench_drs_targets import Pair

    return Pair(
        8.0,
        direction,
        _run("autotune", auto[0], 8.1, auto[1], auto[2], auto[2]),
        _run("drs", drs[0], 8.1, drs[1], drs[2], drs[2]),
    )


def test_drs_targets_on_a_lossy_path_set_memory_beside_autotunes() -> None:
    from benchmarks.bench_drs_targets import path_key, render_path

    bdp = 1_250_000
    run = _eight_seconds("up", (85.0, 1700, 16 * MB), (82.0, 90, int(3.9 * bdp)))
    text = render_path(100e6, 0.1, [run], loss=0.002)
    assert "### 100 ms x 100 Mbit/s, 0.2 % random loss each way" in text
    assert "peak <= 3 BDP" not in text  # a clean path's target
    assert f"DRS peak at most {3.9 * bdp / (16 * MB):.2f} of autotune's" in text
    assert path_key(100e6, 0.1, 0.002) == "100ms x 100Mbit/s at 0.2 % loss"
    assert path_key(100e6, 0.1) == "100ms x 100Mbit/s"


def test_drs_targets_with_delay_jitter_name_it_and_keep_the_clean_targets() -> None:
    import argparse

    from benchmarks.bench_drs_targets import add_path_arguments, path_key, render_path

    bdp = 600_000
    run = _eight_seconds("down", (72.4, 885, 26 * MB), (71.4, 0, int(2.49 * bdp)))
    text = render_path(80e6, 0.06, [run], jitter_s=0.01)
    assert "### 60 ms x 80 Mbit/s, delay jitter +-10 ms each way (order kept)" in text
    assert "peak <= 3 BDP 1/1" in text  # jitter alone keeps a clean path's targets
    assert path_key(80e6, 0.06, 0.0, 0.01) == "60ms x 80Mbit/s, jitter 10 ms"
    assert path_key(80e6, 0.06, 0.002, 0.01) == "60ms x 80Mbit/s at 0.2 % loss, jitter 10 ms"
    parser = argparse.ArgumentParser()
    add_path_arguments(parser)
    assert parser.parse_args(["--jitter", "10ms"]).jitter == 10.0
    for bad in ("x", "-1", "2000", "nan"):
        with pytest.raises(SystemExit):
            parser.parse_args(["--jitter", bad])
