"""An application that holds the rate, without a network: the app-limited flag and data in
flight turned into an observation, the verdicts for a window of its own, a sender that does
not write and a reader that does not read (conns and captures), and check's application
rule on a kernel without chrono counters."""

from __future__ import annotations

import dataclasses

from tcpwizard.advice.application import SSH_CHANNEL_WINDOW, refine_capture
from tcpwizard.advice.capture import CaptureDiagnosis
from tcpwizard.advice.conns import judge
from tcpwizard.advice.diagnose import diagnose
from tcpwizard.advice.model import Verdict
from tcpwizard.measure.observe.capture import FlowDirection
from tcpwizard.measure.observe.conns import ConnKey, DiagRecord, combine
from tcpwizard.measure.observe.tcpinfo import TcpInfo
from tests.conns_data import SYSCTLS, obs

MSS = 1448


def _record(wqueue: int, notsent: int, flags: int, acked: int, cwnd: int = 4196) -> DiagRecord:
    values = {
        "app_limited_flags": flags,
        "notsent_bytes": notsent,
        "bytes_acked": acked,
        "snd_cwnd": cwnd,
        "snd_mss": MSS,
        "snd_wnd": 9_763_840,
    }
    return DiagRecord(
        ConnKey("10.0.0.1", 40000, "10.0.0.2", 22), 1, 0, 0, 0, wqueue, "cubic", None, None,
        TcpInfo(248, values),
    )  # fmt: skip


def test_observation_carries_app_limited_share_and_data_in_flight() -> None:
    series = [
        _record(2_007_340, 373_996, 0, 1_000_000),
        _record(2_000_308, 0, 1, 2_000_000),
        _record(2_064_504, 76_236, 1, 3_000_000),
        _record(2_085_244, 0, 1, 4_000_000),
    ]
    o = combine(series, 0.3)
    assert o.app_limited == 0.75
    assert (o.inflight_min, o.inflight_p50, o.inflight_max) == (1_633_344, 2_000_308, 2_085_244)
    # Nothing sent: the flag says nothing about an application that has nothing to send.
    idle = combine([_record(0, 0, 1, 5), _record(0, 0, 1, 5)], 0.3)
    assert idle.app_limited is None


# The scp of the lab: 2 MB in flight against cwnd 4196 x 1448 and a 9.8 MB peer window.
SCP = obs(
    send_mbps=80.6,
    busy=1.0,
    rtt_ms=201.9,
    min_rtt_ms=200.1,
    snd_cwnd=4196,
    snd_wnd_min=9_761_792,
    snd_wnd_max=9_763_840,
    app_limited=0.88,
    inflight_min=1_986_276,
    inflight_p50=2_040_000,
    inflight_max=2_099_776,
    samples=16,
)


def test_an_ssh_window_is_the_application_at_both_ends_named_by_process() -> None:
    d = judge(SCP, SYSCTLS, program="ssh", pid=24430)
    v = d.verdict
    assert v is not None
    assert (v.limiting_factor, v.host_to_fix) == ("application", "both")
    assert v.explanation.startswith("ssh (pid 24430) keeps at most 2.1 MB in flight")
    assert any("app-limited in 88% of 16 samples" in e for e in v.evidence)
    assert any("channel window of 2 MB" in e for e in v.evidence)
    assert not any("cwnd-limited" in e for e in v.evidence)
    assert [f.id for f in d.fixes] == ["ssh-channel-window"]
    assert "HPN-SSH" in d.fixes[0].command and "parallel" in d.fixes[0].command
    sftp = judge(SCP, SYSCTLS, program="sftp")
    assert "sftp -R" in sftp.fixes[0].command


def test_another_programs_window_is_its_own_application_here() -> None:
    d = judge(SCP, SYSCTLS, program="stunnel")
    v = d.verdict
    assert v is not None and (v.limiting_factor, v.host_to_fix) == ("application", "local")
    assert [f.id for f in d.fixes] == ["application-window"]
    assert d.fixes[0].value == str(SCP.inflight_max)


