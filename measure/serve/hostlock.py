"""One measurement at a time on a host: a lock file shared by `serve --lock` and
`exporter --lock`.

In a mesh every host is both a far end (serve) and a near end (the exporter's checks). Two
test transfers through the same host at once would measure each other, so whoever measures
holds an exclusive flock on one file; a serve that cannot take it answers "busy" with the
number of seconds to come back (written in the file by the holder: who holds it and until
when it expects to be done).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import time
from typing import Any

from tcpwizard.measure.wire.protocol import LineReader, ProtocolError, decode, encode
from tcpwizard.measure.wire.session import ClientHello, ErrorReply

# Bounds of the "retry after" a refused client is told: never a busy loop, never an hour.
MIN_RETRY_S = 1.0
MAX_RETRY_S = 60.0


class HostLock:
    """An exclusive, non-blocking flock on `path`, released by release() or process exit."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def try_acquire(self, holder: str, expect_s: float) -> bool:
        """True if this process now holds the lock (then the file says who and until when)."""
        if self._fd is not None:
            self._write(holder, expect_s)
            return True
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        except OSError:
            os.close(fd)
            raise
        self._fd = fd
        self._write(holder, expect_s)
        return True

    def extend(self, holder: str, expect_s: float) -> None:
        """Say the holder needs expect_s more from now (only while held)."""
        if self._fd is not None:
            self._write(holder, expect_s)

    def _write(self, holder: str, expect_s: float) -> None:
        assert self._fd is not None
        data = json.dumps({"holder": holder, "until": time.time() + expect_s}).encode()
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, data, 0)

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is None:
            return
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
        os.close(fd)  # closing the last descriptor drops the flock

    def retry_after(self, now: float | None = None) -> float:
        """Seconds until the holder expects to be done, bounded to [MIN_RETRY_S, MAX_RETRY_S]."""
        now = time.time() if now is None else now
        until = now
        with contextlib.suppress(OSError, ValueError, TypeError):
            with open(self.path, "rb") as f:
                data: Any = json.loads(f.read(4096) or b"{}")
            if isinstance(data, dict) and isinstance(data.get("until"), int | float):
                until = float(data["until"])
        return min(MAX_RETRY_S, max(MIN_RETRY_S, until - now))


def ask_serve(address: str, port: int, timeout: float = 3.0, release: bool = False) -> float | None:
    """Say hello to serve and hang up: None when it would take a check now (a serve with
    --lock then keeps itself for this client a few seconds), else the seconds it asked us
    to wait ("busy"). Anything else (nothing there, another error) is None too: the check
    itself finds out and says so. release=True tells a serve --lock that our check is over,
    so it lets its host go at once."""
    try:
        with socket.create_connection((address, port), timeout=timeout) as sock:
            sock.sendall(encode(ClientHello("tcpwizard-mesh", release=release).to_wire()))
            error = ErrorReply.of(decode(LineReader(sock).read_line()))
    except (OSError, ProtocolError, EOFError):
        return None
    if error is None or error.code != "busy":
        return None
    if error.retry_after_s is None:
        return MIN_RETRY_S * 5
    return min(MAX_RETRY_S, max(MIN_RETRY_S, error.retry_after_s))
