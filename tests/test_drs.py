"""DRS core logic with an injected clock, and the sender's echo over real sockets."""

from __future__ import annotations

import math
import socket
import threading
from typing import cast

import pytest

from tcpwizard.measure.engine import buffers, datapath, drs
from tcpwizard.measure.engine.drs import (
    DrsConfig,
    DrsReceiver,
    DrsReceiverChannel,
    format_sbuf,
    parse_sbuf,
)
from tcpwizard.measure.observe.tcpinfo import TcpInfo

MBIT = 1e6


def test_sbuf_format_round_trips() -> None:
    line = format_sbuf(12.345678, 65536)
    assert line == b"SBUF 12.345678 65536\n"
    assert parse_sbuf(line) == (12.345678, 65536)
    for bad in (b"SBUF 1.0\n", b"SBUF x 10\n", b"SBUF 1.0 -5\n", b"PING 1 2\n", b"SBUF nan 5\n"):
        assert parse_sbuf(bad) is None


def _feed(rx: DrsReceiver, now: float, sent_at: float) -> None:
    assert rx.on_echo(format_sbuf(sent_at, 1), now) == pytest.approx(now - sent_at)


def _settled(cfg: DrsConfig, rtt: float = 0.05) -> DrsReceiver:
    rx = DrsReceiver(cfg, now=0.0)
    _feed(rx, rtt, 0.0)
    rx.startup = False
    return rx


def test_bdp_sets_a_2x_bdp_buffer() -> None:
    """50 Mbit/s x 50 ms: BDP 312.5 kB; the request is BDP (Linux doubles it to 2 x BDP)."""
    cfg = DrsConfig(max_request=64 << 20, max_shrink=0.0)
    bdp = 50 * MBIT / 8 * 0.05
    assert _settled(cfg).target_request(50 * MBIT) == int(bdp)
    no_double = DrsConfig(max_request=64 << 20, kernel_doubles=False, max_shrink=0.0)
    assert _settled(no_double).target_request(50 * MBIT) == int(2 * bdp)


def _slow_start(rx: DrsReceiver, rtt: float, first: int, rounds: int) -> list[tuple[int, int]]:
    """Tick once per RTT while the bytes per RTT double (slow start not held back by the
    receiver). Returns (bytes received in that RTT, window the new buffer offers)."""
    got, total, now = first, 0, 0.0
    out: list[tuple[int, int]] = []
    for _ in range(rounds):
        now += rtt
        total += got
        d = rx.tick(now, total)
        assert d is not None
        rx.applied = rx.request  # what the channel does with the answer (no shrinks here)
        out.append((got, int(2 * rx.request * rx.config.window_share)))
        got *= 2
    return out


def test_startup_window_stays_ahead_of_slow_start() -> None:
    """Slow start doubles the bytes per RTT; a window set now reaches the sender half an
    RTT later and must carry it until the next update: >= 2 x the last RTT's bytes x the
    growth, which is 4x in slow start (the in-kernel DRS's 2x, plus the growth)."""
    cfg = DrsConfig(max_request=64 << 20, initial_interval_s=0.1)
    rx = DrsReceiver(cfg, now=0.0)
    assert rx.on_rtt(0.1, 0.0)  # the handshake's RTT (TCP_INFO), before any echo
    assert rx.interval_s == pytest.approx(0.1)
    rounds = _slow_start(rx, 0.1, 10 * 1448, 8)
    assert rx.startup
    for got, window in rounds:
        # (the first tick knows no growth yet and assumes slow start's doubling)
        assert window >= 0.999 * 4 * got
    # 8 RTTs of doubling from 10 segments: the last RTT brought 1.85 MB, the window
    # offered for the next one is 7.4 MB (the sender could have 3.7 MB in flight).
    assert rounds[-1][1] == pytest.approx(4 * 1853440, rel=0.001)


def test_startup_never_shrinks_and_ends_after_three_flat_rtts_at_2_bdp() -> None:
    cfg = DrsConfig(max_request=64 << 20)
    rx = DrsReceiver(cfg, now=0.0)
    rx.on_rtt(0.05, 0.0)
    bw = 100 * MBIT
    per_rtt = int(bw / 8 * 0.05)
    now, total, last = 0.0, 0, rx.request
    for _ in range(4):  # the pipe is full: the same bytes every RTT (the first sets the mark)
        assert rx.startup
        now += 0.05
        total += per_rtt
        rx.tick(now, total)
        if rx.startup:
            assert rx.request >= last  # startup never shrinks
        last = rx.request
    assert not rx.startup
    # With no growth the startup rule asked for a window of 2 x the bytes per RTT.
    assert 2 * last * cfg.window_share >= 2 * per_rtt * 0.99
    # After startup, the target comes down to 2 x BDP memory (the request is the BDP),
    # each step at most halving.
    for _ in range(10):
        now += rx.interval_s
        total += int(bw / 8 * rx.interval_s)
        rx.tick(now, total)
        assert rx.request >= int(cfg.max_shrink * last) - 1
        last = rx.request
    assert last == pytest.approx(per_rtt, rel=0.01)