def test_a_sender_that_does_not_write_is_the_application_here() -> None:
    # App-limited, in flight swinging from nothing to 1 MB: no ceiling, the writer is slow.
    o = dataclasses.replace(SCP, inflight_min=0, inflight_p50=400_000, inflight_max=1_000_000)
    d = judge(o, SYSCTLS, program="rsync", pid=7)
    v = d.verdict
    assert v is not None and (v.limiting_factor, v.host_to_fix) == ("application", "local")
    assert v.explanation.startswith("rsync (pid 7) does not write fast enough") and d.fixes == ()


def test_a_bulk_sender_is_not_the_application() -> None:
    # Rarely app-limited, or most of the peer's window in flight: TCP sets the rate.
    for o in (
        dataclasses.replace(SCP, app_limited=0.1),
        dataclasses.replace(SCP, inflight_min=8_400_000, inflight_max=9_000_000),
        dataclasses.replace(SCP, app_limited=None),
    ):
        v = judge(o, SYSCTLS, program="ssh").verdict
        assert v is not None and v.limiting_factor == "path-capacity", o


def test_a_window_limited_sender_keeps_its_tcp_verdict() -> None:
    o = dataclasses.replace(SCP, rwnd_limited=0.5, snd_wnd_min=2_100_000, snd_wnd_max=2_100_000)
    v = judge(o, SYSCTLS, program="ssh").verdict
    assert v is not None and v.limiting_factor == "receiver-window"


def test_an_ssh_receiver_at_one_channel_window_per_rtt() -> None:
    rate = SSH_CHANNEL_WINDOW * 8 / 0.2 / 1e6  # 2 MB per 200 ms
    o = obs(
        send_mbps=0.1,
        recv_mbps=rate,
        rcv_rtt_ms=200.0,
        min_rtt_ms=200.0,
        rcv_wnd_min=9_000_000,
        rcv_wnd_max=9_700_000,
    )
    d = judge(o, SYSCTLS, program="sshd", pid=9)
    v = d.verdict
    assert v is not None and (v.limiting_factor, v.host_to_fix) == ("application", "both")
    assert [f.id for f in d.fixes] == ["ssh-channel-window"]
    # Half that rate is not one window per round trip: no claim.
    slow = dataclasses.replace(o, recv_mbps=rate / 3)
    assert judge(slow, SYSCTLS, program="sshd").verdict.limiting_factor == "path-capacity"  # type: ignore[union-attr]
    assert judge(o, SYSCTLS, program="nginx").verdict.limiting_factor == "path-capacity"  # type: ignore[union-attr]


def test_a_reader_leaving_data_unread_is_named_without_the_buffer_size() -> None:
    # The kernel did not report the buffer's size: Recv-Q against the window offered.
    o = obs(
        send_mbps=0.0,
        recv_mbps=38.0,
        rcv_rtt_ms=150.0,
        rqueue_max=1_744_832,
        rqueue_p50=1_500_000,
        rcvbuf=None,
        rcv_wnd_min=448_512,
        rcv_wnd_max=1_737_728,
        rcv_space=384_744,
    )
    v = judge(o, SYSCTLS, program="iperf3", pid=5).verdict
    assert v is not None and (v.limiting_factor, v.host_to_fix) == ("application", "local")
    assert v.explanation.startswith("iperf3 (pid 5) here does not read fast enough")
    assert any("tcpi_rcv_space" in e for e in v.evidence)
    # A fast reader behind a small buffer leaves nothing unread: its window.
    small = dataclasses.replace(
        o, rqueue_max=900_000, rqueue_p50=0, rcv_wnd_min=1_737_728, recv_mbps=90.0
    )
    assert judge(small, SYSCTLS).verdict.limiting_factor == "receiver-window"  # type: ignore[union-attr]


