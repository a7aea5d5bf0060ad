"""UDP trains in GSO batches (measure/wire/udp.send_train_batches) on loopback: every datagram
arrives whole and in order, each batch stamped with one send time, connected or addressed."""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator

import pytest

from tcpwizard.measure.wire import udp

SIZE = 1200


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    rx.bind(("127.0.0.1", 0))
    rx.settimeout(2.0)
    yield tx, rx
    tx.close()
    rx.close()


def _stamper(stamps: dict[int, int]) -> Callable[[bytearray, int, int, int], None]:
    def stamp(buf: bytearray, offset: int, i: int, now: int) -> None:
        udp.HEADER.pack_into(buf, offset, udp.MAGIC, udp.KIND_TRAIN_DOWN, b"t" * 8, 7, i, now, 0)
        stamps[i] = now

    return stamp


def _receive(rx: socket.socket, n: int) -> list[udp.Packet]:
    got = []
    for _ in range(n):
        data = rx.recv(65536)
        assert len(data) == SIZE
        pkt = udp.unpack(data)
        assert pkt is not None
        got.append(pkt)
    return got


@pytest.mark.parametrize("connected", [True, False])
def test_a_train_leaves_in_batches_and_arrives_whole(
    pair: tuple[socket.socket, socket.socket], connected: bool
) -> None:
    tx, rx = pair
    address = rx.getsockname()
    if connected:
        tx.connect(address)
    stamps: dict[int, int] = {}
    count = 2 * udp.GSO_SEGMENTS + 5
    sent = udp.send_train_batches(tx, count, SIZE, _stamper(stamps), None if connected else address)
    assert sent == count
    got = _receive(rx, count)
    assert [p.seq for p in got] == list(range(count))
    # One send time per batch: its packets leave together.
    assert len({stamps[i] for i in range(udp.GSO_SEGMENTS)}) == 1
    assert stamps[udp.GSO_SEGMENTS] >= stamps[0]
    assert [p.client_ns for p in got] == [stamps[i] for i in range(count)]


def test_jumbo_datagrams_are_batched_within_one_call_limit(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    # 9000-byte datagrams: 32 of them would exceed one call's 64 KB, so fewer per batch.
    tx, rx = pair
    stamps: dict[int, int] = {}
    sent = udp.send_train_batches(tx, 20, 9000, _stamper(stamps), rx.getsockname())
    assert sent == 20
    sizes = [len(rx.recv(65536)) for _ in range(20)]
    assert sizes == [9000] * 20
    per_call = udp.GSO_MAX_BYTES // 9000
    assert len(set(stamps.values())) == -(-20 // per_call)  # one send time per batch