def test_startup_growth_factor_is_bounded() -> None:
    """A jump of 10x in one interval (a backlog landing) counts as at most a doubling."""
    rx = DrsReceiver(DrsConfig(max_request=64 << 20), now=0.0)
    rx.on_rtt(0.1, 0.0)
    rx.target_request(1 * MBIT)
    req = rx.target_request(10 * MBIT)
    window = 2 * req * rx.config.window_share
    per_rtt = 10 * MBIT / 8 * 0.1
    assert window == pytest.approx(2 * per_rtt * 2, rel=0.01)


def test_receiver_only_rtt_from_tcp_info() -> None:
    """Without a DRS channel every RTT is a TCP_INFO sample (handshake, rcv_rtt): the BDP
    uses their minimum, the interval their smoothed value."""
    rx = DrsReceiver(DrsConfig(), now=0.0)
    assert rx.rtt_s is None and rx.interval_s == rx.config.initial_interval_s
    assert rx.on_rtt(0.080, 0.0)
    assert not rx.on_rtt(0.0, 0.1) and not rx.on_rtt(float("nan"), 0.1)
    rx.on_rtt(0.120, 0.2)  # queueing
    assert rx.rtt_s == pytest.approx(0.080)
    assert rx.srtt_s == pytest.approx(0.085)


# ---------------------------------------------------------------- the shrink rule


def _shrinking(target: int, applied: int) -> DrsReceiver:
    rx = DrsReceiver(DrsConfig(max_request=64 << 20), now=0.0, initial_request=applied)
    rx.on_rtt(0.1, 0.0)
    rx.request = target
    return rx


def test_shrink_clamps_the_window_first_and_waits_for_data_in_flight() -> None:
    rx = _shrinking(target=1_000_000, applied=2_000_000)
    fits = int(0.5 * 2 * 1_000_000)  # what a 2 MB (memory) buffer surely holds
    step = rx.step(0.0, offered=2_400_000)
    assert step.clamp is not None and step.clamp < fits and step.rcvbuf is None
    # The old window is still open: the buffer stays.
    for t, offered in ((0.05, 2_400_000), (0.1, 1_500_000), (0.15, fits + 1)):
        step = rx.step(t, offered=offered)
        assert step.rcvbuf is None and step.clamp is None
        assert rx.applied == 2_000_000
    # Unread data counts too.
    assert rx.step(0.2, offered=fits - 1000, unread=2000).rcvbuf is None
    step = rx.step(0.25, offered=step_clamp(rx), unread=0)
    assert step.rcvbuf == 1_000_000 and step.open_clamp
    assert rx.applied == 1_000_000
    assert rx.step(0.3, offered=100).rcvbuf is None  # done: nothing more to do


def step_clamp(rx: DrsReceiver) -> int:
    return int(0.5 * 2 * rx.request) * 7 // 8


def test_shrink_without_rcv_wnd_waits_two_rtts() -> None:
    rx = _shrinking(target=1_000_000, applied=2_000_000)
    assert rx.step(0.0, offered=None).clamp is not None
    assert rx.step(0.15, offered=None).rcvbuf is None
    assert rx.step(0.2, offered=None).rcvbuf == 1_000_000


def test_a_slightly_higher_target_keeps_the_wait_already_done() -> None:
    rx = _shrinking(target=1_000_000, applied=2_000_000)
    assert rx.step(0.0, offered=None).clamp is not None
    rx.request = 1_050_000  # the bandwidth filter moved a little
    assert rx.step(0.15, offered=None).clamp is not None
    assert rx.step(0.2, offered=None).rcvbuf == 1_050_000  # 2 RTTs after the first clamp


def test_growth_is_applied_at_once_and_cancels_a_waiting_shrink() -> None:
    rx = _shrinking(target=1_000_000, applied=2_000_000)
    assert rx.step(0.0, offered=3_000_000).clamp is not None
    rx.request = 3_000_000
    step = rx.step(0.1, offered=3_000_000)
    assert step.rcvbuf == 3_000_000 and step.open_clamp and step.clamp is None
    assert rx.step(0.2, offered=3_000_000) == drs.BufferStep()


