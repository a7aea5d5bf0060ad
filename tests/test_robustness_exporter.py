"""The exporter's HTTP server against clients that hold connections: a cap on connections
(the excess gets 503 at once) and a deadline for the request to arrive (a client trickling a
byte a second is cut off), with real sockets on loopback; a scrape is served throughout."""

from __future__ import annotations

import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from tcpwizard.cli import build_parser
from tcpwizard.exporter import Exporter, Target, serve_exporter
from tcpwizard.metrics_http import MAX_CLIENTS
from tests.robustness_helpers import client_threads

REQUEST = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"


@contextmanager
def exporter_on_loopback(max_clients: int = MAX_CLIENTS, deadline_s: float = 5.0) -> Iterator[int]:
    exporter = Exporter([Target("h", None)], 900.0, lambda t: {"exit_code": 0})
    server, worker = serve_exporter(exporter, "127.0.0.1:0", max_clients, deadline_s)
    try:
        yield server.server_address[1]
    finally:
        exporter.stop()
        server.shutdown()
        server.server_close()
        worker.join(timeout=5)


def scrape(port: int) -> tuple[int, float]:
    """The HTTP status of a /metrics request and the seconds it took."""
    t0 = time.monotonic()
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
            assert b"tcpwizard_up" in r.read()
            return r.status, time.monotonic() - t0
    except urllib.error.HTTPError as exc:
        return exc.code, time.monotonic() - t0


@contextmanager
def tricklers(port: int, count: int, period_s: float = 1.0) -> Iterator[list[float]]:
    """`count` clients each sending a request one byte every `period_s`, never finishing it
    in the test's time. Yields, then gives for each the seconds until the server closed it
    (float('inf') if it never did before the test ended)."""
    stop = threading.Event()
    kept: list[float] = []
    lock = threading.Lock()
    connected = threading.Barrier(count + 1)

    def client() -> None:
        t0 = time.monotonic()
        closed_after = float("inf")
        with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
            connected.wait(timeout=10)
            for byte in REQUEST:
                try:
                    s.sendall(bytes([byte]))
                    s.settimeout(period_s)
                    if s.recv(1024) == b"":
                        closed_after = time.monotonic() - t0
                        break
                except TimeoutError:
                    pass  # nothing from the server: trickle on
                except OSError:
                    closed_after = time.monotonic() - t0
                    break
                if stop.is_set():
                    break
        with lock:
            kept.append(closed_after)

    with client_threads(client, count, stop):
        connected.wait(timeout=10)
        yield kept


def test_a_scrape_is_served_while_8_clients_trickle() -> None:
    with exporter_on_loopback() as port, tricklers(port, 8):
        time.sleep(0.5)  # every trickler holds its connection
        for _ in range(3):
            status, took = scrape(port)
            assert status == 200
            assert took < 2.0


def test_a_trickling_client_is_cut_off_at_the_deadline() -> None:
    with exporter_on_loopback(deadline_s=1.0) as port, tricklers(port, 4, period_s=0.3) as kept:
        time.sleep(2.5)
    assert len(kept) == 4
    assert all(0.9 <= k < 2.5 for k in kept), kept


def test_connections_beyond_the_cap_get_503_at_once_and_a_scrape_gets_through_after() -> None:
    with exporter_on_loopback(max_clients=2, deadline_s=1.5) as port:
        idle = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(2)]
        try:
            time.sleep(0.2)  # both accepted: every slot taken
            t0 = time.monotonic()
            with socket.create_connection(("127.0.0.1", port), timeout=5) as extra:
                answer = extra.recv(1024)
            assert answer.startswith(b"HTTP/1.1 503 ")
            assert time.monotonic() - t0 < 1.0
            assert scrape(port)[0] == 503
            time.sleep(2.0)  # the idle clients' deadline passed: their slots are free
            assert scrape(port)[0] == 200
            for s in idle:
                assert s.recv(1024) == b""  # cut off, without an answer
        finally:
            for s in idle:
                s.close()


def test_the_cli_default_is_the_servers() -> None:
    args = build_parser().parse_args(["exporter", "--targets", "t"])
    assert args.max_clients == MAX_CLIENTS


@pytest.mark.parametrize("bad", ["0", "257", "many"])
def test_max_clients_out_of_range_is_a_usage_error(bad: str) -> None:
    from tcpwizard.exitcodes import UsageError

    with pytest.raises(UsageError, match="--max-clients"):
        build_parser().parse_args(["exporter", "--max-clients", bad])
