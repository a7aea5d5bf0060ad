"""The transfer bench's decisions and table, without a lab: when `overprovisioned` must be
forced to reach the host's TCP ceiling, and what the summary lines compute."""

from __future__ import annotations

from tcpwizard.measure.bench_transfer import (
    BenchRow,
    force_overprovisioned,
    iperf_window,
    render_table,
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
    assert "| overprovisioned* | 1 | 90.0 |" in text
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
