"""The transfer engine over loopback sockets created here (no serve involved)."""

from __future__ import annotations

import dataclasses
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tcpwizard.measure.engine import buffers, datapath
from tcpwizard.measure.engine.datapath import BufferPlan, SideReport, plan_buffers
from tcpwizard.measure.engine.drs import DrsConfig
from tcpwizard.measure.engine.transfer import merge

LIMITS = buffers.read_host_limits()


class Link:
    """`n` loopback data connections (and DRS channels) set up the way client and serve
    do it: client sockets get the plan before and after connect, accepted ones after."""

    def __init__(self, n: int, plan: BufferPlan) -> None:
        self.ls = socket.create_server(("127.0.0.1", 0))
        self.tx: list[socket.socket] = []
        self.rx: list[socket.socket] = []
        self.drs_tx: list[socket.socket] = []
        self.drs_rx: list[socket.socket] = []
        for _ in range(n):
            # The receiver is the connecting side here (a download from serve).
            c = socket.socket()
            plan.presetup(c)
            c.connect(self.ls.getsockname())
            plan.postsetup(c, accepted=False)
            a, _ = self.ls.accept()
            plan.postsetup(a, accepted=True)
            self.rx.append(c)
            self.tx.append(a)
            if plan.drs:
                d = socket.create_connection(self.ls.getsockname())
                d.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                e, _ = self.ls.accept()
                self.drs_rx.append(d)
                self.drs_tx.append(e)

    def close(self) -> None:
        for s in (self.ls, *self.tx, *self.rx, *self.drs_tx, *self.drs_rx):
            s.close()


@pytest.fixture
def make_link() -> Iterator[Callable[[int, BufferPlan], Link]]:
    links: list[Link] = []

    def make(n: int, plan: BufferPlan) -> Link:
        links.append(Link(n, plan))
        return links[-1]

    yield make
    for link in links:
        link.close()


def _receive_in_thread(
    link: Link, plan: BufferPlan, **kw: Any
) -> tuple[threading.Thread, list[SideReport]]:
    out: list[SideReport] = []
    t = threading.Thread(
        target=lambda: out.append(
            datapath.run_receiver(link.rx, drs_socks=link.drs_rx, plan=plan, **kw)
        ),
        daemon=True,
    )
    t.start()
    return t, out


def test_plans_per_mode() -> None:
    u = plan_buffers("untuned", LIMITS)
    assert (u.pre_sndbuf, u.pre_rcvbuf) == (65536, 65536) and not u.rcv_autotuning
    a = plan_buffers("autotune", LIMITS)
    assert a.rcv_autotuning and a.pre_rcvbuf is None and a.pre_sndbuf is None
    s = plan_buffers("static", LIMITS, static_request=1_000_000)
    assert s.pre_rcvbuf == 1_000_000
    with pytest.raises(datapath.TransferError):
        plan_buffers("static", LIMITS)
    o = plan_buffers("overprovisioned", LIMITS)
    assert o.pre_rcvbuf == LIMITS.rmem_max and o.pre_sndbuf == LIMITS.wmem_max
    d = plan_buffers("drs", LIMITS)
    # Open large before connect (window scale), then back to the stock size.
    assert d.drs and d.pre_rcvbuf == LIMITS.rmem_max and d.post_rcvbuf == 65536
    assert d.max_request == min(LIMITS.rmem_max, LIMITS.wmem_max)


