"""DRS core logic with an injected clock, and the sender's echo over real sockets."""

from __future__ import annotations

import socket
import threading

import pytest

from tcpwizard.measure import drs
from tcpwizard.measure.drs import DrsConfig, DrsReceiver, format_sbuf, parse_sbuf

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


def test_startup_doubles_while_bandwidth_grows_then_settles() -> None:
    cfg = DrsConfig(max_request=64 << 20)
    rx = DrsReceiver(cfg, now=0.0, initial_request=65536)
    _feed(rx, 0.05, 0.0)
    # Window-limited: each step lets ~the window through (Linux advertises ~62% of the
    # buffer memory), so bandwidth keeps rising and the buffer grows 1.86x per step: the
    # doubling, cut by the 3 x BDP cap (BDP measured = the window).
    req = 65536
    for _ in range(3):
        bw = req * 2 * 0.62 * 8 / 0.05
        new = rx.target_request(bw)
        assert new == int(3 * 0.62 * req) and rx.startup
        req = rx.request = new  # what tick() does with the answer
    # The bandwidth stops growing: three flat intervals end the startup...
    for _ in range(3):
        assert rx.startup
        rx.target_request(bw)
    assert not rx.startup
    # ...and the buffer comes back towards 2 x BDP, a quarter per interval at most.
    bdp = bw / 8 * 0.05
    last = rx.request = req
    for _ in range(20):
        nxt = rx.target_request(bw)
        assert nxt >= int(0.75 * last) - 1
        last = rx.request = nxt
    assert last == pytest.approx(bdp, rel=0.01)


def test_startup_never_sizes_past_3_bdp() -> None:
    rx = DrsReceiver(DrsConfig(max_request=64 << 20), now=0.0, initial_request=1 << 20)
    _feed(rx, 0.05, 0.0)
    bw = 10 * MBIT  # BDP 62.5 kB, far below the current buffer
    # Startup still on, but 2x the current 2 MB would be 32 BDPs: capped at 3 x BDP (in
    # memory terms), then never below 3/4 of the current buffer while shrinking.
    assert rx.target_request(bw) == int(0.75 * 2 * (1 << 20) / 2)


def test_startup_cap_follows_this_intervals_rate() -> None:
    """While doubling, the 3 x BDP cap takes the latest interval's rate: the two-interval
    rate lags a window-limited connection and would hold its growth to ~1.3x per RTT."""
    rx = DrsReceiver(DrsConfig(max_request=64 << 20), now=0.0, initial_request=1 << 20)
    _feed(rx, 0.05, 0.0)
    # Sustained 80 Mbit/s over two intervals, 160 in the last one: the cap is 3 x the BDP
    # at 160 Mbit/s (3 MB of memory, so a 1.5 MB request), not at 80.
    fresh = rx.target_request(160 * MBIT, sustained_bps=80 * MBIT)
    assert fresh == int(3 * 160 * MBIT / 8 * 0.05 / 2)
    lag = DrsReceiver(DrsConfig(max_request=64 << 20), now=0.0, initial_request=1 << 20)
    _feed(lag, 0.05, 0.0)
    assert lag.target_request(80 * MBIT, sustained_bps=80 * MBIT) < fresh / 1.5


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