def test_a_lower_target_while_waiting_lowers_the_clamp_again() -> None:
    rx = _shrinking(target=1_000_000, applied=2_000_000)
    first = rx.step(0.0, offered=3_000_000).clamp
    rx.request = 500_000
    second = rx.step(0.05, offered=3_000_000).clamp
    assert first is not None and second is not None and second < first


def test_the_buffer_never_holds_less_than_the_offered_window() -> None:
    """A whole transfer's worth of ticks and steps against a simple model of the kernel:
    the advertised window follows min(clamp, share x buffer) but never retracts its right
    edge. Whatever the targets do, no SO_RCVBUF ever leaves the offered window without
    room (the drop measured with the old DRS)."""
    cfg = DrsConfig(max_request=64 << 20)
    rx = DrsReceiver(cfg, now=0.0)
    rx.on_rtt(0.08, 0.0)
    rate = 60 * MBIT / 8
    now, total, offered = 0.0, 0, int(2 * cfg.min_request * 0.6)
    clamp = math.inf
    memory = 2.0 * rx.applied
    violations = 0
    for i in range(600):
        now += 0.01
        total += int(min(rate, offered / 0.08) * 0.01)
        rx.tick(now, total)
        if i >= 300:
            rx.request = cfg.min_request  # an abrupt drop of the target, held
        step = rx.step(now, int(offered))
        if step.clamp is not None:
            clamp = step.clamp
        if step.rcvbuf is not None:
            # A larger buffer is always safe (the old one held the window); a smaller one
            # must hold what is offered.
            if 2.0 * step.rcvbuf < memory and offered > cfg.safe_share * 2.0 * step.rcvbuf:
                violations += 1
            memory = 2.0 * step.rcvbuf
        if step.open_clamp:
            clamp = math.inf
        natural = min(clamp, 0.6 * memory)
        # The right edge does not retract: the window shrinks only as data consumes it.
        offered = int(max(natural, offered - rate * 0.01))
    assert violations == 0
    assert rx.applied == cfg.min_request  # and the shrink did complete
    assert rx.waiting_shrinks > 0  # ...after waiting for the window to drain


def test_fast_growth_restarts_startup() -> None:
    rx = _settled(DrsConfig(max_request=64 << 20))
    rx.target_request(20 * MBIT)
    assert not rx.startup
    rx.target_request(30 * MBIT)  # +50% in one interval: our window was the limit
    assert rx.startup


def test_bandwidth_filter_ignores_a_one_interval_dip() -> None:
    rx = _settled(DrsConfig(max_request=64 << 20, max_shrink=0.0))
    rx.target_request(50 * MBIT)
    # A loss halves one interval's delivery: the buffer must not follow the dip.
    assert rx.target_request(20 * MBIT) == int(50 * MBIT / 8 * 0.05)


def test_clamped_to_host_limits() -> None:
    cfg = DrsConfig(max_request=1 << 20, min_request=65536, max_shrink=0.0)
    assert _settled(cfg, 0.1).target_request(10_000 * MBIT) == 1 << 20
    assert _settled(cfg, 0.1).target_request(0.001 * MBIT) == 65536


def test_interval_adapts_to_rtt_within_bounds() -> None:
    cfg = DrsConfig()
    rx = DrsReceiver(cfg, now=0.0)
    assert rx.interval_s == cfg.initial_interval_s  # no RTT yet
    _feed(rx, 0.0002, 0.0)  # loopback-like 200 us
    assert rx.interval_s == cfg.min_interval_s
    slow = _settled(cfg, 0.5)  # 500 ms path
    assert slow.interval_s == cfg.max_interval_s
    mid = DrsReceiver(cfg, now=0.0)
    _feed(mid, 0.04, 0.0)
    assert mid.interval_s == pytest.approx(cfg.startup_interval_rtts * 0.04)
    mid.startup = False
    assert mid.interval_s == pytest.approx(cfg.interval_rtts * 0.04)


def test_several_sbufs_in_flight_and_min_rtt() -> None:
    """Echoes carry their own timestamp: out-of-order and overlapping echoes each give
    their RTT, and the estimate is the minimum (queueing inflates the others)."""
    rx = DrsReceiver(DrsConfig(), now=0.0)
    _feed(rx, 0.30, 0.10)  # 200 ms (queued)
    _feed(rx, 0.31, 0.25)  # 60 ms, sent later, came back nearly together
    _feed(rx, 0.32, 0.20)  # 120 ms
    assert rx.rtt_s == pytest.approx(0.06)
    assert rx.on_echo(b"garbage\n", 0.4) is None
    assert rx.on_echo(format_sbuf(5.0, 1), 0.4) is None  # from the future: ignored
    assert rx.rtt_s == pytest.approx(0.06)


