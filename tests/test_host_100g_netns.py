"""The 100G host checks on a REAL device: a veth pair between two throwaway namespaces, its
offloads, MTU, transmit queue and qdisc changed with the real ethtool, ip and tc, then
`ip netns exec NS tcpwizard check --json` judged, a fix applied, and judged again. What a
veth cannot show (rings, coalescing, pause, a NUMA node) must read "not available here"."""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.netns_helpers import ip, ns_check_json

pytestmark = [
    pytest.mark.netns,
    pytest.mark.skipif(
        not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root for namespaces"
    ),
    pytest.mark.skipif(
        shutil.which("ip") is None or shutil.which("ethtool") is None,
        reason="needs iproute2 and ethtool",
    ),
]


def ns_exec(ns: str, *argv: str) -> None:
    subprocess.run(["ip", "netns", "exec", ns, *argv], check=True, capture_output=True, timeout=10)


@pytest.fixture
def veth() -> Iterator[tuple[str, str]]:
    """(namespace, device): `device` in `namespace`, its peer in a second namespace, and a
    default route through it so the audit finds it as the egress interface."""
    tag = uuid.uuid4().hex[:8]
    ns, far, dev = f"twh-{tag}", f"twh-{tag}-far", f"twh{tag}"
    made: list[str] = []
    try:
        for name in (ns, far):
            ip("netns", "add", name)
            made.append(name)
        ip("link", "add", dev, "netns", ns, "type", "veth", "peer", "name", "peer0", "netns", far)
        ip("-n", ns, "addr", "add", "10.213.0.1/30", "dev", dev)
        ip("-n", far, "addr", "add", "10.213.0.2/30", "dev", "peer0")
        for name, link in ((ns, dev), (far, "peer0"), (ns, "lo")):
            ip("-n", name, "link", "set", link, "up")
        ip("-n", ns, "route", "add", "default", "via", "10.213.0.2")
    except subprocess.CalledProcessError as exc:
        for name in made:
            subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=10)
        pytest.skip(f"cannot build the veth pair: {exc.stderr.decode().strip()}")
    try:
        yield ns, dev
    finally:
        for name in made:
            subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=10)


def check(ns: str, *args: str) -> dict[str, dict[str, Any]]:
    _, doc = ns_check_json(ns, *args, timeout=60)
    fixes = {f["id"]: f["command"] for f in doc["fixes"]}
    return {
        f["id"]: {**f, "commands": [fixes[i] for i in f["fix_ids"] if i in fixes]}
        for f in doc["host"]["findings"]
    }


def test_a_real_veth_is_judged_fixed_and_judged_again(veth: tuple[str, str]) -> None:
    ns, dev = veth
    target = ("--bandwidth", "10gbit", "--rtt", "50ms", "--streams", "2")
    ns_exec(ns, "ethtool", "-K", dev, "tso", "off", "gso", "off")
    ns_exec(ns, "ip", "link", "set", "dev", dev, "mtu", "9000", "txqueuelen", "100")
    ns_exec(ns, "tc", "qdisc", "replace", "dev", dev, "root", "pfifo")
    ns_exec(ns, "sysctl", "-q", "-w", "net.ipv4.tcp_mtu_probing=0")
    found = check(ns, *target)

    offloads = found["nic_offloads"]
    assert offloads["severity"] == "warn"
    assert "tso off" in offloads["observed"] and "gso off" in offloads["observed"]
    assert any(c.startswith(f"ethtool -K {dev} ") and "tso on" in c for c in offloads["commands"])
    jumbo = found["jumbo_mtu"]
    assert jumbo["severity"] == "warn" and f"{dev} mtu 9000" in jumbo["observed"]
    assert "sysctl -w net.ipv4.tcp_mtu_probing=1" in jumbo["commands"]
    queue = found["interface_txqueuelen"]
    # 10 Gbit/s x 12.3 ms of 1500-byte packets: 10000; 100 is a tenth of that.
    assert queue["severity"] == "warn"
    assert f"ip link set dev {dev} txqueuelen 10000" in queue["commands"]
    assert found["fq_pacing"]["observed"].startswith(f"{dev}: pfifo")
    # 5 Gbit/s per stream: one real loopback flow was timed in the namespace.
    assert "one loopback flow" in found["streams_for_target"]["observed"]
    for item in ("nic_rings", "nic_coalescing", "nic_flow_control", "irq_numa"):
        assert found[item]["severity"] == "info"
        assert "not available here" in found[item]["observed"], found[item]

    # Apply the audit's own commands on the real device, then judge again.
    for command in offloads["commands"] + queue["commands"]:
        ns_exec(ns, *command.split())
    ns_exec(ns, "sysctl", "-q", "-w", "net.ipv4.tcp_mtu_probing=1")
    again = check(ns, *target)
    assert again["nic_offloads"]["severity"] == "ok", again["nic_offloads"]
    assert again["jumbo_mtu"]["severity"] == "ok"
    assert again["interface_txqueuelen"]["severity"] == "ok"
