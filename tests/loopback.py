"""Servers on free loopback ports for the far-end tests: a port nothing listens on, and a
stock `iperf3 -s` on one."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import time
from collections.abc import Iterator


def free_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def local_iperf3(*extra: str, log: bool = False) -> Iterator[tuple[int, subprocess.Popen[str]]]:
    """`iperf3 -s EXTRA` on a free loopback port: (port, process), once it listens. With
    `log`, its output (flushed line by line) is on the process's stdout."""
    port = free_port()
    proc = subprocess.Popen(
        ["iperf3", "-s", "-p", str(port), *(["--forceflush"] if log else []), *extra],
        stdout=subprocess.PIPE if log else subprocess.DEVNULL,
        stderr=subprocess.STDOUT if log else subprocess.DEVNULL,
        text=True,
    )
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with socket.socket() as s:
                try:  # a bind that fails means iperf3 listens; a connect would cost its test
                    s.bind(("127.0.0.1", port))
                except OSError:
                    break
            time.sleep(0.05)
        yield port, proc
    finally:
        proc.kill()
        proc.wait(timeout=5)