def test_tick_measures_bytes_per_interval() -> None:
    cfg = DrsConfig(initial_interval_s=0.1, max_request=64 << 20)
    rx = DrsReceiver(cfg, now=0.0)
    assert rx.tick(0.05, 1000) is None  # interval not over
    d = rx.tick(0.1, 1_250_000)  # 100 Mbit/s
    assert d is not None
    assert d.bandwidth_bps == pytest.approx(100 * MBIT)
    assert d.rtt_s is None and d.bdp_bytes is None  # no echo yet: keep the buffer
    assert d.request == cfg.min_request
    parsed = parse_sbuf(d.message)
    assert parsed is not None
    sent_at, request = parsed
    assert sent_at == pytest.approx(0.1) and request == d.request
    _feed(rx, 0.12, 0.1)  # 20 ms
    d2 = rx.tick(0.2, 2_500_000)
    assert d2 is not None
    assert d2.bdp_bytes == pytest.approx(100 * MBIT / 8 * 0.02, abs=2)
    assert rx.max_request >= d2.request


def test_line_buffer_is_bounded() -> None:
    lb = drs.LineBuffer()
    assert lb.feed(b"SBUF 1 2\nSBUF 3") == [b"SBUF 1 2\n"]
    assert lb.feed(b" 4\n") == [b"SBUF 3 4\n"]
    with pytest.raises(ValueError):
        lb.feed(b"x" * 500)


def _pair() -> tuple[socket.socket, socket.socket]:
    ls = socket.create_server(("127.0.0.1", 0))
    c = socket.create_connection(ls.getsockname(), timeout=5)
    a, _ = ls.accept()
    ls.close()
    return c, a


def test_sender_echoes_unchanged_and_sets_sndbuf() -> None:
    data_c, data_a = _pair()
    drs_c, drs_a = _pair()
    stop = threading.Event()
    sizes: list[int] = []
    result: list[str | None] = []
    t = threading.Thread(
        target=lambda: result.append(
            drs.run_echo(drs_a, data_a, stop, max_request=300_000, on_resize=sizes.append)
        )
    )
    t.start()
    try:
        lines = [format_sbuf(1.5, 100_000), format_sbuf(1.6, 5_000_000)]
        drs_c.sendall(lines[0] + lines[1][:7])  # split mid-line: must still echo whole
        drs_c.sendall(lines[1][7:])
        drs_c.settimeout(5)
        got = b""
        while got.count(b"\n") < 2:
            got += drs_c.recv(4096)
        assert got == lines[0] + lines[1]  # exactly as sent
        assert sizes == [200_000, 600_000]  # second one clamped to max_request, doubled
        assert data_a.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF) == 600_000
        drs_c.sendall(b"HELLO there\n")
        t.join(timeout=5)
        assert result and result[0] is not None and "not an SBUF" in result[0]
    finally:
        stop.set()
        t.join(timeout=5)
        for s in (data_c, data_a, drs_c, drs_a):
            s.close()


def test_receiver_only_drs_without_a_channel() -> None:
    """A far end with no DRS channel (iperf3): run_receiver with a DRS plan and no DRS
    sockets still sizes the receive buffer, with the RTT from TCP_INFO and no SBUF."""
    plan = datapath.plan_buffers("drs", buffers.read_host_limits())
    ls = socket.create_server(("127.0.0.1", 0))
    rx_sock = socket.socket()
    plan.presetup(rx_sock)
    rx_sock.connect(ls.getsockname())
    plan.postsetup(rx_sock, accepted=False)
    tx_sock, _ = ls.accept()  # an autotuned sender, as iperf3's would be
    start_rcv = rx_sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
    out: list[datapath.SideReport] = []
    t = threading.Thread(
        target=lambda: out.append(
            datapath.run_receiver(
                [rx_sock],
                drs_socks=(),
                plan=plan,
                sample_interval=0.05,
                # Loopback's BDP (~20 kB) is under stock FTP's 64 KB floor: without a lower
                # floor the right size would be the one it started with.
                drs_config=drs.DrsConfig(min_request=4096, max_request=plan.max_request),
            )
        ),
        daemon=True,
    )
    t.start()
    try:
        snd = datapath.run_sender([tx_sock], duration_s=0.8, nbytes=None)
        t.join(timeout=10)
        rcv = out[0]
        assert snd.error is None and rcv.error is None
        rtts = [s.drs_rtt_s for s in rcv.samples if s.drs_rtt_s is not None]
        assert rtts and 0 < min(rtts) < 0.05  # loopback RTT, from the kernel
        assert any(s.drs_bandwidth_bps for s in rcv.samples)
        assert any(s.rcvbuf != start_rcv for s in rcv.samples)  # the controller sized it
        assert not rcv.rcv_autotuning
    finally:
        for s in (ls, rx_sock, tx_sock):
            s.close()


