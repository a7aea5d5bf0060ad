"""Every fix says which limiting factors it answers, and every factor that has fixes
reaches them: a host with everything mistuned, diagnosed with each factor named, gets
that factor's fixes (nothing matched by key spelling any more)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tcpwizard.advice.diagnose import Evidence, fixes_for
from tcpwizard.advice.model import LIMITING_FACTORS
from tcpwizard.advice.snippets import setsockopt_fix
from tcpwizard.checks import SysctlReader, audit
from tcpwizard.checks.audit import CHECKS
from tcpwizard.checks.model import BdpTarget, HostAudit, RouteInfo
from tests.fakes import interface, make_tree, network

MISTUNED = {
    "net.ipv4.tcp_rmem": "4096 65536 131072",
    "net.ipv4.tcp_wmem": "4096 16384 131072",
    "net.core.rmem_max": "131072",
    "net.core.wmem_max": "131072",
    "net.ipv4.tcp_window_scaling": "0",
    "net.ipv4.tcp_sack": "0",
    "net.ipv4.tcp_congestion_control": "reno",
    "net.ipv4.tcp_no_metrics_save": "0",
    "net.ipv4.tcp_moderate_rcvbuf": "0",
    "net.core.default_qdisc": "pfifo_fast",
}


def _mistuned(tmp: Path) -> HostAudit:
    route = RouteInfo("default", "192.0.2.1", 65535, None, None, None)
    iface = interface(
        mtu=1400,
        txqueuelen=10,
        duplex="half",
        speed_mbps=10,
        rx_errors=10**6,
        qdisc="pfifo_fast",
        route=route,
    )
    return audit(
        SysctlReader(make_tree(tmp, MISTUNED)),
        "198.51.100.7",
        BdpTarget(0.1, 1e9, "flags"),
        network=network(iface),
        ram_bytes=8 << 30,
        page_size=4096,
    )


def test_every_declared_factor_is_in_the_vocabulary() -> None:
    for check in CHECKS:
        assert set(check.answers) <= set(LIMITING_FACTORS), check.id


def test_every_factor_with_fixes_reaches_them(tmp_path: Path) -> None:
    host = _mistuned(tmp_path)
    app = (
        setsockopt_fix("SO_RCVBUF", 1 << 20, "local"),
        setsockopt_fix("SO_SNDBUF", 1 << 20, "local"),
    )
    fixes = host.fixes + app
    ev = Evidence(host, local_fixes=fixes)
    declared = {factor for f in fixes for factor in f.answers}
    # What a host this broken must be told, by factor.
    assert {
        "receiver-window",
        "sender-buffer",
        "window-scaling",
        "congestion",
        "interface",
    } <= declared
    for factor in declared:
        reached = fixes_for(ev, factor, "local")
        assert reached, f"{factor}: its fixes never reach a verdict"
        assert all(factor in f.answers for f in reached)


@pytest.mark.parametrize(
    ("factor", "key"),
    [
        ("receiver-window", "net.ipv4.tcp_rmem"),
        ("sender-buffer", "net.ipv4.tcp_wmem"),
        ("window-scaling", "net.ipv4.tcp_window_scaling"),
        ("congestion", "net.ipv4.tcp_congestion_control"),
    ],
)
def test_a_factor_gets_its_own_fix_and_not_the_others(
    tmp_path: Path, factor: str, key: str
) -> None:
    host = _mistuned(tmp_path)
    reached = fixes_for(Evidence(host, local_fixes=host.fixes), factor, "local")
    assert key in {f.key for f in reached}
    assert all(factor in f.answers for f in reached)
