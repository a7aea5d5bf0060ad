"""The exporter's HTTP server: prometheus_client's /metrics app behind a cap on concurrent
connections and a deadline for each request to arrive.

prometheus_client's own server starts a thread per connection and waits for a request as
long as the client likes, so clients that connect and send nothing, or a byte a second, pile
up threads without end. Here a connection beyond the cap gets a 503 at once (from the accept
loop, which never waits on a client), and a request that has not arrived by the deadline is
cut off; a scrape's request arrives within one round trip, so it never meets either.
"""

from __future__ import annotations

import contextlib
import io
import socket
import sys
import threading
import time
from socketserver import ThreadingMixIn
from typing import TYPE_CHECKING, Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer

from prometheus_client import CollectorRegistry, make_wsgi_app

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

MAX_CLIENTS = 16  # connections at once; a Prometheus server scrapes over one
REQUEST_DEADLINE_S = 5.0  # from accept to the end of the request

_BUSY = (
    b"HTTP/1.1 503 Service Unavailable\r\n"
    b"Content-Type: text/plain; charset=utf-8\r\n"
    b"Content-Length: 5\r\n"
    b"Retry-After: 1\r\n"
    b"Connection: close\r\n\r\n"
    b"busy\n"
)


class _DeadlineReader(io.RawIOBase):
    """The connection's bytes, each read allowed only the time left until `deadline`: a
    timeout per read alone would keep a client sending a byte a second forever."""

    def __init__(self, sock: socket.socket, deadline: float) -> None:
        super().__init__()
        self._sock = sock
        self._deadline = deadline

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: WriteableBuffer) -> int:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the request did not arrive in time")
        self._sock.settimeout(left)
        return self._sock.recv_into(memoryview(buffer))


class MetricsServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True  # a connection being cut off never holds up shutdown

    def __init__(
        self,
        address: tuple[str, int],
        family: socket.AddressFamily,
        max_clients: int,
        deadline_s: float,
    ) -> None:
        self.address_family = family  # read by the base class when it creates the socket
        self.deadline_s = deadline_s
        self._slots = threading.BoundedSemaphore(max_clients)
        super().__init__(address, _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            _refuse(request)
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()  # no thread started to give it back
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away or was cut off is not worth a traceback; anything else is."""
        if not isinstance(sys.exc_info()[1], OSError):
            super().handle_error(request, client_address)


def _refuse(sock: socket.socket) -> None:
    """503 without waiting: the accept loop must never block on one client."""
    with contextlib.suppress(OSError):
        sock.setblocking(False)
        # Read what the client already sent: closing with unread data would reset the
        # connection, and the client might lose the answer.
        with contextlib.suppress(BlockingIOError):
            sock.recv(65536)
        sock.send(_BUSY)


class _Handler(WSGIRequestHandler):
    server: MetricsServer

    def setup(self) -> None:
        super().setup()
        deadline = time.monotonic() + self.server.deadline_s
        self.rfile = io.BufferedReader(_DeadlineReader(self.connection, deadline))

    def parse_request(self) -> bool:
        ok = super().parse_request()
        # The request is in: the answer gets a deadline of its own, so a client that does not
        # read it is let go instead of holding the thread.
        self.connection.settimeout(self.server.deadline_s)
        return ok

    def log_message(self, format: str, *args: Any) -> None:
        """A scrape is not news."""


def start_metrics_server(
    registry: CollectorRegistry,
    host: str,
    port: int,
    max_clients: int = MAX_CLIENTS,
    deadline_s: float = REQUEST_DEADLINE_S,
) -> MetricsServer:
    """/metrics of `registry` on host:port, served from a daemon thread (stop it with
    shutdown()). OSError when the address cannot be bound."""
    info = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    family, _, _, _, sockaddr = info[0]
    server = MetricsServer((str(sockaddr[0]), port), family, max_clients, deadline_s)
    server.set_app(make_wsgi_app(registry))
    threading.Thread(target=server.serve_forever, name="tcpwizard-metrics", daemon=True).start()
    return server