def test_a_queue_building_ends_startup_at_2_bdp() -> None:
    """HyStart's delay test at the receiver: rcv_rtt 25 % above the path's RTT means the
    bottleneck's queue is filling. Startup stops there instead of another 4x window."""
    rx = DrsReceiver(DrsConfig(max_request=64 << 20), now=0.0)
    rx.on_rtt(0.1, 0.0)
    rounds = _slow_start(rx, 0.1, 10 * 1448, 7)
    assert rx.startup and rx.request > 2_000_000  # a 4x window ahead of 0.93 MB per RTT
    assert not rx.on_queue_rtt(0.12)  # 20 % above: queueing noise, startup goes on
    assert rx.on_queue_rtt(0.13)
    assert not rx.startup
    best = max(rounds[-1][0], rounds[-2][0]) / 0.1 * 8  # bit/s of the best interval
    assert rx.request == int(best / 8 * 0.1)  # 2 x BDP of memory: the request is the BDP
    assert not rx.on_queue_rtt(0.2)  # once only
    lan = DrsReceiver(DrsConfig(), now=0.0)
    lan.on_rtt(0.0005, 0.0)
    lan.target_request(100 * MBIT)
    assert not lan.on_queue_rtt(0.002)  # 4x a 0.5 ms RTT, but within timestamp noise
    # The clamp-first rule then brings the socket down without dropping what is in flight.
    assert rx.step(1.0, offered=3_000_000).clamp is not None


def test_the_buffer_floor_holds_several_segments() -> None:
    # Loopback's segments are 64 KB: a 4 KB floor would leave a window under one segment.
    ls = socket.create_server(("127.0.0.1", 0))
    with ls, socket.create_connection(ls.getsockname()) as c:
        mss = c.getsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG)
        cfg = drs._floored_for_segments(drs.DrsConfig(min_request=4096, max_request=8 << 20), c)
        assert cfg.min_request == drs.MIN_SEGMENTS * mss > 4096
        # Never above the host's limit, and a floor already high enough is kept.
        tight = drs.DrsConfig(min_request=4096, max_request=100_000)
        assert drs._floored_for_segments(tight, c).min_request == 100_000
        high = drs.DrsConfig(min_request=4 << 20)
        assert drs._floored_for_segments(high, c) is high


# ---------------------------------------------------------------- starting from a measured BDP


def _path_run(rx: DrsReceiver, rtt: float, path_bdp: float, rounds: int) -> list[int]:
    """A sender in slow start on a path that carries `path_bdp` bytes per RTT: each RTT it
    delivers the least of its cwnd (doubling from 10 segments), the window the receiver's
    buffer offers (memory x window_share) and the path's BDP. Returns the request after
    each RTT (the memory is twice that: the kernel doubles it)."""
    cwnd, total, now = 10 * 1448.0, 0, 0.0
    out: list[int] = []
    for _ in range(rounds):
        dt = rx.next_due() - now  # one RTT in startup, two after
        window = 2 * rx.applied * rx.config.window_share
        got = min(cwnd, window, path_bdp) * dt / rtt
        now += dt
        total += int(got)
        assert rx.tick(now, total) is not None
        rx.applied = rx.request  # applied at once (step()'s clamp dance is tested above)
        out.append(rx.request)
        cwnd *= 2 ** (dt / rtt)
    return out


def test_a_measured_bdp_carries_slow_start_without_a_peak() -> None:
    """Started from the probe's BDP (2 x BDP of memory), the window already carries slow
    start to the path's rate: the buffer never grows past its start on the way (the
    extrapolation that opened 4x windows at the last doubling stays off while the sender
    is below the window), and settles at 2 x the measured BDP."""
    rtt, bdp = 0.1, 100 * MBIT / 8 * 0.1
    rx = DrsReceiver(DrsConfig(max_request=64 << 20), 0.0, initial_request=int(bdp), from_bdp=True)
    rx.on_rtt(rtt, 0.0)
    requests = _path_run(rx, rtt, bdp, 16)
    assert max(requests) <= int(bdp)  # peak: 2 x BDP of memory, never above
    assert not rx.startup
    assert requests[-1] == pytest.approx(bdp, rel=0.02)  # 2 x the measured BDP


