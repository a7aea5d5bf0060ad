"""TCP_INFO parsing against a real loopback connection, and tolerance of short structs."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from tcpwizard.measure.observe.tcpinfo import (
    FIELDS,
    KNOWN_SIZE,
    congestion_control,
    parse_tcp_info,
    read_tcp_info,
)


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    ls = socket.create_server(("127.0.0.1", 0))
    c = socket.create_connection(ls.getsockname(), timeout=5)
    a, _ = ls.accept()
    ls.close()
    yield c, a
    c.close()
    a.close()


def test_layout_matches_kernel_6x_struct() -> None:
    # struct tcp_info as of 6.x ends with tcpi_total_rto_time at offset 244.
    assert KNOWN_SIZE == 248
    names = [n for n, _ in FIELDS]
    assert names.index("delivery_rate") < names.index("busy_time") < names.index("rwnd_limited")


def test_real_socket_values(pair: tuple[socket.socket, socket.socket]) -> None:
    c, a = pair
    payload = b"x" * 300_000
    c.sendall(payload)
    got = 0
    while got < len(payload):
        got += len(a.recv(65536))
    info = read_tcp_info(c)
    assert info.size >= KNOWN_SIZE  # this machine runs a 6.x kernel
    assert info["state"] == 1  # TCP_ESTABLISHED
    assert info["snd_mss"] > 0
    assert info["rtt"] > 0
    assert info["snd_cwnd"] >= 1
    assert info["bytes_acked"] >= len(payload)
    assert info["bytes_sent"] >= len(payload)
    # The chrono counters are kept in jiffies and reported in whole milliseconds: a
    # misaligned layout would not land on such round values.
    assert info["busy_time"] % 1000 == 0
    assert info["rwnd_limited"] % 1000 == 0
    assert info.snd_wscale is not None and info.snd_wscale > 0  # window scaling is on
    rinfo = read_tcp_info(a)
    assert rinfo["bytes_received"] >= len(payload)
    assert rinfo["rcv_wnd"] > 0
    sample = info.to_sample()
    assert sample.snd_mss == info["snd_mss"]
    assert sample.delivery_rate_bps == info["delivery_rate"] * 8
    assert congestion_control(c) != ""


def test_short_struct_from_older_kernel(pair: tuple[socket.socket, socket.socket]) -> None:
    c, _ = pair
    full = c.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 512)
    # A 4.x kernel stopped after tcpi_total_retrans (104 bytes): no busy/delivery fields.
    old = parse_tcp_info(full[:104])
    new = parse_tcp_info(full)
    assert old.get("total_retrans") == new.get("total_retrans")
    assert old.get("rtt") == new.get("rtt")
    assert old.get("delivery_rate") is None
    assert old.get("busy_time") is None
    sample = old.to_sample()
    assert sample.busy_time_us == 0 and sample.rtt_us == new["rtt"]
    assert parse_tcp_info(b"").values == {}


def test_not_a_tcp_socket() -> None:
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        with pytest.raises(OSError):
            read_tcp_info(u)
    finally:
        u.close()
