"""The lab against real kernel TCP: RTT, rate, loss, sysctls, isolation, teardown."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid

import pytest

from tcpwizard.exitcodes import UsageError
from tcpwizard.lab import Lab, LabSpec
from tcpwizard.lab.lab import resolve_backend
from tcpwizard.lab.netem import netem_available
from tcpwizard.lab.netns import ns_list, pid_alive
from tcpwizard.lab.state import StateDir
from tcpwizard.lab.tools import iperf3_tcp, iperf3_udp, ping
from tcpwizard.lab.tun import LINE_NICE
from tcpwizard.main import main

from .lab_fixtures import LabFactory, lab_unavailable

pytestmark = pytest.mark.lab

RMEM_B = ("net.ipv4.tcp_rmem", "4096 65536 131072")
SYSCTL_SPEC = LabSpec.symmetric(
    20e6, 0.010, sysctls_a=(("net.ipv4.tcp_congestion_control", "reno"),), sysctls_b=(RMEM_B,)
)


def _unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _wait_until(cond: object, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if callable(cond) and cond():
            return True
        time.sleep(0.05)
    return False


def _gone(lab: Lab) -> bool:
    return lab.ns_a not in ns_list() and lab.ns_b not in ns_list() and not pid_alive(lab.pid)


def test_ping_min_rtt_matches_configured_rtt(lab: Lab) -> None:
    result = ping(lab, "a", count=10, interval_s=0.05)
    assert result.loss == 0
    assert 0.050 <= result.min_s <= 0.050 + 0.001


def test_the_emulator_runs_ahead_of_ordinary_processes(lab: Lab) -> None:
    # As root at the highest nice: a transfer's own processes cannot starve the wire.
    if lab.backend != "delayline":
        pytest.skip("the kernel's netem needs no process")
    expected = LINE_NICE if os.geteuid() == 0 else 0
    assert os.getpriority(os.PRIO_PROCESS, lab.pid) == expected


def test_ipv6_crosses_the_same_emulated_path(lab: Lab) -> None:
    result = ping(lab, "b", count=3, interval_s=0.05, ipv6=True)
    assert len(result.rtts_s) == 3
    assert 0.050 <= result.min_s <= 0.051


def test_tcp_transfer_runs_at_the_configured_rate(lab: Lab) -> None:
    # -R: b receives and reports per-second goodput; the first second is slow start.
    result = iperf3_tcp(lab, "b", seconds=4, extra=("-R",))
    # Goodput tops out at 1448/1500 = 96.5 % of the rate (IP bytes are what is shaped); a
    # receiver that read late at the end of the slow-start second moves some of it into
    # the next seconds (98.5 % seen), but never beyond the rate itself.
    assert 0.92 * 100e6 <= result.steady_bps(1) <= 1.0 * 100e6


@pytest.mark.parametrize("lab", [LabSpec.symmetric(100e6, 0.010, loss=0.05)], indirect=True)
def test_random_loss_is_roughly_configured(lab: Lab) -> None:
    before = lab.stats()["forward"]
    result = iperf3_udp(lab, "a", rate_bps=20e6, seconds=2, length=1000)
    assert result.sent >= 4000
    # 5000 datagrams at p = 5 %: sigma is 0.3 %, the bounds are ~5 sigma.
    assert 0.035 <= result.loss <= 0.065
    # The emulator's own counters agree with what the receiver saw missing.
    after = lab.stats()["forward"]
    assert abs((after["lost"] - before["lost"]) - result.lost) <= 0.2 * result.lost


@pytest.mark.parametrize("lab", [SYSCTL_SPEC], indirect=True)
def test_per_host_sysctls_apply_only_to_their_host(lab: Lab) -> None:
    assert lab.sysctl("b", RMEM_B[0]).split() == RMEM_B[1].split()
    assert lab.sysctl("a", RMEM_B[0]).split() != RMEM_B[1].split()
    assert lab.sysctl("a", "net.ipv4.tcp_congestion_control") == "reno"
    # The host's own setting is untouched.
    with open("/proc/sys/net/ipv4/tcp_rmem") as f:
        assert f.read().split() != RMEM_B[1].split()


def test_kill_processes_spares_the_ones_to_keep(lab: Lab) -> None:
    older = lab.popen("b", ["sleep", "30"])
    keep = lab.processes()
    newer = lab.popen("a", ["sleep", "30"])
    assert _wait_until(lambda: len(lab.processes()) == len(keep) + 1, 2)
    lab.kill_processes(keep=keep)
    assert newer.wait(timeout=2) != 0
    assert older.poll() is None
    older.kill()
    older.wait()


def test_two_labs_at_once_keep_their_own_paths(lab_factory: LabFactory) -> None:
    fast = lab_factory(LabSpec.symmetric(100e6, 0.004))
    slow = lab_factory(LabSpec.symmetric(100e6, 0.030))
    assert {fast.ns_a, fast.ns_b}.isdisjoint({slow.ns_a, slow.ns_b})
    assert 0.004 <= ping(fast, "a", 5, 0.02).min_s <= 0.005
    assert 0.030 <= ping(slow, "a", 5, 0.02).min_s <= 0.031
    assert 0.004 <= ping(fast, "a", 3, 0.02).min_s <= 0.005


def _own_lab() -> Lab:
    reason = lab_unavailable()
    if reason:
        pytest.skip(reason)
    return Lab(LabSpec.symmetric(10e6, 0.002, name=_unique("twk")))


def test_down_cleans_up_after_the_emulator_was_killed() -> None:
    lab = _own_lab()
    try:
        lab.up()
        lab.popen("b", ["sleep", "30"])  # a program inside the host must not survive either
        os.kill(lab.pid, signal.SIGKILL)
        assert _wait_until(lambda: not pid_alive(lab.pid), 3)
        assert not lab.is_up
    finally:
        lab.down()
    assert _gone(lab)
    assert StateDir().read(lab.name) is None
    lab.down()  # idempotent


def test_emulator_exits_when_its_namespaces_vanish() -> None:
    lab = _own_lab()
    try:
        lab.up()
        for ns in (lab.ns_a, lab.ns_b):
            subprocess.run(["ip", "netns", "del", ns], check=True)
        assert _wait_until(lambda: not pid_alive(lab.pid), 3)
    finally:
        lab.down()
    assert _gone(lab)


def test_a_killed_owner_takes_its_lab_with_it() -> None:
    if lab_unavailable():
        pytest.skip(str(lab_unavailable()))
    name = _unique("two")
    code = (
        "import os, sys, time\n"
        "from tcpwizard.lab import Lab, LabSpec\n"
        f"lab = Lab(LabSpec.symmetric(10e6, 0.002, name={name!r}), owner_pid=os.getpid()).up()\n"
        "print(lab.pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    owner = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    emulator = int(owner.stdout.readline())  # type: ignore[union-attr]
    owner.kill()  # like pytest killed -9: no teardown code runs
    owner.wait()
    owner.stdout.close()  # type: ignore[union-attr]
    lab = Lab(LabSpec.symmetric(10e6, 0.002, name=name))
    lab.pid = emulator
    try:
        assert _wait_until(lambda: _gone(lab), 5)
        assert StateDir().read(name) is None
    finally:
        lab.down()


def test_cli_up_exec_status_down(capsys: pytest.CaptureFixture[str]) -> None:
    if lab_unavailable():
        pytest.skip(str(lab_unavailable()))
    name = _unique("twc")
    argv = ["lab", "up", "--name", name, "--rtt", "4ms", "--rate", "20mbit"]
    try:
        assert main([*argv, "--sysctl", "b:net.ipv4.tcp_sack=0"]) == 0
        assert name in capsys.readouterr().out
        assert main(["lab", "exec", "--name", name, "b", "--", "sh", "-c", "exit 7"]) == 7
        assert Lab.attach(name).sysctl("b", "net.ipv4.tcp_sack") == "0"
        assert main(["lab", "status"]) == 0
        assert f"lab {name}: delayline" in capsys.readouterr().out
        assert main([*argv]) == 64  # already up
    finally:
        assert main(["lab", "down", "--name", name]) == 0
    assert f"{name}-a" not in ns_list()
    assert main(["lab", "down", "--name", name]) == 0  # idempotent


def test_a_second_lab_with_the_same_name_is_refused_and_harms_nothing() -> None:
    first = _own_lab()
    try:
        first.up()
        with pytest.raises(UsageError):
            Lab(first.spec).up()
        assert first.is_up
        assert ping(first, "a", 2, 0.02).loss == 0
    finally:
        first.down()
    assert _gone(first)


def test_backend_detection_picks_netem_only_when_the_kernel_has_it() -> None:
    if lab_unavailable():
        pytest.skip(str(lab_unavailable()))
    before = set(ns_list())
    has_netem = netem_available()
    assert not [ns for ns in set(ns_list()) - before if ns.startswith("twprobe-")]
    auto = LabSpec.symmetric(name="x")
    assert resolve_backend(auto) == ("netem" if has_netem else "delayline")
    if not has_netem:
        with pytest.raises(UsageError, match="sch_netem"):
            resolve_backend(LabSpec.symmetric(name="x", backend="netem"))
