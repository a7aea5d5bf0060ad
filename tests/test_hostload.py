"""Host load over a transfer (measure/observe/hostload.py) on a fake /proc and /sys tree, its wire
form, and the host-cpu and interface verdicts it feeds (advice/rules/)."""

from __future__ import annotations

import dataclasses
import signal
import socket
import threading
import time
from pathlib import Path

import pytest

from tcpwizard.advice.conns import judge
from tcpwizard.advice.diagnose import Evidence, diagnose
from tcpwizard.advice.rules import host_cpu, host_drops
from tcpwizard.advice.rules.host_conns import host_conn_verdict
from tcpwizard.measure.engine import datapath
from tcpwizard.measure.farends.serve import ServeFar
from tcpwizard.measure.model import ModeResult, TransferResult
from tcpwizard.measure.observe.hostload import (
    USER_HZ,
    CoreLoad,
    HostDrops,
    HostLoad,
    HostSampler,
    parse_tc_json,
    read_cpu_ticks,
    read_thread_ticks,
)
from tcpwizard.measure.wire.control import ControlClient
from tcpwizard.measure.wire.protocol import PeerSilent, PeerUnavailable
from tests import conns_data
from tests.model_builders import audit, mode, path
from tests.serve_helpers import serve_process


def _stat(rows: list[tuple[int, ...]]) -> str:
    lines = ["cpu  0 0 0 0 0 0 0 0 0 0"]
    lines += [f"cpu{i} " + " ".join(map(str, r)) + " 0 0" for i, r in enumerate(rows)]
    return "\n".join(lines) + "\nintr 0\n"


def _tree(root: Path, cpu: list[tuple[int, ...]], threads: dict[int, tuple[int, int]]) -> None:
    (root / "proc" / "net").mkdir(parents=True, exist_ok=True)
    (root / "proc" / "stat").write_text(_stat(cpu))
    for tid, (ut, st) in threads.items():
        d = root / "proc" / "self" / "task" / str(tid)
        d.mkdir(parents=True, exist_ok=True)
        # comm with a space and a parenthesis: fields follow the last ')'
        rest = ["S"] + ["0"] * 10 + [str(ut), str(st)] + ["0"] * 5
        (d / "stat").write_text(f"{tid} (py (x) y) " + " ".join(rest) + "\n")


def _drops(root: Path, softnet_dropped: int, tx_dropped: int) -> None:
    (root / "proc" / "net" / "softnet_stat").write_text(
        f"0000ff00 {softnet_dropped:08x} 00000003\n00000010 00000000 00000001\n"
    )
    stats = root / "sys" / "class" / "net" / "eth0" / "statistics"
    stats.mkdir(parents=True, exist_ok=True)
    for c in ("rx_dropped", "rx_missed_errors", "rx_fifo_errors"):
        (stats / c).write_text("0\n")
    (stats / "tx_dropped").write_text(f"{tx_dropped}\n")
    lo = root / "sys" / "class" / "net" / "lo" / "statistics"
    lo.mkdir(parents=True, exist_ok=True)
    (lo / "tx_dropped").write_text("999\n")


def test_sampler_reads_deltas_from_a_fake_tree(tmp_path: Path) -> None:
    # user nice system idle iowait irq softirq steal, in ticks
    _tree(tmp_path, [(100, 0, 50, 800, 0, 0, 50, 0), (10, 0, 10, 980, 0, 0, 0, 0)], {7: (5, 5)})
    _drops(tmp_path, 1, 10)
    now = [100.0]
    qd = [{"eth0": 4}]
    s = HostSampler(
        str(tmp_path / "proc"), str(tmp_path / "sys"), clock=lambda: now[0], qdiscs=lambda: qd[0]
    )
    # Two seconds (200 ticks per core): core 0 fully busy, half of it softirq.
    _tree(
        tmp_path,
        [(150, 0, 100, 800, 0, 0, 150, 0), (20, 0, 10, 1170, 0, 0, 0, 0)],
        {7: (105, 75), 8: (10, 0)},
    )
    _drops(tmp_path, 4, 25)
    qd[0] = {"eth0": 9}
    now[0] = 102.0
    load = s.stop()
    assert load.seconds == pytest.approx(2.0)
    c0, c1 = load.cores
    assert (c0.user, c0.system, c0.softirq, c0.busy) == pytest.approx((0.25, 0.25, 0.5, 1.0))
    assert c1.busy == pytest.approx(0.05)
    # thread 7: 170 ticks of 200; thread 8 is new: all its 10 ticks count
    assert load.busiest_thread == pytest.approx(0.85)
    assert load.process_cores == pytest.approx(0.9)
    assert load.drops == HostDrops(3, 0, 0, 0, 0, 15, 5, "eth0")


