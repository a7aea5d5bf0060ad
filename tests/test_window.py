"""The kernel's buffer arithmetic (checks/window.py) and the sysctl reader."""

from __future__ import annotations

from pathlib import Path

import pytest

from tcpwizard.checks.sysctl import SysctlError, SysctlMissing, SysctlReader
from tcpwizard.checks.tcp_metrics import parse_tcp_metrics, read_tcp_metrics
from tcpwizard.checks.window import (
    granted_buffer,
    mbps,
    parse_kernel_version,
    space_for_window,
    window_from_space,
)

MODERN = (6, 18)
OLD = (5, 15)


def test_modern_kernel_advertises_half_the_buffer() -> None:
    assert window_from_space(131072, MODERN) == 65536
    # adv_win_scale is obsolete since 6.6 and must not change the result
    assert window_from_space(131072, MODERN, adv_win_scale=2) == 65536


@pytest.mark.parametrize(("scale", "window"), [(1, 65536), (2, 98304), (-2, 32768), (0, 131072)])
def test_old_kernel_uses_tcp_adv_win_scale(scale: int, window: int) -> None:
    assert window_from_space(131072, OLD, scale) == window


@pytest.mark.parametrize("kernel", [MODERN, OLD])
@pytest.mark.parametrize("window", [1, 1000, 65535, 12_500_000])
def test_space_for_window_is_the_smallest_inverse(kernel: tuple[int, int], window: int) -> None:
    space = space_for_window(window, kernel, 1)
    assert window_from_space(space, kernel, 1) >= window
    assert window_from_space(space - 1, kernel, 1) < window


def test_design_fact_64kb_rcvbuf_at_50ms() -> None:
    # DESIGN.md: a fixed 64 KB SO_RCVBUF at 50 ms gave 12.4 Mbit/s; window/RTT ~ 10.5.
    granted = granted_buffer(65536, 4194304)
    assert granted == 131072
    assert mbps(window_from_space(granted, MODERN), 0.050) == pytest.approx(10.49, abs=0.01)
    # the request is clamped to rmem_max before doubling
    assert granted_buffer(8 << 20, 4 << 20) == 8 << 20


def test_kernel_version_parsing() -> None:
    assert parse_kernel_version("6.18.44-fc-v669") == (6, 18)
    assert parse_kernel_version("garbage") == (0, 0)


def test_reader_normalises_vectors(tmp_path: Path) -> None:
    (tmp_path / "net" / "ipv4").mkdir(parents=True)
    (tmp_path / "net" / "ipv4" / "tcp_rmem").write_text("4096\t131072\t6291456\n")
    r = SysctlReader(tmp_path)
    assert r.read("net.ipv4.tcp_rmem") == "4096 131072 6291456"
    assert r.read_ints("net.ipv4.tcp_rmem", 3) == (4096, 131072, 6291456)
    assert r.read_optional("net.ipv4.tcp_mem") is None
    with pytest.raises(SysctlMissing, match=r"net\.ipv4\.tcp_mem"):
        r.read("net.ipv4.tcp_mem")
    with pytest.raises(SysctlError, match="expected 1 integers"):
        r.read_int("net.ipv4.tcp_rmem")


def test_reader_on_missing_root(tmp_path: Path) -> None:
    with pytest.raises(SysctlMissing, match="is not a directory"):
        SysctlReader(tmp_path / "nope").read("net.core.rmem_max")


def test_real_proc_sys_is_readable() -> None:
    r = SysctlReader()
    assert len(r.read_ints("net.ipv4.tcp_rmem", 3)) == 3


SAMPLE = """\
10.0.0.2 age 12.5sec ssthresh 7 cwnd 10 rtt 51000us rttvar 2000us source 10.0.0.1
127.0.0.1 age 254.020sec cwnd 13 rtt 451us rttvar 436us source 127.0.0.1
fe80::1 age 3sec tw_ts 1 tw_ts_stamp 2sec rtt 2ms source fe80::2
"""


def test_tcp_metrics_parsing() -> None:
    entries = parse_tcp_metrics(SAMPLE)
    assert [e.address for e in entries] == ["10.0.0.2", "127.0.0.1", "fe80::1"]
    assert entries[0].ssthresh == 7
    assert entries[0].rtt_ms == pytest.approx(51.0)
    assert entries[1].ssthresh is None
    assert entries[1].age_s == pytest.approx(254.02)
    assert entries[2].rtt_ms == pytest.approx(2.0)


def test_tcp_metrics_failure_is_a_reason_not_an_exception() -> None:
    def broken() -> str:
        raise OSError("netlink says no")

    entries, reason = read_tcp_metrics(broken)
    assert entries is None
    assert "netlink says no" in reason


def test_audit_ceiling_and_verdict_bound_share_one_window_law(tmp_path: Path) -> None:
    """A route `window` clamp limits the verdict's receive window exactly as it limits the
    audit's ceiling: both come from checks.window.running_windows."""
    from tcpwizard.advice.window_law import max_receive_window, window_limit_mbps
    from tcpwizard.checks import SysctlReader, audit
    from tcpwizard.checks.model import BdpTarget, RouteInfo
    from tests.fakes import interface, make_tree, network

    route = RouteInfo("default", "192.0.2.1", 65535, None, None, None)
    host = audit(
        SysctlReader(make_tree(tmp_path / "t", {})),
        "198.51.100.7",
        BdpTarget(0.05, 100e6, "flags"),
        network=network(interface(route=route)),
        ram_bytes=8 << 30,
        page_size=4096,
    )
    assert max_receive_window(host) == 65535
    at_50ms = next(c for c in host.ceilings if c.rtt_ms == 50)
    assert at_50ms.receive_mbps == pytest.approx(window_limit_mbps(65535, 50), abs=0.01)
