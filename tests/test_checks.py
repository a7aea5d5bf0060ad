"""Every check on fake /proc/sys trees: the tuned tree is all ok, and each mistuning is
found with the documented severity and an exact fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from tcpwizard.checks import CHECKS, SysctlReader, audit, check_ids
from tcpwizard.checks.model import BdpTarget, HostAudit, RouteInfo
from tcpwizard.checks.netinfo import NetworkFacts
from tcpwizard.checks.tcp_metrics import MetricsEntry
from tcpwizard.checks.window import DEFAULT_TARGET

from .fakes import EGRESS_HOST_CHECKS, GIB, host, interface, make_tree, network

PATH_100M_50MS = BdpTarget(rtt_s=0.050, rate_bps=100e6, source="flags")
PATH_1G_100MS = BdpTarget(rtt_s=0.100, rate_bps=1e9, source="flags")


def run(
    tmp_path: Path,
    overrides: dict[str, str | None] | None = None,
    bdp: BdpTarget | None = PATH_1G_100MS,
    net: NetworkFacts | None = None,
    target: str | None = None,
    ram: int = 16 * GIB,
) -> HostAudit:
    reader = SysctlReader(make_tree(tmp_path / "sys", overrides))
    return audit(
        reader, target, bdp, network=net or network(), ram_bytes=ram, page_size=4096, host=host()
    )


def severities(a: HostAudit) -> dict[str, str]:
    return {f.id: f.severity for f in a.findings}


def problems(a: HostAudit) -> dict[str, str]:
    return {f.id: f.severity for f in a.findings if f.severity != "ok"}


def test_every_check_is_self_describing() -> None:
    ids = check_ids()
    assert len(ids) == len(set(ids))
    for c in CHECKS:
        assert c.id and c.title and c.keys and c.why and c.guideline and c.severity_rule


def test_tuned_host_is_all_ok(tmp_path: Path) -> None:
    a = run(tmp_path)
    assert problems(a) == {}
    assert set(severities(a)) == set(check_ids())
    assert a.worst == "ok"
    assert a.fixes == ()
    assert a.hostname == "fakehost"


@pytest.mark.parametrize(
    ("overrides", "check", "severity", "fix"),
    [
        (
            {"net.ipv4.tcp_window_scaling": "0"},
            "window_scaling",
            "crit",
            "sysctl -w net.ipv4.tcp_window_scaling=1",
        ),
        ({"net.ipv4.tcp_sack": "0"}, "sack", "warn", "sysctl -w net.ipv4.tcp_sack=1"),
        (
            {"net.ipv4.tcp_timestamps": "0"},
            "timestamps",
            "warn",
            "sysctl -w net.ipv4.tcp_timestamps=1",
        ),
        # 256 KB max -> 128 KB window -> 10.5 Mbit/s at 100 ms: 1% of 1 Gbit/s.
        (
            {"net.ipv4.tcp_rmem": "4096 65536 262144"},
            "tcp_rmem",
            "crit",
            'sysctl -w net.ipv4.tcp_rmem="4096 65536 33554432"',
        ),
        # 16 MB max -> 8 MB window -> 671 Mbit/s: more than half the target.
        (
            {"net.ipv4.tcp_rmem": "4096 131072 16777216"},
            "tcp_rmem",
            "warn",
            'sysctl -w net.ipv4.tcp_rmem="4096 131072 33554432"',
        ),
        (
            {"net.ipv4.tcp_wmem": "4096 16384 4194304"},
            "tcp_wmem",
            "crit",
            'sysctl -w net.ipv4.tcp_wmem="4096 16384 33554432"',
        ),
        (
            {"net.ipv4.tcp_rmem": "4096 87380 65536"},
            "tcp_rmem",
            "warn",
            'sysctl -w net.ipv4.tcp_rmem="4096 65536 33554432"',
        ),
        (
            {"net.core.rmem_max": "212992"},
            "rmem_max",
            "warn",
            "sysctl -w net.core.rmem_max=33554432",
        ),
        (
            {"net.core.wmem_max": "212992"},
            "wmem_max",
            "warn",
            "sysctl -w net.core.wmem_max=33554432",
        ),
        (
            {"net.ipv4.tcp_moderate_rcvbuf": "0"},
            "tcp_moderate_rcvbuf",
            "crit",
            "sysctl -w net.ipv4.tcp_moderate_rcvbuf=1",
        ),
        (
            {"net.ipv4.tcp_congestion_control": "reno"},
            "congestion_control",
            "warn",
            "sysctl -w net.ipv4.tcp_congestion_control=bbr",
        ),
        (
            {"net.ipv4.tcp_no_metrics_save": "0"},
            "tcp_no_metrics_save",
            "info",
            "sysctl -w net.ipv4.tcp_no_metrics_save=1",
        ),
        (
            {"net.ipv4.tcp_mtu_probing": "0"},
            "tcp_mtu_probing",
            "info",
            "sysctl -w net.ipv4.tcp_mtu_probing=1",
        ),
        (
            {"net.ipv4.tcp_slow_start_after_idle": "1"},
            "tcp_slow_start_after_idle",
            "info",
            "sysctl -w net.ipv4.tcp_slow_start_after_idle=0",
        ),
        # tcp_mem max of 4096 pages (16 MB) cannot hold one connection's 64 MB of buffers.
        ({"net.ipv4.tcp_mem": "1024 2048 4096"}, "tcp_mem", "warn", None),
    ],
)
def test_each_mistuning_is_found_alone(
    tmp_path: Path, overrides: dict[str, str | None], check: str, severity: str, fix: str | None
) -> None:
    a = run(tmp_path, overrides)
    expected = {check: severity}
    if check == "tcp_mem":  # its pressure value cannot hold the one stream's buffers either
        expected["streams_for_target"] = "warn"
    assert problems(a) == expected
    finding = next(f for f in a.findings if f.id == check)
    assert finding.fixes, "a problem must come with a fix"
    if fix is not None:
        assert fix in [x.command for x in finding.fixes]
    assert finding.guideline and finding.message and finding.observed


def test_severity_follows_the_target(tmp_path: Path) -> None:
    overrides: dict[str, str | None] = {"net.ipv4.tcp_rmem": "4096 131072 4194304"}
    # 4 MB max -> 2 MB window: plenty for 100 Mbit/s x 50 ms (625 KB BDP) ...
    # (the 10 Gbit/s NIC's fq maxrate of 1 Gbit/s is above a 100 Mbit/s flow's share)
    assert problems(run(tmp_path / "a", overrides, PATH_100M_50MS)) == {"fq_pacing": "info"}
    # ... 17% of 1 Gbit/s x 100 ms: critical when the user says that is the path ...
    assert problems(run(tmp_path / "b", overrides, PATH_1G_100MS)) == {"tcp_rmem": "crit"}
    # ... but only a warning against the assumed default target.
    assert problems(run(tmp_path / "c", overrides, None)) == {"tcp_rmem": "warn"}


def test_default_target_is_stated(tmp_path: Path) -> None:
    a = run(tmp_path, bdp=None)
    assert a.target == DEFAULT_TARGET
    assert any("default target" in n for n in a.notes)


def test_recommendations_never_exceed_a_ram_fraction(tmp_path: Path) -> None:
    # 10 Gbit/s x 300 ms needs 750 MB buffers; a 2 GiB host gets at most RAM/16 = 128 MiB.
    huge = BdpTarget(rtt_s=0.3, rate_bps=10e9, source="flags")
    a = run(tmp_path, bdp=huge, ram=2 * GIB)
    rmem = next(f for f in a.findings if f.id == "tcp_rmem")
    assert rmem.severity == "crit"
    assert rmem.fixes[0].value == "4096 131072 134217728"
    assert "parallel streams" in rmem.message


def test_tcp_mem_above_ram_is_flagged(tmp_path: Path) -> None:
    a = run(tmp_path, {"net.ipv4.tcp_mem": "1000000 2000000 8000000"}, ram=4 * GIB)
    f = next(f for f in a.findings if f.id == "tcp_mem")
    assert f.severity == "warn"
    # scaled down to RAM/8 in pages
    assert f.fixes[0].value.split()[2] == str(4 * GIB // 8 // 4096)


def test_global_keys_hidden_in_a_namespace_are_info(tmp_path: Path) -> None:
    a = run(tmp_path, {"net.ipv4.tcp_mem": None, "net.core.default_qdisc": None})
    assert problems(a) == {"tcp_mem": "info"}


def test_reno_without_bbr_suggests_cubic(tmp_path: Path) -> None:
    a = run(
        tmp_path,
        {
            "net.ipv4.tcp_congestion_control": "reno",
            "net.ipv4.tcp_available_congestion_control": "reno cubic",
        },
    )
    f = next(f for f in a.findings if f.id == "congestion_control")
    assert [x.command for x in f.fixes] == ["sysctl -w net.ipv4.tcp_congestion_control=cubic"]


def test_bbr_without_fq_suggests_fq(tmp_path: Path) -> None:
    a = run(
        tmp_path,
        {"net.core.default_qdisc": "pfifo_fast"},
        net=network(interface(qdisc="pfifo_fast")),
    )
    assert problems(a) == {"pacing_qdisc": "info"}
    commands = {x.command for x in a.fixes}
    assert commands == {"tc qdisc replace dev eth0 root fq", "sysctl -w net.core.default_qdisc=fq"}


@pytest.mark.parametrize(
    ("changes", "check", "severity"),
    [
        ({"mtu": 1400}, "interface_mtu", "info"),
        ({"mtu": 1200}, "interface_mtu", "warn"),
        ({"txqueuelen": 10, "qdisc": "pfifo_fast"}, "interface_txqueuelen", "warn"),
        ({"txqueuelen": 500, "qdisc": "pfifo_fast"}, "interface_txqueuelen", "info"),
        ({"duplex": "half"}, "interface_link", "warn"),
        ({"speed_mbps": 100}, "interface_link", "warn"),
        ({"speed_mbps": None}, "interface_link", "info"),
        ({"tx_dropped": 50_000}, "interface_errors", "warn"),
        ({"rx_errors": 3}, "interface_errors", "info"),
    ],
)
def test_interface_checks(
    tmp_path: Path, changes: dict[str, object], check: str, severity: str
) -> None:
    a = run(tmp_path, net=network(interface(**changes)))
    expected = {check: severity}
    if changes.get("qdisc") == "pfifo_fast":  # txqueuelen bounds pfifo_fast, not fq
        expected["pacing_qdisc"] = "info"  # and BBR then runs without fq
    assert problems(a) == expected


def test_route_window_clamp_is_critical_with_a_route_fix(tmp_path: Path) -> None:
    route = RouteInfo("10.0.0.0/8", "192.0.2.1", 65535, 100.0, 4, None)
    a = run(tmp_path, net=network(interface(route=route)))
    f = next(f for f in a.findings if f.id == "route_metrics")
    assert f.severity == "crit"
    assert f.fixes[0].kind == "route"
    assert f.fixes[0].command == "ip route change 10.0.0.0/8 via 192.0.2.1 dev eth0 rtt 100ms"
    # the clamp also shows in the ceiling table: 64 KB at 100 ms is 5.24 Mbit/s
    at_100 = next(c for c in a.ceilings if c.rtt_ms == 100)
    assert at_100.receive_mbps == pytest.approx(5.24, abs=0.01)


def test_no_egress_interface_is_reported_not_fatal(tmp_path: Path) -> None:
    a = run(tmp_path, net=NetworkFacts(None, "no default route", ()))
    assert {k for k, v in problems(a).items()} == {
        "interface_link",
        "interface_mtu",
        "interface_shaper",
        "interface_txqueuelen",
        "interface_errors",
        "route_metrics",
        *EGRESS_HOST_CHECKS,
    }
    assert set(problems(a).values()) == {"info"}
    assert any("no default route" in n for n in a.notes)


def test_cached_small_ssthresh_for_the_target_is_a_warning(tmp_path: Path) -> None:
    entries = (
        MetricsEntry("198.51.100.7", 12.0, 7, 10, 101.0, "192.0.2.2"),
        MetricsEntry("198.51.100.8", 12.0, None, 10, 101.0, "192.0.2.2"),
    )
    a = run(tmp_path, net=network(metrics=entries), target="198.51.100.7")
    f = next(f for f in a.findings if f.id == "cached_metrics")
    assert f.severity == "warn"
    assert f.fixes[0].command == "ip tcp_metrics delete 198.51.100.7"
    other = run(tmp_path / "b", net=network(metrics=entries), target="198.51.100.8")
    assert problems(other) == {}


def test_ceiling_table_uses_kernel_window_math(tmp_path: Path) -> None:
    a = run(tmp_path)
    assert [c.rtt_ms for c in a.ceilings] == [10, 50, 100, 200]
    at_100 = next(c for c in a.ceilings if c.rtt_ms == 100)
    # 32 MiB buffers: a running connection advertises 62 % of the receive buffer and keeps
    # 70 % of the send buffer in flight (checks/window.py): 0.62 x 32 MiB / 0.1 s = 1664 and
    # 0.70 x 32 MiB / 0.1 s = 1879 Mbit/s; app-set buffers are 2 x 32 MiB.
    assert at_100.receive_mbps == pytest.approx(0.62 * 32 * 2**20 * 80 / 1e6, abs=0.01)
    assert at_100.send_mbps == pytest.approx(0.70 * 32 * 2**20 * 80 / 1e6, abs=0.01)
    assert at_100.receive_app_mbps == pytest.approx(2 * at_100.receive_mbps, abs=0.02)


def test_window_scaling_off_caps_the_ceiling_table(tmp_path: Path) -> None:
    a = run(tmp_path, {"net.ipv4.tcp_window_scaling": "0"})
    assert all(c.receive_mbps == c.send_mbps for c in a.ceilings)
    assert next(c for c in a.ceilings if c.rtt_ms == 10).receive_mbps == pytest.approx(52.43)