def test_readers_tolerate_a_missing_tree(tmp_path: Path) -> None:
    assert read_cpu_ticks(str(tmp_path)) == {}
    assert read_thread_ticks(str(tmp_path)) == {}
    assert parse_tc_json("not json") == {}
    assert parse_tc_json('[{"dev":"eth0","drops":3},{"dev":"eth0","drops":2},{"dev":"lo"}]') == {
        "eth0": 5
    }


def _load(starved: float = 0.0, thread: float = 0.1, drops: HostDrops | None = None) -> HostLoad:
    return HostLoad(5.0, (CoreLoad(0, 0.1, 0.1, 0.0, 0.2),), 0.1, thread, starved, drops)


def test_wire_round_trip_and_old_peers() -> None:
    rep = datapath.SideReport("receiver", 1, 10, 1.0, host_load=_load(0.7, drops=HostDrops(1, 2)))
    back = datapath.SideReport.from_json(rep.to_json())
    assert back.host_load == rep.host_load
    old = rep.to_json()
    del old["host_load"]  # a serve from before host load: nothing to read, no error
    assert datapath.SideReport.from_json(old).host_load is None
    bad = rep.to_json()
    bad["host_load"]["starved"] = -1
    with pytest.raises(ValueError, match="host_load"):
        datapath.SideReport.from_json(bad)


def _ev(*modes: object) -> Evidence:
    return Evidence(
        audit(),
        audit(),
        path(50.0, 100.0),
        TransferResult(tuple(modes), "both"),  # type: ignore[arg-type]
    )


def test_starved_far_end_is_host_cpu_at_the_peer() -> None:
    up = dataclasses.replace(mode(2.0, rwnd=0.9), receiver_load=_load(starved=0.7))
    down = dataclasses.replace(mode(95.0, direction="down"), sender_load=_load())
    d = diagnose(_ev(up, down))
    assert (d.verdict.limiting_factor, d.verdict.host_to_fix) == ("host-cpu", "peer")
    assert any(f.id == "host-cpu-quota" for f in d.fixes)
    assert any("70%" in e for e in d.verdict.evidence)


def test_a_starved_reader_without_a_probe_or_a_faster_transfer_is_host_cpu() -> None:
    """Serve starved of CPU answered no probe and moved ~24 Mbit/s both ways (lab, 50
    Mbit/s x 50 ms, a 0.5 % quota): nothing shows the path had room, but the receiver was
    held off the CPU a third of the transfer while the sender waited for its window half of
    it. Without the window wait (or the starvation) nothing is claimed."""
    probed = _ev().path
    assert probed is not None
    no_probe = dataclasses.replace(probed, capacity=None)
    up = dataclasses.replace(mode(24.6, rwnd=0.48), receiver_load=_load(starved=0.34))
    down = dataclasses.replace(mode(24.2, direction="down"), sender_load=_load())
    ev = dataclasses.replace(_ev(up, down), path=no_probe, peer=None)
    v = diagnose(ev).verdict
    assert (v.limiting_factor, v.host_to_fix) == ("host-cpu", "peer")
    assert any("window" in e for e in v.evidence)
    # However long the sender waited for the window, the starvation explains the wait.
    longer = dataclasses.replace(up, rwnd_limited=0.9)
    ev = dataclasses.replace(_ev(longer, down), path=no_probe, peer=None)
    assert diagnose(ev).verdict.limiting_factor == "host-cpu"
    for quiet in (
        dataclasses.replace(up, rwnd_limited=0.05),
        dataclasses.replace(up, receiver_load=_load(starved=0.1)),
    ):
        ev = dataclasses.replace(_ev(quiet, down), path=no_probe, peer=None)
        assert diagnose(ev).verdict.limiting_factor != "host-cpu"


