"""A transfer's connections open in parallel batches while its request travels."""

from __future__ import annotations

import socket
import threading

import pytest

from tcpwizard.measure.engine.attach import BATCH, Opening, Want
from tcpwizard.measure.wire.protocol import PeerUnavailable


class _Ctrl:
    """Counts connections that are open but not yet attached (serve's half-open)."""

    def __init__(self, fail_at: int | None = None) -> None:
        self.lock = threading.Lock()
        self.half_open = 0
        self.most_half_open = 0
        self.connected = 0
        self.attached: list[tuple[str, int]] = []
        self.fail_at = fail_at
        self.socks: list[socket.socket] = []

    def connect_new(self, role: str, presetup: object = None) -> socket.socket:
        with self.lock:
            n = self.connected
            self.connected += 1
            if n == self.fail_at:
                raise PeerUnavailable("cannot open a data connection: refused")
            self.half_open += 1
            self.most_half_open = max(self.most_half_open, self.half_open)
            a, b = socket.socketpair()
            b.close()
            self.socks.append(a)
            return a

    def attach(self, sock: socket.socket, session: str, role: str, stream: int) -> None:
        with self.lock:
            self.half_open -= 1
            self.attached.append((role, stream))


def _wants(streams: int) -> list[Want]:
    return [Want("data", i, None) for i in range(streams)] + [
        Want("drs", i, None) for i in range(streams)
    ]


def test_every_connection_attaches_in_order_within_the_half_open_batch() -> None:
    ctrl = _Ctrl()
    data, drs = Opening(ctrl, _wants(10)).attach("s1")  # type: ignore[arg-type]
    assert len(data) == 10 and len(drs) == 10
    assert ctrl.attached == [("data", i) for i in range(10)] + [("drs", i) for i in range(10)]
    assert ctrl.most_half_open <= BATCH  # serve's half-open limit is never crowded
    for s in ctrl.socks:
        s.close()


def test_a_connection_that_fails_closes_every_other() -> None:
    ctrl = _Ctrl(fail_at=BATCH + 1)  # in the second batch
    opening = Opening(ctrl, _wants(BATCH))  # type: ignore[arg-type]
    with pytest.raises(PeerUnavailable):
        opening.attach("s1")
    assert ctrl.socks and all(s.fileno() == -1 for s in ctrl.socks)


def test_a_refused_request_closes_what_was_opened() -> None:
    ctrl = _Ctrl()
    opening = Opening(ctrl, _wants(2))  # type: ignore[arg-type]
    opening.close()
    assert all(s.fileno() == -1 for s in ctrl.socks)