def test_forced_plans_reach_past_the_core_limits() -> None:
    """The root what-if: overprovisioned takes the TCP ceiling (half of tcp_rmem max as the
    request, Linux doubles it); DRS may size itself to any path, up to the force ceiling."""
    small = buffers.HostBufferLimits(
        212992, 212992, (4096, 131072, 6291456), (4096, 16384, 4194304)
    )
    o = plan_buffers("overprovisioned", small, force=True)
    assert (o.pre_rcvbuf, o.pre_sndbuf) == (6291456 // 2, 4194304 // 2)
    d = plan_buffers("drs", small, force=True)
    assert d.max_request == buffers.FORCE_CEILING // 2
    assert plan_buffers("drs", small).max_request == 212992


def test_exact_bytes_over_parallel_streams(make_link: Callable[[int, BufferPlan], Link]) -> None:
    plan = plan_buffers("autotune", LIMITS)
    link = make_link(4, plan)
    t, out = _receive_in_thread(link, plan, sample_interval=0.02)
    nbytes = 40_000_003  # not divisible by 4: the remainder must not be lost
    snd = datapath.run_sender(link.tx, duration_s=None, nbytes=nbytes, plan=plan)
    t.join(timeout=10)
    rcv = out[0]
    assert snd.error is None and rcv.error is None
    assert snd.bytes == nbytes and rcv.bytes == nbytes
    assert rcv.seconds > 0 and rcv.samples[-1].bytes == nbytes
    assert len(snd.final_tcp_info) == 4
    assert rcv.rcv_autotuning


def test_duration_is_respected_and_sampled(make_link: Callable[[int, BufferPlan], Link]) -> None:
    plan = plan_buffers("untuned", LIMITS)
    link = make_link(2, plan)
    t, out = _receive_in_thread(link, plan, sample_interval=0.05)
    t0 = time.monotonic()
    snd = datapath.run_sender(link.tx, duration_s=0.6, nbytes=None, plan=plan, sample_interval=0.05)
    t.join(timeout=10)
    assert 0.55 <= time.monotonic() - t0 < 2.0
    rcv = out[0]
    assert rcv.error is None and 0.4 < rcv.seconds < 1.5
    gaps = [b.t - a.t for a, b in zip(rcv.samples, rcv.samples[1:], strict=False)]
    assert gaps and max(gaps) <= 0.25
    # Untuned: 64 KB requested on both streams, granted doubled.
    assert all(s.rcvbuf == 2 * 2 * 65536 for s in rcv.samples)
    assert not rcv.rcv_autotuning
    assert all(s.tcp_info is not None for s in snd.samples)
    # A timed sender says when it stopped writing; what its buffers held came after.
    assert snd.write_s is not None and 0.55 <= snd.write_s <= snd.seconds
    res = merge("untuned", "down", 2, snd, rcv)
    assert res.throughput_mbps > 50
    assert res.max_buffer_bytes == 4 * 65536
    assert res.samples and res.samples[0].tcp_info is not None
    # The rates' counts are the sender's acknowledged bytes where it sampled them.
    assert res.samples[-1].delivered_by == "sender"
    assert any("autotuning" in n for n in res.notes)


def test_drs_resizes_from_echoed_sbufs(make_link: Callable[[int, BufferPlan], Link]) -> None:
    """The plumbing: SBUFs go out, come back, and both ends resize. Whether 2 x bandwidth x
    RTT on loopback exceeds 128 KB depends on the machine (on a fast one it does not), so the
    controller's floor is set above the starting buffer; the lab test covers the sizing."""
    plan = plan_buffers("drs", LIMITS)
    link = make_link(1, plan)
    start_rcv = link.rx[0].getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
    assert start_rcv == 2 * 65536  # brought back after connect
    floor = DrsConfig(max_request=plan.max_request, min_request=4 * 65536)
    t, out = _receive_in_thread(link, plan, sample_interval=0.05, drs_config=floor)
    snd = datapath.run_sender(
        link.tx, duration_s=0.8, nbytes=None, drs_socks=link.drs_tx, plan=plan
    )
    t.join(timeout=10)
    rcv = out[0]
    assert snd.error is None and rcv.error is None
    rtts = [s.drs_rtt_s for s in rcv.samples if s.drs_rtt_s is not None]
    assert rtts and 0 < min(rtts) < 0.05  # loopback: echoes came back, RTT measured
    assert rcv.max_rcvbuf != start_rcv  # the controller resized the buffer
    assert snd.max_sndbuf != 2 * 65536  # ...and the sender followed the SBUFs
    assert not rcv.rcv_autotuning


def test_receiver_vanishing_gives_error_not_hang(
    make_link: Callable[[int, BufferPlan], Link],
) -> None:
    plan = plan_buffers("autotune", LIMITS)
    link = make_link(2, plan)

    def vanish() -> None:
        time.sleep(0.3)
        for s in link.rx:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\0\0\0\0\0\0\0")
            s.close()  # RST: like a killed process with unread data

    threading.Thread(target=vanish, daemon=True).start()
    t0 = time.monotonic()
    snd = datapath.run_sender(link.tx, duration_s=5.0, nbytes=None, plan=plan, stall_timeout=2.0)
    assert time.monotonic() - t0 < 3.0
    assert snd.error is not None and "peer" in snd.error
    assert snd.bytes > 0  # partial results survive


def test_stalled_receiver_times_out(make_link: Callable[[int, BufferPlan], Link]) -> None:
    plan = plan_buffers("untuned", LIMITS)
    link = make_link(1, plan)  # nobody reads link.rx: the buffers fill, then nothing moves
    t0 = time.monotonic()
    snd = datapath.run_sender(link.tx, duration_s=5.0, nbytes=None, plan=plan, stall_timeout=0.5)
    assert time.monotonic() - t0 < 2.5
    assert snd.error is not None and "no progress" in snd.error


def test_sender_reset_is_an_error_on_the_receiver(
    make_link: Callable[[int, BufferPlan], Link],
) -> None:
    plan = plan_buffers("autotune", LIMITS)
    link = make_link(1, plan)
    t, out = _receive_in_thread(link, plan, stall_timeout=2.0)
    link.tx[0].sendall(b"x" * 100_000)
    time.sleep(0.1)
    link.tx[0].setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\0\0\0\0\0\0\0")
    link.tx[0].close()
    t.join(timeout=5)
    assert out and out[0].error is not None and out[0].bytes == 100_000


def test_report_json_round_trip_and_rejects_garbage(
    make_link: Callable[[int, BufferPlan], Link],
) -> None:
    plan = plan_buffers("untuned", LIMITS)
    link = make_link(1, plan)
    t, out = _receive_in_thread(link, plan)
    snd = datapath.run_sender(link.tx, duration_s=None, nbytes=5_000_000, plan=plan)
    t.join(timeout=5)
    for rep in (snd, out[0]):
        back = SideReport.from_json(rep.to_json())
        assert back.bytes == rep.bytes and back.role == rep.role
        assert len(back.samples) == len(rep.samples)
        assert back.final_tcp_info == rep.final_tcp_info
        assert [s.tcp_info for s in back.samples] == [s.tcp_info for s in rep.samples]
    # The receiver's offered window came over loopback, and goes apart from the rows: a
    # peer from before it reads 9-field rows, and its reports read the window as unread.
    assert any(s.tcp_info and s.tcp_info.snd_wnd > 0 for s in snd.samples)
    old = {k: v for k, v in snd.to_json().items() if k not in ("snd_wnd", "final_snd_wnd")}
    assert all(len(r[6]) == 9 for r in old["samples"] if r[6] is not None)
    assert all(
        s.tcp_info is None or s.tcp_info.snd_wnd == 0 for s in SideReport.from_json(old).samples
    )
    bad: list[object] = [None, {}, {**snd.to_json(), "role": "x"}, {**snd.to_json(), "bytes": -1}]
    bad.append({**snd.to_json(), "samples": [[1, 2]]})
    bad.append({**snd.to_json(), "snd_wnd": [-1]})
    for b in bad:
        with pytest.raises(ValueError):
            SideReport.from_json(b)


def test_merge_without_receiver_report_keeps_partial_results() -> None:
    snd = SideReport("sender", 1, bytes=1_000_000, seconds=1.0)
    snd.samples = [
        datapath.SideSample(0.5, 400_000, 0, 1000),
        datapath.SideSample(1.0, 1_000_000, 0, 1000),
    ]
    res = merge("drs", "up", 1, snd, None, error="serve closed the connection")
    assert res.error == "serve closed the connection"
    assert res.bytes == 1_000_000 and res.throughput_mbps == pytest.approx(8.0)
    assert [round(s.goodput_mbps, 3) for s in res.samples] == [6.4, 9.6]
    assert any("receiver's report was lost" in n for n in res.notes)


def test_timed_goodput_is_what_arrived_while_the_sender_wrote() -> None:
    """iperf3's convention: bytes delivered by the time the sender stopped writing, over
    that time; the send buffer's drain after it is not the test's. A fixed byte count (no
    write_s) keeps bytes over the receiver's span."""
    from tcpwizard.measure.model import TransferSample

    snd = datapath.SideReport("sender", 1, bytes=4_000_000, seconds=4.0, write_s=3.0)
    # 1 MB/s for 3 s, then a 1 MB send buffer drains in 0.25 s and the receiver is done.
    rows = [(t / 4, round(t / 4 * 1e6)) for t in range(1, 13)] + [(3.25, 4_000_000)]
    rcv = datapath.SideReport("receiver", 1, bytes=4_000_000, seconds=3.25)
    rcv.samples = [datapath.SideSample(t, b, 0, 0, None, None, None, delivered=b) for t, b in rows]
    res = merge("autotune", "up", 1, snd, rcv)
    assert abs(res.throughput_mbps - 8.0) < 1e-6  # 3 MB in 3 s, not 4 MB in 3.25 s
    assert isinstance(res.samples[0], TransferSample)
    # No sender's count beside them: the receiver's in-order bytes, said so.
    assert {s.delivered_by for s in res.samples} == {"receiver"}
    fixed = merge("autotune", "up", 1, dataclasses.replace(snd, write_s=None), rcv)
    assert abs(fixed.throughput_mbps - 4e6 * 8 / 3.25 / 1e6) < 1e-6
    # On the wire, the figure is optional both ways.
    back = datapath.SideReport.from_json(snd.to_json())
    assert back.write_s == 3.0
    legacy = snd.to_json()
    del legacy["write_s"]
    assert datapath.SideReport.from_json(legacy).write_s is None
