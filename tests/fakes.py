"""Fake /proc/sys trees and network facts for unit tests of the audit."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from tcpwizard.checks.model import InterfaceInfo, RouteInfo
from tcpwizard.checks.netinfo import NetworkFacts
from tcpwizard.checks.tcp_metrics import MetricsEntry

GIB = 1 << 30

# A host tuned for 1 Gbit/s x 100 ms (the default target): nothing above "ok".
TUNED: dict[str, str] = {
    "kernel.osrelease": "6.18.0-test",
    "kernel.hostname": "fakehost",
    "net.core.rmem_max": "33554432",
    "net.core.wmem_max": "33554432",
    "net.core.default_qdisc": "fq",
    "net.ipv4.tcp_rmem": "4096\t131072\t33554432",
    "net.ipv4.tcp_wmem": "4096\t16384\t33554432",
    "net.ipv4.tcp_mem": "188888\t251851\t377776",
    "net.ipv4.tcp_adv_win_scale": "1",
    "net.ipv4.tcp_moderate_rcvbuf": "1",
    "net.ipv4.tcp_window_scaling": "1",
    "net.ipv4.tcp_sack": "1",
    "net.ipv4.tcp_timestamps": "1",
    "net.ipv4.tcp_no_metrics_save": "1",
    "net.ipv4.tcp_congestion_control": "bbr",
    "net.ipv4.tcp_available_congestion_control": "reno cubic bbr",
    "net.ipv4.tcp_allowed_congestion_control": "reno cubic bbr",
    "net.ipv4.tcp_mtu_probing": "1",
    "net.ipv4.tcp_slow_start_after_idle": "0",
}


def make_tree(root: Path, overrides: Mapping[str, str | None] | None = None) -> Path:
    """Write TUNED (with overrides; None removes a key) as a /proc/sys-like tree."""
    values: dict[str, str | None] = {**TUNED, **(overrides or {})}
    for key, value in values.items():
        if value is None:
            continue
        path = root.joinpath(*key.split("."))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(value + "\n")
    return root


def interface(**changes: object) -> InterfaceInfo:
    base: dict[str, object] = {
        "name": "eth0",
        "mtu": 1500,
        "txqueuelen": 1000,
        "qdisc": "fq",
        "speed_mbps": 10000,
        "duplex": "full",
        "is_loopback": False,
        "rx_packets": 1_000_000,
        "tx_packets": 1_000_000,
        "rx_dropped": 0,
        "tx_dropped": 0,
        "rx_errors": 0,
        "tx_errors": 0,
        "source_address": "192.0.2.2",
        "route": RouteInfo("default", "192.0.2.1", None, None, None, None),
    }
    base.update(changes)
    return InterfaceInfo(**base)  # type: ignore[arg-type]


def network(
    iface: InterfaceInfo | None = None, metrics: tuple[MetricsEntry, ...] = ()
) -> NetworkFacts:
    return NetworkFacts(iface if iface is not None else interface(), "", metrics)