@pytest.mark.parametrize(("busy", "starved"), [(0.04, 0.66), (1.0, 0.66), (0.04, 0.0)])
def test_a_starved_sender_that_left_the_path_idle_is_host_cpu(busy: float, starved: float) -> None:
    """Serve at 0.5 % of a core answered no probe and made no upload progress; its download
    had data in flight 4 % of the time while its process was held off the CPU 66 % of it
    (matrix 20261201.142, 705 Mbit/s x 5.5 ms). The idle socket shows the room, the load
    the cause; a busy sender, or one never held off the CPU, shows neither."""
    probed = _ev().path
    assert probed is not None
    no_probe = dataclasses.replace(probed, capacity=None)
    down = dataclasses.replace(
        mode(14.3, direction="down", busy=busy), sender_load=_load(starved=starved)
    )
    ev = dataclasses.replace(_ev(down), path=no_probe, peer=None)
    v = diagnose(ev).verdict
    named = (v.limiting_factor, v.host_to_fix) == ("host-cpu", "peer")
    assert named is (busy < 0.5 and starved > 0.5), v
    if named:
        assert any("data in flight only 4%" in e for e in v.evidence)


def test_an_idle_sender_beside_a_starved_receiver_names_no_cpu() -> None:
    """A receiver's shut window counts as busy time: a sender idle most of the time was
    given little to send, whatever the receiver's CPU did."""
    probed = _ev().path
    assert probed is not None
    down = dataclasses.replace(
        mode(14.3, direction="down", busy=0.04),
        sender_load=_load(),
        receiver_load=_load(starved=0.7),
    )
    ev = dataclasses.replace(_ev(down), path=dataclasses.replace(probed, capacity=None))
    assert diagnose(ev).verdict.limiting_factor != "host-cpu"


def test_a_quota_seen_in_another_transfer_of_the_check_names_the_starved_host() -> None:
    """A far end at 0.5 % of a core (lab, 50 Mbit/s x 20 ms): the autotuned upload fell
    between the quota's throttled stretches (serve starved 16 %) yet moved 12 Mbit/s, the
    sender waiting for the window 76 % of the time; the DRS upload of the same check found
    serve starved 52 %. serve answered no audit and no probe. The host short of CPU is
    named, not a receive buffer nothing showed."""
    probed = _ev().path
    assert probed is not None
    no_probe = dataclasses.replace(probed, capacity=None)
    up = dataclasses.replace(mode(12.3, rwnd=0.76), receiver_load=_load(starved=0.16))
    drs = dataclasses.replace(mode(2.3, "drs", rwnd=0.28), receiver_load=_load(starved=0.52))
    down = dataclasses.replace(mode(13.5, direction="down"), sender_load=_load(starved=0.19))
    ev = dataclasses.replace(_ev(up, drs, down), path=no_probe, peer=None)
    v = diagnose(ev).verdict
    assert (v.limiting_factor, v.host_to_fix) == ("host-cpu", "peer")
    assert any("another transfer of this check" in e for e in v.evidence)
    # No transfer of the check starved: nothing is claimed of the CPU.
    calm = dataclasses.replace(drs, receiver_load=_load(starved=0.1))
    ev = dataclasses.replace(_ev(up, calm, down), path=no_probe, peer=None)
    assert diagnose(ev).verdict.limiting_factor != "host-cpu"


def test_saturated_thread_local_sender() -> None:
    up = dataclasses.replace(mode(40.0), sender_load=_load(thread=0.99))
    d = diagnose(_ev(up, dataclasses.replace(mode(95.0, direction="down"))))
    assert (d.verdict.limiting_factor, d.verdict.host_to_fix) == ("host-cpu", "local")
    assert "cpupower frequency-set -g performance" in [f.command for f in d.fixes]


def test_cpu_at_the_limit_is_no_verdict_when_the_path_was_full() -> None:
    up = dataclasses.replace(mode(97.0), sender_load=_load(thread=0.99))
    d = diagnose(_ev(up))
    assert d.verdict.limiting_factor == "path-capacity"