def test_a_measured_bdp_too_small_grows_once_the_window_holds_the_sender() -> None:
    """A probe that saw half the path: the sender fills the window (its bytes per RTT reach
    it), so startup grows the window as slow start would, to cover the path."""
    rtt, bdp = 0.1, 100 * MBIT / 8 * 0.1
    cfg = DrsConfig(max_request=64 << 20)
    rx = DrsReceiver(cfg, 0.0, initial_request=int(bdp / 2), from_bdp=True)
    rx.on_rtt(rtt, 0.0)
    requests = _path_run(rx, rtt, bdp, 16)
    grew = next(i for i, r in enumerate(requests) if r > bdp / 2)
    assert grew <= 8  # within the RTTs slow start takes to reach 0.6 BDP (7 from IW10)
    assert 2 * requests[-1] * cfg.window_share >= bdp  # the window covers the path
    assert max(requests) <= 1.5 * bdp  # the buffer never passed 3 x BDP on the way


def test_a_stock_start_still_keeps_ahead_of_slow_start() -> None:
    """Without a measured BDP the window is grown ahead of slow start (a window sized to
    the last RTT would be caught up with before the next update)."""
    rtt, bdp = 0.1, 100 * MBIT / 8 * 0.1
    rx = DrsReceiver(DrsConfig(max_request=64 << 20), 0.0)
    rx.on_rtt(rtt, 0.0)
    requests = _path_run(rx, rtt, bdp, 16)
    assert 2 * max(requests) * rx.config.window_share >= bdp
    assert requests[-1] == pytest.approx(bdp, rel=0.05)


def test_a_stale_rtt_does_not_shrink_below_a_measured_start() -> None:
    """The first rcv_rtt after the control exchange echoes an old timestamp (hundreds of
    ms); with a measured BDP's buffer it must not end startup at the tiny first rate."""
    rx = DrsReceiver(DrsConfig(max_request=64 << 20), 0.0, initial_request=1_250_000, from_bdp=True)
    rx.on_rtt(0.1, 0.0)
    rx.tick(0.1, 14_480)
    assert rx.on_queue_rtt(0.6)
    assert rx.request == 1_250_000
    stock = DrsReceiver(DrsConfig(max_request=64 << 20), 0.0, initial_request=1_250_000)
    stock.on_rtt(0.1, 0.0)
    stock.tick(0.1, 14_480)
    assert stock.on_queue_rtt(0.6) and stock.request < 1_250_000


def test_drs_starts_from_the_streams_share_of_a_measured_bdp() -> None:
    lim = buffers.HostBufferLimits(
        4 << 20, 4 << 20, (4096, 131072, 16 << 20), (4096, 16384, 16 << 20)
    )
    plan = datapath.plan_buffers("drs", lim, 1_250_000)
    assert plan.post_rcvbuf == plan.pre_sndbuf == 1_250_000 and plan.drs_from_bdp
    assert plan.pre_rcvbuf == 4 << 20  # the SYN's window scale still sees the largest
    four = datapath.plan_buffers("drs", lim, 1_250_000, streams=4)
    assert four.post_rcvbuf == 312_500
    assert datapath.plan_buffers("drs", lim, 10 << 20).post_rcvbuf == 4 << 20  # the host's cap
    stock = datapath.plan_buffers("drs", lim)
    assert stock.post_rcvbuf == buffers.UNTUNED_BYTES and not stock.drs_from_bdp
    assert datapath.drs_start_request(1000, 1, 4 << 20) == buffers.UNTUNED_BYTES  # the floor


def test_arrivals_are_segments_unless_the_kernel_counted_super_packets_as_one() -> None:
    """data_segs_in x MSS is what arrived, ahead of the in-order count while holes wait. A
    GSO packet that came through a virtio-net header (TUN, a VM's NIC) has gso_segs 0 and
    counts once: the in-order count is then far larger, and the better figure."""

    def info(**kw: int) -> TcpInfo:
        return cast(TcpInfo, kw)

    counted = DrsReceiverChannel._received
    # Holes in flight: 1,000 segments arrived, 800 of them in order.
    assert counted(info(data_segs_in=1000, rcv_mss=1448, bytes_received=800 * 1448), 0) == (
        1000 * 1448
    )
    # Super-packets of 44 segments counted once each: 100 counted, 4,400 arrived in order.
    assert counted(info(data_segs_in=100, rcv_mss=1448, bytes_received=4400 * 1448), 0) == (
        4400 * 1448
    )
    assert counted(None, 12345) == 12345
    assert counted(info(rcv_mss=1448), 777) == 777


