"""The audit against REAL network namespaces whose sysctls the test changed: run
`ip netns exec NS tcpwizard check --json` and expect exactly those problems.

net.core.rmem_max/wmem_max are global and read-only inside a child namespace, so the
buffer target is modest (100 Mbit/s x 50 ms) and what to expect of them is derived from
the host's real values with the window formula of checks/window.py."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.netns_helpers import ip, ns_check_json

pytestmark = [
    pytest.mark.netns,
    pytest.mark.skipif(
        not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root for namespaces"
    ),
    pytest.mark.skipif(shutil.which("ip") is None, reason="needs iproute2"),
]

RTT_S, RATE_BPS = 0.050, 100e6
TARGET = ["--rtt", "50ms", "--bandwidth", "100mbit"]


@pytest.fixture
def netns() -> Iterator[str]:
    name = f"tw-test-{uuid.uuid4().hex[:12]}"
    try:
        ip("netns", "add", name)
    except subprocess.CalledProcessError as exc:
        pytest.skip(f"cannot create a network namespace: {exc.stderr.decode().strip()}")
    try:
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=10)


def in_ns(ns: str, *cmd: str) -> None:
    ip("netns", "exec", ns, *cmd)


def sysctl(ns: str, key: str, value: str) -> None:
    in_ns(ns, "sysctl", "-q", "-w", f"{key}={value}")


def tcpwizard(ns: str, *args: str) -> tuple[int, dict[str, object]]:
    code, doc = ns_check_json(ns, *args, timeout=30)
    assert doc["exit_code"] == code
    return code, doc


def problems(doc: dict[str, object]) -> dict[str, str]:
    host = doc["host"]
    assert isinstance(host, dict)
    return {f["id"]: f["severity"] for f in host["findings"] if f["severity"] in ("warn", "crit")}


def global_expectations() -> dict[str, str]:
    """Problems the host's global rmem_max/wmem_max cause for the modest target: an app
    gets 2 x max; half of that is window/in flight (kernels >= 6.6, or adv_win_scale 1)."""
    bdp = RATE_BPS * RTT_S / 8
    expected = {}
    for key in ("rmem_max", "wmem_max"):
        core_max = int(Path(f"/proc/sys/net/core/{key}").read_text())
        if core_max < bdp:
            expected[key] = "warn"
    return expected


def tune_well(ns: str) -> None:
    for key, value in {
        "net.ipv4.tcp_rmem": "4096 131072 16777216",
        "net.ipv4.tcp_wmem": "4096 16384 16777216",
        "net.ipv4.tcp_no_metrics_save": "1",
        "net.ipv4.tcp_mtu_probing": "1",
        "net.ipv4.tcp_slow_start_after_idle": "0",
    }.items():
        sysctl(ns, key, value)


def test_well_tuned_namespace_exits_0(netns: str) -> None:
    tune_well(netns)
    if global_expectations():
        pytest.skip("this host's global rmem_max/wmem_max are below the test target's BDP")
    code, doc = tcpwizard(netns, *TARGET)
    assert problems(doc) == {}
    assert code == 0


def test_window_scaling_off_and_small_rmem_are_critical(netns: str) -> None:
    tune_well(netns)
    sysctl(netns, "net.ipv4.tcp_window_scaling", "0")
    sysctl(netns, "net.ipv4.tcp_rmem", "4096 65536 262144")
    code, doc = tcpwizard(netns, *TARGET)
    # 256 KB max -> 128 KB window -> 21 Mbit/s at 50 ms: 21% of 100 Mbit/s.
    assert problems(doc) == {"window_scaling": "crit", "tcp_rmem": "crit", **global_expectations()}
    assert code == 2
    fixes = doc["fixes"]
    assert isinstance(fixes, list)
    commands = [f["command"] for f in fixes]
    assert "sysctl -w net.ipv4.tcp_window_scaling=1" in commands
    assert 'sysctl -w net.ipv4.tcp_rmem="4096 65536 2097152"' in commands
    # without window scaling no direction exceeds 64 KB: 10.5 Mbit/s at 50 ms
    host = doc["host"]
    assert isinstance(host, dict)
    at_50 = next(c for c in host["ceilings"] if c["rtt_ms"] == 50)
    assert at_50["receive_mbps"] == pytest.approx(10.49, abs=0.01)


def test_sack_off_is_a_warning(netns: str) -> None:
    tune_well(netns)
    sysctl(netns, "net.ipv4.tcp_sack", "0")
    code, doc = tcpwizard(netns, *TARGET)
    expected = {"sack": "warn", **global_expectations()}
    assert problems(doc) == expected
    assert code == 1


def test_route_window_clamp_found_through_netlink(netns: str) -> None:
    """A real route lookup (pyroute2) in the namespace: veth egress and a route whose
    `window` caps TCP at 64 KB."""
    tune_well(netns)
    in_ns(netns, "ip", "link", "add", "twv0", "type", "veth", "peer", "name", "twv1")
    in_ns(netns, "ip", "addr", "add", "10.201.0.1/24", "dev", "twv0")
    in_ns(netns, "ip", "link", "set", "twv0", "up")
    in_ns(netns, "ip", "link", "set", "twv1", "up")
    in_ns(netns, "ip", "route", "add", "10.202.0.0/16", "via", "10.201.0.2", "window", "65535")
    code, doc = tcpwizard(netns, "10.202.3.4", "--quick", *TARGET)
    assert problems(doc) == {"route_metrics": "crit", **global_expectations()}
    # Nothing answers at 10.202.3.4: the path is unknown (3), the route audit still stands.
    error = doc["error"]
    assert code == 3 and isinstance(error, str) and "did not answer" in error
    host = doc["host"]
    assert isinstance(host, dict)
    assert host["interface"]["name"] == "twv0"
    assert host["interface"]["route"]["window"] == 65535
    assert host["interface"]["route"]["destination"] == "10.202.0.0/16"
    fixes = doc["fixes"]
    assert isinstance(fixes, list)
    route_fixes = [f for f in fixes if f["kind"] == "route"]
    assert [f["command"] for f in route_fixes] == [
        "ip route change 10.202.0.0/16 via 10.201.0.2 dev twv0"
    ]


def test_missing_sysctl_tree_in_namespace_is_unknown(netns: str, tmp_path: Path) -> None:
    """The documented code for an audit that cannot complete, from a real process."""
    out = subprocess.run(
        [
            "ip",
            "netns",
            "exec",
            netns,
            sys.executable,
            "-c",
            "import sys; from tcpwizard.main import main; from tcpwizard.context import "
            f"Context; sys.exit(main(['check'], Context(sysctl_root={str(tmp_path)!r})))",
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert out.returncode == 3
    assert out.stderr.count("\n") == 1 and "cannot read sysctl" in out.stderr