def _flow(**kw: object) -> FlowDirection:
    base: dict[str, object] = dict(
        sender="10.0.0.1", sender_port=40000, receiver="10.0.0.2", receiver_port=22,
        handshake=True, sender_syn=None, receiver_syn=None, scaling=True, bytes=100_000_000,
        data_packets=70_000, retransmits=0, retransmitted_bytes=0, loss_episodes=0,
        late_loss_episodes=0, first_t=0.0, last_t=10.0, rate_mbps=80.0, steady_mbps=80.0,
        rtt_min_ms=200.0, rtt_p50_ms=201.0, rtt_samples=1000, mss=1448, max_window=9_700_000,
        window_p50=9_700_000, inflight_p50=2_000_000, inflight_max=2_100_000,
        window_full_share=0.0, zero_windows=0, zero_window_s=0.0, idle_share=0.0,
    )  # fmt: skip
    base.update(kw)
    fields = {f.name for f in dataclasses.fields(FlowDirection)}
    return FlowDirection(**{k: v for k, v in base.items() if k in fields})  # type: ignore[arg-type]


def _capture(d: FlowDirection, factor: str) -> CaptureDiagnosis:
    v = Verdict(factor, 0.65, "local", "x", ("e",))  # type: ignore[arg-type]
    return CaptureDiagnosis(d, v, (), "local", "peer")


def test_a_captured_ssh_session_below_its_window_is_the_channel_window() -> None:
    out = refine_capture(_capture(_flow(), "sender-buffer"))
    assert (out.verdict.limiting_factor, out.verdict.host_to_fix) == ("application", "both")
    assert [f.id for f in out.fixes] == ["ssh-channel-window"]
    # Not SSH, or in flight near the window: the caller's verdict stands.
    for d in (_flow(receiver_port=5201), _flow(inflight_max=9_000_000, inflight_p50=8_500_000)):
        assert refine_capture(_capture(d, "sender-buffer")).verdict.limiting_factor == (
            "sender-buffer"
        )


def test_chrono_less_kernel_does_not_make_every_slow_transfer_the_application() -> None:
    from tcpwizard.advice.evidence import Evidence
    from tests.model_builders import audit, mode, path, transfer_of

    no_chrono = Evidence(audit(), audit(), path(50, 100), transfer_of(mode(20, busy=0.0)))
    assert diagnose(no_chrono).verdict.limiting_factor != "application"
    idle = Evidence(audit(), audit(), path(50, 100), transfer_of(mode(20, busy=0.3)))
    assert diagnose(idle).verdict.limiting_factor == "application"


def test_a_captured_window_far_below_what_the_receiver_offered_is_its_reader() -> None:
    reader = _flow(receiver_port=5201, max_window=15_682_560, window_p50=1_311_744)
    out = refine_capture(_capture(reader, "receiver-window"))
    assert (out.verdict.limiting_factor, out.verdict.host_to_fix) == ("application", "peer")
    assert "10.0.0.2:5201" in out.verdict.explanation and out.fixes == ()
    # A small buffer read at once: the whole of it offered each time, its window.
    small = _flow(receiver_port=5201, max_window=262_144, window_p50=250_000)
    assert refine_capture(_capture(small, "receiver-window")).verdict.limiting_factor == (
        "receiver-window"
    )


def test_a_zero_window_with_the_window_below_its_largest_is_the_reader() -> None:
    # Measured in the lab: a reader under a CPU quota, zero twice, median 51 % of the largest.
    reader = _flow(receiver_port=5201, max_window=1_415_168, window_p50=721_920, zero_windows=2)
    out = refine_capture(_capture(reader, "receiver-window"))
    assert out.verdict.limiting_factor == "application"
    # A fixed buffer read at once, zero for a moment: still its window.
    blip = _flow(receiver_port=5201, max_window=262_144, window_p50=260_000, zero_windows=1)
    assert refine_capture(_capture(blip, "receiver-window")).verdict.limiting_factor == (
        "receiver-window"
    )