def _settled_run(rx: DrsReceiver, bw: float, ooo_every: int | None, intervals: int) -> int:
    """Ticks at `bw` after startup; segments arrive out of order in every `ooo_every`-th
    interval (None: never). Returns the last request."""
    rx.startup = False
    now, total, ooo = 0.0, 0, 0
    for i in range(intervals):
        now += rx.interval_s
        total += int(bw / 8 * rx.interval_s)
        if ooo_every is not None and i % ooo_every == 0:
            ooo += 3
        rx.tick(now, total, ooo)
    return rx.request


def test_recurring_repairs_add_a_repairs_arrivals_to_the_window() -> None:
    """Random loss: a hole in nearly every interval holds the data behind it in the buffer
    for a repair (an RTT and RACK's quarter), on top of the bytes in flight. The buffer
    carries both, in the kernel's window share: 2 + 1.25 / 0.6 BDP of memory."""
    cfg = DrsConfig(max_request=64 << 20)
    rtt, bw = 0.05, 100 * MBIT
    bdp = bw / 8 * rtt
    lossy = DrsReceiver(cfg, 0.0)
    lossy.on_rtt(rtt, 0.0)
    request = _settled_run(lossy, bw, 1, 12)
    assert lossy.repairing
    want = (cfg.headroom + cfg.repair_rtts / cfg.window_share) * bdp / 2  # the kernel doubles
    assert request == pytest.approx(want, rel=0.02)
    clean = DrsReceiver(cfg, 0.0)
    clean.on_rtt(rtt, 0.0)
    assert _settled_run(clean, bw, None, 12) == pytest.approx(bdp, rel=0.02)
    assert not clean.repairing


def test_loss_that_does_not_recur_keeps_2_bdp() -> None:
    """BBR's bandwidth probe through a shallow queue loses once every 8 RTTs: a repair in
    one interval of four (2 RTTs each), 2 of the last 8: not recurring, 2 x BDP stays."""
    cfg = DrsConfig(max_request=64 << 20)
    rtt, bw = 0.05, 100 * MBIT
    rx = DrsReceiver(cfg, 0.0)
    rx.on_rtt(rtt, 0.0)
    assert _settled_run(rx, bw, 4, 24) == pytest.approx(bw / 8 * rtt, rel=0.02)
    assert not rx.repairing


def test_a_kernel_without_the_ooo_count_sizes_as_before() -> None:
    cfg = DrsConfig(max_request=64 << 20)
    rx = DrsReceiver(cfg, 0.0)
    rx.on_rtt(0.05, 0.0)
    rx.startup = False
    now, total = 0.0, 0
    for _ in range(12):
        now += rx.interval_s
        total += int(100 * MBIT / 8 * rx.interval_s)
        rx.tick(now, total, None)
    assert not rx.repairing
    assert rx.request == pytest.approx(100 * MBIT / 8 * 0.05, rel=0.02)


def test_a_stock_starts_slow_start_repairs_are_not_counted() -> None:
    """A stock start's slow start overshoots the path: its repairs are one episode."""
    rx = DrsReceiver(DrsConfig(max_request=64 << 20), 0.0)
    rx.on_rtt(0.05, 0.0)
    assert rx.startup
    now, total = 0.0, 0
    for i in range(6):
        now += rx.interval_s
        total += 10_000 * 2**i
        rx.tick(now, total, 3 * i)
    assert rx.startup and not rx.repairing


def test_from_a_measured_bdp_startups_repairs_count() -> None:
    """From a probe's BDP the window holds slow start near the BDP, so holes in startup are
    the path's loss: three intervals with out-of-order arrivals size for the repair before
    startup ends (at 100 ms x 100 Mbit/s with 0.2 % loss the sender was held by the window
    from 1.1 s while startup lasted to 2.1 s)."""
    rtt, bdp = 0.1, 100 * MBIT / 8 * 0.1
    cfg = DrsConfig(max_request=64 << 20)
    rx = DrsReceiver(cfg, 0.0, initial_request=int(bdp), from_bdp=True)
    rx.on_rtt(rtt, 0.0)
    now, total, ooo, bw = 0.0, 0, 0, 20 * MBIT
    for _ in range(4):
        now += rx.interval_s
        total += int(bw / 8 * rx.interval_s)
        bw *= 1.5  # still growing: startup goes on
        ooo += 5
        rx.tick(now, total, ooo)
    assert rx.startup and rx.repairing
    assert rx.request > bdp  # past the start's 2 x BDP of memory


