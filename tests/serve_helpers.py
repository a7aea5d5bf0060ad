"""Helpers for the serve tests: a Server on a free loopback port in a background thread,
serve as its own process, and the raw protocol lines on a socket."""

from __future__ import annotations

import contextlib
import json
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any

from tcpwizard.measure.serve.limits import ServeLimits
from tcpwizard.measure.serve.server import Server, TransferHandler


@contextlib.contextmanager
def running_server(
    limits: ServeLimits | None = None,
    secret: bytes | None = None,
    transfer: TransferHandler | None = None,
    once: bool = False,
    bind: str = "127.0.0.1",
) -> Iterator[Server]:
    logs: list[str] = []
    server = Server(
        bind=bind,
        port=0,
        limits=limits,
        secret=secret,
        once=once,
        log=logs.append,
        transfer=transfer,
    )
    server.logs = logs  # type: ignore[attr-defined]
    try:
        with in_thread(server) as t:
            yield server
    finally:
        assert not t.is_alive(), "serve did not shut down"


@contextlib.contextmanager
def in_thread(server: Server) -> Iterator[threading.Thread]:
    """`server` serving in a daemon thread until the block ends (then stopped and joined)."""
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    try:
        yield t
    finally:
        server.stop()
        t.join(timeout=5)


@contextlib.contextmanager
def serve_process() -> Iterator[tuple[subprocess.Popen[str], int]]:
    """`tcpwizard serve` as its own process on a free loopback port: (process, port)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tcpwizard", "serve", "--bind", "127.0.0.1", "--port", "0"],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        assert "listening on 127.0.0.1 port" in line, line
        yield proc, int(line.split(" port ")[1].split()[0])
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGCONT)  # a test may have stopped it
            proc.kill()
            proc.wait()


def raw_conn(server: Server, timeout: float = 5.0) -> socket.socket:
    host = server.tcp.getsockname()[0]
    s = socket.create_connection((host, server.port), timeout=timeout)
    return s


def send_line(s: socket.socket, obj: Any) -> None:
    data = obj if isinstance(obj, bytes) else json.dumps(obj).encode() + b"\n"
    s.sendall(data)


def read_until_closed(s: socket.socket, limit: int | None = None) -> bytes:
    """The bytes the server sends until it closes (or resets) the connection, stopping
    once `limit` have come."""
    buf = bytearray()
    while limit is None or len(buf) < limit:
        try:
            chunk = s.recv(65536)
        except ConnectionResetError:
            break
        if not chunk:
            break
        buf += chunk
    return bytes(buf)


def read_lines(s: socket.socket, limit: int = 1 << 20) -> list[dict[str, Any]]:
    """Everything the server sends until it closes the connection."""
    return [json.loads(line) for line in read_until_closed(s, limit).splitlines() if line.strip()]


def read_one(s: socket.socket) -> dict[str, Any]:
    buf = bytearray()
    while not buf.endswith(b"\n"):
        chunk = s.recv(1)
        if not chunk:
            raise EOFError(bytes(buf))
        buf += chunk
    result: dict[str, Any] = json.loads(buf)
    return result


HELLO = {"type": "hello", "version": 1, "client": "test"}
