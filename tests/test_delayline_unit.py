"""The delay line's arithmetic, driven through datagram socket pairs instead of TUN fds
(both keep packet boundaries), with explicit clocks: no root, no timing flakiness."""

from __future__ import annotations

import os
import random
import socket
from collections.abc import Iterator

import pytest

from tcpwizard.lab.delayline import Direction, LinkParams


@pytest.fixture
def pipes() -> Iterator[tuple[socket.socket, socket.socket, socket.socket, socket.socket]]:
    src_w, src_r = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    dst_w, dst_r = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    for s in (src_r, dst_r):
        s.setblocking(False)
    yield src_w, src_r, dst_w, dst_r
    for s in (src_w, src_r, dst_w, dst_r):
        s.close()


def _direction(src: socket.socket, dst: socket.socket, **kw: float) -> Direction:
    params = {"rate_bps": 8e6, "delay_s": 0.010, "jitter_s": 0.0, "loss": 0.0,
              "queue_bytes": 100_000} | kw  # fmt: skip
    p = LinkParams(**params)  # type: ignore[arg-type]
    return Direction(src.fileno(), dst.fileno(), p, random.Random(1), 1500)


def test_packets_are_serialized_at_the_rate_then_delayed(pipes: tuple[socket.socket, ...]) -> None:
    src_w, src_r, dst_w, _ = pipes
    d = _direction(src_r, dst_w)  # 8 Mbit/s: one byte per microsecond
    for _ in range(3):
        src_w.send(b"x" * 1000)
    assert d.ingest(now=1.0)
    times = [t for t, _ in d.pending]
    assert times == pytest.approx([1.011, 1.012, 1.013])


def test_an_idle_link_does_not_bank_credit(pipes: tuple[socket.socket, ...]) -> None:
    src_w, src_r, dst_w, _ = pipes
    d = _direction(src_r, dst_w)
    src_w.send(b"x" * 1000)
    d.ingest(now=1.0)
    src_w.send(b"x" * 1000)
    d.ingest(now=5.0)
    assert [t for t, _ in d.pending] == pytest.approx([1.011, 5.011])


def test_drop_tail_when_the_backlog_exceeds_the_queue(pipes: tuple[socket.socket, ...]) -> None:
    src_w, src_r, dst_w, _ = pipes
    d = _direction(src_r, dst_w, queue_bytes=3000)
    for _ in range(5):
        src_w.send(b"x" * 1000)
    d.ingest(now=0.0)
    assert (len(d.pending), d.queue_drops) == (3, 2)
    # Once the first packet has left the serializer, one more fits.
    src_w.send(b"x" * 1000)
    d.ingest(now=0.0011)
    assert (len(d.pending), d.queue_drops) == (4, 2)


def test_random_loss_follows_the_configured_fraction(pipes: tuple[socket.socket, ...]) -> None:
    src_w, src_r, dst_w, _ = pipes
    d = _direction(src_r, dst_w, rate_bps=1e12, loss=0.2, queue_bytes=10**9)
    for _ in range(40):
        for _ in range(50):
            src_w.send(b"x" * 100)
        d.ingest(now=0.0)  # one batch reads all 50
    assert d.packets_in == 2000
    assert d.lost + len(d.pending) == 2000
    assert 0.16 <= d.lost / 2000 <= 0.24


def test_jitter_never_reorders(pipes: tuple[socket.socket, ...]) -> None:
    src_w, src_r, dst_w, _ = pipes
    d = _direction(src_r, dst_w, rate_bps=1e9, jitter_s=0.005)
    for _ in range(50):
        src_w.send(b"x" * 100)
    d.ingest(now=0.0)
    times = [t for t, _ in d.pending]
    assert times == sorted(times)
    assert max(times) - min(times) > 0.001  # the jitter did spread them


def test_flush_writes_only_what_is_due_in_order(pipes: tuple[socket.socket, ...]) -> None:
    src_w, src_r, dst_w, dst_r = pipes
    d = _direction(src_r, dst_w)
    for i in range(3):
        src_w.send(bytes([i]) * 1000)
    d.ingest(now=0.0)
    wait = d.flush(now=0.0115)
    assert wait == pytest.approx(0.0005)  # the second is due at 12 ms
    assert os.read(dst_r.fileno(), 2000) == b"\0" * 1000
    with pytest.raises(BlockingIOError):
        os.read(dst_r.fileno(), 2000)
    assert d.flush(now=1.0) is None
    assert [os.read(dst_r.fileno(), 2000)[:1] for _ in range(2)] == [b"\1", b"\2"]