def test_below_the_saturation_line_is_not_host_cpu() -> None:
    # 94 % of a core is below 1 - 2 ticks' share over 0.4 s: not proven saturated
    load = _load(thread=host_cpu.SATURATED - 0.01)
    assert host_cpu.cpu_bound(load) is None


def test_sender_drops_are_interface_at_the_sender() -> None:
    drops = HostDrops(tx_dropped=4000, interface="wan0")
    up = dataclasses.replace(
        mode(35.0, retrans=4000, cc="cubic", nbytes=9_000_000), sender_load=_load(drops=drops)
    )
    d = diagnose(_ev(up, mode(95.0, direction="down")))
    assert (d.verdict.limiting_factor, d.verdict.host_to_fix) == ("interface", "local")
    assert any("ethtool -G wan0 tx" in f.command for f in d.fixes)
    assert any("tx_dropped 4000" in e for e in d.verdict.evidence)


def test_receiver_backlog_drops_name_the_sysctls() -> None:
    drops = HostDrops(softnet_dropped=900, time_squeeze=40)
    up = dataclasses.replace(
        mode(30.0, retrans=1000, cc="cubic", nbytes=9_000_000), receiver_load=_load(drops=drops)
    )
    d = diagnose(_ev(up, mode(95.0, direction="down")))
    assert (d.verdict.limiting_factor, d.verdict.host_to_fix) == ("interface", "peer")
    keys = {f.key for f in d.fixes}
    assert {"net.core.netdev_max_backlog", "net.core.netdev_budget"} <= keys


def test_few_host_drops_beside_path_loss_are_not_the_cause() -> None:
    # 10 drops in the host, 1000 retransmissions: the path's loss is the larger part
    up = dataclasses.replace(
        mode(30.0, retrans=1000, cc="cubic", nbytes=9_000_000),
        sender_load=_load(drops=HostDrops(tx_dropped=10)),
    )
    assert host_drops.held_by_host(up) is False
    assert diagnose(_ev(up, mode(95.0, direction="down"))).verdict.limiting_factor != "interface"


def test_conns_sender_dropping_in_its_own_host_is_interface() -> None:
    o = conns_data.obs(retransmits=300, segs_out=4000, congestion_control="cubic")
    diag = judge(o, {}, 1e9)
    load = _load(drops=HostDrops(qdisc_drops=250, interface="eth0"))
    out = host_conn_verdict(diag, o, load)
    assert out.verdict is not None
    assert (out.verdict.limiting_factor, out.verdict.host_to_fix) == ("interface", "local")
    assert any("txqueuelen" in f.command for f in out.fixes)
    # no drops in the host: the verdict stays what the connection's own counters said
    assert host_conn_verdict(diag, o, _load(drops=HostDrops())) == diag


def test_conns_softirq_saturated_core_is_host_cpu() -> None:
    o = conns_data.obs()
    diag = judge(o, {}, 1e9)
    hot = HostLoad(1.0, (CoreLoad(0, 0.1, 0.2, 0.68, 0.98),), 0.0, 0.0, 0.0, HostDrops())
    out = host_conn_verdict(diag, o, hot)
    assert out.verdict is not None and out.verdict.limiting_factor == "host-cpu"


def test_a_port_that_accepts_but_never_says_hello_is_named() -> None:
    # The kernel completes the handshake for a listening socket whose process never runs:
    # what a serve starved of CPU looks like from here.
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen()
        port = srv.getsockname()[1]
        with pytest.raises(PeerUnavailable, match=r"no hello came within 0\.6 s: a serve starved"):
            ControlClient("127.0.0.1", port, timeout=0.3, starved_wait=0.6)


def test_a_stalled_serve_is_waited_for_while_its_kernel_took_the_hello() -> None:
    """A real serve stopped (SIGSTOP, as a quota throttles it) past the hello's timeout
    answers when it runs again: the check goes on, and says why it waited."""
    with serve_process() as (proc, port):
        proc.send_signal(signal.SIGSTOP)
        resume = threading.Timer(1.0, proc.send_signal, (signal.SIGCONT,))
        resume.start()
        with ControlClient("127.0.0.1", port, timeout=0.3, starved_wait=5.0) as c:
            assert 0.9 <= c.hello_wait_s < 5.0
            far = ServeFar("127.0.0.1", port, None, "far", c)
            assert any("answered its hello after" in n for n in far.notes)
        resume.join()


