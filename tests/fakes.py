"""Fake /proc/sys trees and network facts for unit tests of the audit."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from tcpwizard.checks.hostread import RecordedHost
from tcpwizard.checks.model import InterfaceInfo, RouteInfo
from tcpwizard.checks.netinfo import NetworkFacts
from tcpwizard.checks.tcp_metrics import MetricsEntry

GIB = 1 << 30
# The high-rate host checks that read the egress interface (its qdisc, MTU, NIC and NUMA node).
EGRESS_HOST_CHECKS = (
    "fq_pacing",
    "jumbo_mtu",
    "nic_rings",
    "nic_coalescing",
    "nic_flow_control",
    "nic_offloads",
    "irq_numa",
    "process_numa",
)

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


# ethtool 6.1's text, as it prints it for this project's VM NIC (virtio_net), with the values
# of a 100G NIC (rings of 8192 at most; adaptive coalescing; pause on; offloads on).
RINGS_TUNED = """Ring parameters for eth0:
Pre-set maximums:
RX:\t\t8192
RX Mini:\tn/a
RX Jumbo:\tn/a
TX:\t\t8192
Current hardware settings:
RX:\t\t8192
RX Mini:\tn/a
RX Jumbo:\tn/a
TX:\t\t8192
"""
RINGS_STOCK = RINGS_TUNED.rsplit("RX:", 1)[0].rsplit("Current", 1)[0] + (
    "Current hardware settings:\nRX:\t\t1024\nRX Mini:\tn/a\nRX Jumbo:\tn/a\nTX:\t\t1024\n"
)
COALESCE_TUNED = """Coalesce parameters for eth0:
Adaptive RX: on  TX: on
stats-block-usecs: n/a
sample-interval: n/a

rx-usecs: 8
rx-frames: 128
rx-usecs-irq: n/a
"""
COALESCE_PER_PACKET = COALESCE_TUNED.replace("Adaptive RX: on", "Adaptive RX: off").replace(
    "rx-usecs: 8\nrx-frames: 128", "rx-usecs: 0\nrx-frames: 1"
)
PAUSE_ON = "Pause parameters for eth0:\nAutonegotiate:\ton\nRX:\t\ton\nTX:\t\ton\n"
OFFLOADS_ON = (
    "tcp-segmentation-offload: on\ngeneric-segmentation-offload: on\ngeneric-receive-offload: on"
)


def tc_fq(maxrate_bytes: int | None = 125_000_000, kind: str = "fq") -> str:
    opts = f',"maxrate":{maxrate_bytes}' if maxrate_bytes and kind == "fq" else ""
    return f'[{{"kind":"{kind}","handle":"8001:","root":true,"options":{{"limit":10000{opts}}}}}]'


# A two-socket host (CPUs 0-7 on node 0, 8-15 on node 1) whose NIC eth0 sits on node 0, with
# its IRQs and this process on node 0, the performance governor and SMT off.
def host_values(
    ifname: str = "eth0", changes: Mapping[str, str | None] | None = None
) -> dict[str, str]:
    base: dict[str, str | None] = {
        f"cmd:tc -j qdisc show dev {ifname}": tc_fq(),
        f"cmd:ethtool -g {ifname}": RINGS_TUNED,
        f"cmd:ethtool -c {ifname}": COALESCE_TUNED,
        f"cmd:ethtool -a {ifname}": PAUSE_ON,
        f"cmd:ethtool -k {ifname}": OFFLOADS_ON,
        f"file:/sys/class/net/{ifname}/device/numa_node": "0",
        "ls:/sys/devices/system/node": "has_cpu node0 node1 online possible",
        "file:/sys/devices/system/node/node0/cpulist": "0-7",
        f"ls:/sys/class/net/{ifname}/device/msi_irqs": "120 121 122 123",
        **{f"file:/proc/irq/{i}/smp_affinity_list": str(i - 120) for i in range(120, 124)},
        "file:/sys/devices/system/cpu/online": "0-15",
        **{
            f"file:/sys/devices/system/cpu/cpu{c}/cpufreq/scaling_governor": "performance"
            for c in range(16)
        },
        "file:/sys/devices/system/cpu/smt/active": "0",
        "affinity": "0-7",
        "flow_bps": "30000000000",
    }
    base.update(changes or {})
    return {k: v for k, v in base.items() if v is not None}


def host(changes: Mapping[str, str | None] | None = None) -> RecordedHost:
    return RecordedHost(host_values("eth0", changes))