def _window_held_path(
    rx: DrsReceiver, capacity: float, base_rtt: float, extra_rtt: float, ticks: int
) -> list[float]:
    """A sender held by our window on a path of `capacity`: each interval it moves what
    the window (the kernel's share of the buffer) carries over the RTT the data sees, up
    to the capacity. That RTT is the path's plus `extra_rtt` not of our making (jitter,
    another flow's queue) plus our own queue when the window outgrows the bottleneck.
    Returns the rate of every interval."""
    cfg = rx.config
    now, total, rates = 0.0, 0, []
    for _ in range(ticks):
        window = cfg.window_share * 2 * rx.request
        rate = min(capacity, window * 8 / (base_rtt + extra_rtt))
        own_queue_s = max(0.0, window - capacity / 8 * (base_rtt + extra_rtt)) / (capacity / 8)
        rx.on_rtt(base_rtt + extra_rtt + own_queue_s, now)
        now += rx.interval_s
        total += int(rate / 8 * rx.interval_s)
        rx.tick(now, total, offered=int(window))
        rates.append(rate)
    return rates


def test_delay_not_of_our_making_is_carried_by_the_window() -> None:
    """Jitter each way lifts the RTT the data sees to 1.6 x the path's minimum (delivery
    in order at up to delay + jitter). Sized by the minimum, the window held the sender
    below the rate it had shown and shrank with it (lab, 60 ms x 80 Mbit/s +-10 ms: DRS
    0.63 of autotune). Held below its best, the window carries the RTT it sees."""
    cfg = DrsConfig(max_request=64 << 20)
    capacity, base = 80 * MBIT, 0.05
    rx = DrsReceiver(cfg, 0.0, initial_request=int(capacity / 8 * base), from_bdp=True)
    rx.on_rtt(base, 0.0)
    rx.startup = False
    rates = _window_held_path(rx, capacity, base, 0.6 * base, 40)
    assert rates[0] < 0.8 * capacity  # the minimum's window: held below the path
    assert min(rates[-10:]) >= 0.95 * capacity
    carried = rx.carry_rtt_s
    assert carried is not None and 1.2 * base < carried <= 1.6 * base * 1.01


def test_a_queue_of_our_own_is_not_chased() -> None:
    """At the path's rate, an RTT above the minimum may be our own queue (a loss-based
    sender fills any window): the BDP keeps the minimum and the buffer 2 x BDP."""
    cfg = DrsConfig(max_request=64 << 20)
    capacity, base = 80 * MBIT, 0.05
    rx = DrsReceiver(cfg, 0.0, initial_request=int(capacity / 8 * base), from_bdp=True)
    rx.on_rtt(base, 0.0)
    rx.startup = False
    rates = _window_held_path(rx, capacity, base, 0.0, 60)
    assert min(rates) == capacity
    assert rx.carry_rtt_s is None
    assert rx.request == pytest.approx(capacity / 8 * base, rel=0.02)


def test_a_stream_yielding_to_its_siblings_keeps_the_minimum() -> None:
    """Two streams at the path's 80 Mbit/s together, their shared queue lifting the RTT to
    1.4 x the minimum: one stream falls from 60 to 20 Mbit/s as the other takes its share.
    Alone it would read "held below my best" and size by the queue's RTT; the transfer
    ran at its best throughout, so that queue is ours and the minimum stays."""
    cfg = DrsConfig(max_request=64 << 20)
    base = 0.05

    def run(together: bool) -> DrsReceiver:
        rx = DrsReceiver(cfg, 0.0, initial_request=int(40 * MBIT / 8 * base), from_bdp=True)
        rx.on_rtt(base, 0.0)
        rx.startup = False
        now, own, total = 0.0, 0, 0
        for i in range(30):
            mine = (60 if i < 10 else 20) * MBIT
            rx.on_rtt(1.4 * base, now)
            now += rx.interval_s
            own += int(mine / 8 * rx.interval_s)
            total += int(80 * MBIT / 8 * rx.interval_s)
            window = int(mine / 8 * 1.4 * base)  # the sender fills the window offered
            rx.tick(now, own, offered=window, transfer_bytes=total if together else None)
        return rx

    assert run(together=False).carry_rtt_s is not None
    assert run(together=True).carry_rtt_s is None