def test_a_serve_that_answered_and_then_went_silent_is_named_starved() -> None:
    """A real serve answers its hello, then is stopped (SIGSTOP, as a CPU quota throttles
    it) before the next request: the far end says its process does not run, and a check
    whose transfers all failed so names the far end's CPU, not `unknown`."""
    with serve_process() as (proc, port):
        far = ServeFar.reach("127.0.0.1", port, None, "far")
        assert isinstance(far, ServeFar)
        assert far.silent() is None
        proc.send_signal(signal.SIGSTOP)
        try:
            with pytest.raises(PeerSilent), far.control(0.3) as c:
                c.peer_audit()
        finally:
            proc.send_signal(signal.SIGCONT)
            far.close()
        why = far.silent()
        assert why is not None and "did not answer in time" in why
    failed = ModeResult("autotune", "up", 1, 0, 0.0, 0.0, 0, 0, (), error=why)
    ev = Evidence(audit(), None, None, TransferResult((failed,)), peer_silent=why)
    d = diagnose(ev)
    assert (d.verdict.limiting_factor, d.verdict.host_to_fix) == ("host-cpu", "peer")
    assert d.verdict.confidence == host_cpu.SILENT_CONFIDENCE
    assert any(f.key == "cpu.max" for f in d.fixes)
    assert f"missing: {why}" in d.verdict.evidence
    # Transfers that moved data are judged on what they measured, silent far end or not.
    moved = dataclasses.replace(mode(90.0), error=None)
    after = diagnose(Evidence(audit(), None, None, TransferResult((moved,)), peer_silent=why))
    assert after.verdict.limiting_factor != "host-cpu"


def test_a_far_end_silent_before_any_transfer_began_is_named_starved(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """serve answered its hello, then its control connection was dropped and the new one's
    hello went unanswered (a CPU quota holds it): the far end keeps that as its silence, and
    a check that could start no transfer at all names the far end's CPU, not `unknown`
    (scenario matrix 20261228.78: serve at 0.5 % of a core)."""
    with serve_process() as (_proc, port):
        far = ServeFar.reach("127.0.0.1", port, None, "far")
        assert isinstance(far, ServeFar)
        far.close()
        why = "port 1 at far accepted the connection but no hello came within 10 s"

        def unanswered(*_a: object, **_k: object) -> ControlClient:
            raise PeerSilent(why)

        monkeypatch.setattr("tcpwizard.measure.farends.serve.ControlClient", unanswered)
        with pytest.raises(PeerSilent), far.control(0.3):
            pass
        assert far.silent() == why
    ev = Evidence(audit(), None, path(4.1, 1259.0), None, peer_silent=why)
    d = diagnose(ev)
    assert (d.verdict.limiting_factor, d.verdict.host_to_fix) == ("host-cpu", "peer")
    assert d.verdict.confidence == host_cpu.SILENT_CONFIDENCE


def test_a_data_thread_that_ended_before_stop_still_counts() -> None:
    """A transfer's threads end before the sampler stops: their CPU time stays in the
    process's share and in the busiest thread (read from the real /proc of this process)."""
    sampler = HostSampler().start()

    used: list[float] = []

    def spin() -> None:
        # Counted on the thread's own CPU clock: on a loaded machine (the unit suite runs a
        # worker per core) a wall-clock spin got 0.2 s of CPU in 0.6 s.
        wall_end = time.monotonic() + 5.0
        while time.thread_time() < 0.4 and time.monotonic() < wall_end:
            pass
        used.append(time.thread_time())

    worker = threading.Thread(target=spin)
    worker.start()
    worker.join()
    time.sleep(0.1)
    load = sampler.stop()
    # The process keeps all of the thread's CPU seconds, less the /proc tick (10 ms) twice;
    # the busiest thread all but what it used after the sampler's last read (an interval,
    # and however late the sampler woke for it).
    tick = 2 / USER_HZ
    assert used[0] >= 0.4, used
    assert load.process_cores >= (used[0] - tick) / load.seconds, load
    missed = sampler.interval + load.starved * load.seconds + tick
    assert load.busiest_thread >= (used[0] - missed) / load.seconds, (load, missed)
