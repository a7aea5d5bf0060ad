"""The download probe's registration sent ahead (measure/probes/capacity.py register): its
answer waits in the socket while the upload probe runs, and is found there, against a real
serve over loopback."""

from __future__ import annotations

import select
import socket
import time

from tcpwizard.measure.probes.capacity import measure_download, register, register_acked
from tcpwizard.measure.wire import udp
from tcpwizard.measure.wire.control import ControlClient
from tests.serve_helpers import running_server


def _until_readable(sock: socket.socket, timeout: float = 2.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if select.select([sock], [], [], 0.05)[0]:
            return True
    return False


def test_an_early_registration_is_found_among_the_waiting_packets_and_used() -> None:
    with running_server() as srv, ControlClient("127.0.0.1", srv.port) as c:
        sock = c.udp_socket()
        try:
            # A stale echo reply ahead of the answer, as a late RTT echo leaves one.
            sock.send(udp.pack(udp.KIND_ECHO, c.udp_token, 1, 0, time.time_ns(), 0, 64))
            register(c, sock)
            assert _until_readable(sock)
            time.sleep(0.1)  # both answers in
            assert register_acked(sock)
            assert not register_acked(sock)  # read once: nothing is left waiting
            register(c, sock)
            assert _until_readable(sock)
            est = measure_download(c, sock, budget_s=1.0)
            assert est is not None and est.mbps > 0
        finally:
            sock.close()


def test_without_an_early_registration_nothing_counts_as_one() -> None:
    with running_server() as srv, ControlClient("127.0.0.1", srv.port) as c:
        sock = c.udp_socket()
        try:
            assert not register_acked(sock)
            sock.send(udp.pack(udp.KIND_ECHO, c.udp_token, 1, 0, time.time_ns(), 0, 64))
            assert _until_readable(sock)
            assert not register_acked(sock)  # an echo reply is not serve's registration
            est = measure_download(c, sock, budget_s=1.0)  # registers itself
            assert est is not None and est.mbps > 0
        finally:
            sock.close()
