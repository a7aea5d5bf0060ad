"""The test sender's own bound to its send buffer, on real loopback sockets: a writer the
kernel held gets its granted buffer as the per-send size; one holding more than that (as the
lab's IPv6 sender did, docs/bench-matrix-two-seeds.md) is told to wait."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager

from tcpwizard.measure.engine.sendcap import TAIL_SLACK, send_room


@contextmanager
def stalled_pair() -> Iterator[tuple[socket.socket, int]]:
    """A connected sender whose receiver never reads, filled until the kernel refuses more;
    yields the sender and the bytes it handed over."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        sender = socket.create_connection(server.getsockname())
        receiver, _ = server.accept()
        with sender, receiver:
            receiver.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
            sender.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 65536)
            sender.setblocking(False)
            written = 0
            block = b"x" * 65536
            for _ in range(10_000):  # bounded: the buffers hold well under this
                try:
                    written += sender.send(block)
                except BlockingIOError:
                    break
            yield sender, written


def test_a_sender_the_kernel_held_may_send_its_granted_buffer() -> None:
    with stalled_pair() as (sender, written):
        granted = sender.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF)
        assert written > 0
        assert send_room(sender, written) == granted


def test_a_sender_past_its_buffer_waits() -> None:
    with stalled_pair() as (sender, written):
        granted = sender.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF)
        # What the lab's sender held: payload past the buffer by more than the tail slack.
        assert send_room(sender, written + granted + TAIL_SLACK) == 0


def test_a_closed_socket_sets_no_bound() -> None:
    with stalled_pair() as (sender, written):
        pass
    assert send_room(sender, written) is None
