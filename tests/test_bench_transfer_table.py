"""The transfer bench's decisions and table, without a lab: when `overprovisioned` must be
forced to reach the host's TCP ceiling, and what the summary lines compute."""

from __future__ import annotations

from typing import Any

from tcpwizard.lab.bench_transfer import (
    BenchRow,
    drs_needs_force,
    force_overprovisioned,
    iperf_window,
    matrix_table,
    render_table,
    short_test_table,
    time_to_share,
)
from tcpwizard.measure.buffers import HostBufferLimits

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


def test_short_test_and_matrix_tables() -> None:
    runs = [
        [_row("autotune", 100.0, 8_000_000, direction=d, t90_s=1.5) for d in ("up", "down")]
        + [_row("drs", 97.0, 8_000_000, direction=d, t90_s=1.6) for d in ("up", "down")]
    ]
    short = short_test_table(runs, 200e6, 0.18, 3.0)
    assert "| up | 100.0 | 97.0 | 0.97 (target >= 0.95) |" in short
    matrix = matrix_table([(500e6, 0.2, runs[0])])
    # The lab carried at most 100 of 500 Mbit/s (482.7 of TCP goodput): 0.21.
    assert "| 500 Mbit/s x 200 ms | up | 0.21 | 100.0, 1.50 s, 0 | 97.0, 1.60 s, 0 |" in matrix


def test_drs_is_forced_only_where_rmem_max_would_cap_it() -> None:
    lim = _limits(4 * MB, 64 * MB)
    assert not drs_needs_force(lim, 100e6, 0.1)  # 3 x 1.25 MB < 4 MiB
    assert drs_needs_force(lim, 200e6, 0.1)  # 3 x 2.5 MB > 4 MiB


def _drs_row(mode: Any, mbps: float, retr: int, t90: float | None) -> BenchRow:
    return BenchRow(mode, 1, mbps, 4 * MB, 1.0, retr, None, "", t90_s=t90)


def test_drs_targets_cell_judges_the_medians() -> None:
    from tcpwizard.lab.bench_drs_targets import _cell

    runs = [
        (_drs_row("autotune", 55.0, 800, 1.0), _drs_row("drs", 54.0, 400, 0.9)),
        (_drs_row("autotune", 55.0, 900, 1.0), _drs_row("drs", 53.0, 700, 1.3)),  # one slow run
        (_drs_row("autotune", 55.0, 850, 1.1), _drs_row("drs", 53.5, 600, 1.1)),
    ]
    lines = _cell(runs, 57.9)
    assert lines[1].endswith("| 1.30x |") and "53.0 (0.92), 700, 1.30 s" in lines[1]
    # Medians: share 53.5 / 57.9 = 0.92, time 1.0x (of 0.9, 1.3, 1.0): one slow run of three
    # does not fail the target, a slow median does.
    assert (
        lines[-1]
        == "| **median** | | | **share 0.92 ✅; retr <= autotune 3/3 ✅; time 1.00x ✅** |"
    )
    slow = [(a, _drs_row("drs", d.mbps, d.retransmits, 1.5)) for a, d in runs]
    assert "time 1.50x ❌" in _cell(slow, 57.9)[-1]
    more = [(a, _drs_row("drs", d.mbps, 2000, d.t90_s)) for a, d in runs]
    assert "retr <= autotune 0/3 ❌" in _cell(more, 57.9)[-1]
