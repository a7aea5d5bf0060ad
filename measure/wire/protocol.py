"""The serve wire protocol: constants, JSON-line framing and the errors both ends raise.

Every TCP message is one UTF-8 JSON object terminated by ``\\n`` and at most
MAX_MESSAGE bytes long (docs/protocol.md). Kept free of sockets-level policy so the
transfer engine (measure/serve/transfers.py) can import it without pulling in serve.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable
from typing import Any

from tcpwizard.exitcodes import ExitCode, TcpWizardError

PROTOCOL_VERSION = 1
# Versions this build can speak; the server picks the highest one both sides know.
SUPPORTED_VERSIONS = (1,)
MAX_MESSAGE = 64 * 1024


class ProtocolError(TcpWizardError):
    """The peer sent something the protocol does not allow (malformed, oversized, unknown
    type, wrong state). `code` is the machine-readable error code sent in the reply."""

    exit_code = ExitCode.UNKNOWN

    def __init__(self, message: str, code: str = "bad-request") -> None:
        super().__init__(message)
        self.code = code


class PeerUnavailable(TcpWizardError):
    """The serve end cannot be reached, refused us, or went away mid-conversation."""

    exit_code = ExitCode.UNKNOWN


class PeerSilent(PeerUnavailable):
    """serve's kernel took the request, and its process answered nothing in time."""


class AuthFailed(PeerUnavailable):
    """The serve end requires a secret we do not have, or rejected the one we proved."""


def encode(msg: dict[str, Any]) -> bytes:
    """One line of compact JSON. Refuses to produce a line the peer would reject."""
    data = json.dumps(msg, separators=(",", ":"), allow_nan=False).encode() + b"\n"
    if len(data) > MAX_MESSAGE:
        raise ProtocolError(f"message of {len(data)} bytes exceeds {MAX_MESSAGE}", "too-large")
    return data


def decode(line: bytes) -> dict[str, Any]:
    """Parse one line (without or with its newline) into a message with a string "type"."""
    if len(line) > MAX_MESSAGE:
        raise ProtocolError(f"message longer than {MAX_MESSAGE} bytes", "too-large")
    try:
        obj = json.loads(line.decode("utf-8"), parse_constant=_reject_constant)
    except UnicodeDecodeError as exc:
        raise ProtocolError(f"message is not UTF-8: {exc.reason}", "malformed") from None
    except (json.JSONDecodeError, ValueError, RecursionError) as exc:
        raise ProtocolError(f"message is not JSON: {exc}", "malformed") from None
    if not isinstance(obj, dict):
        raise ProtocolError("message must be a JSON object", "malformed")
    kind = obj.get("type")
    if not isinstance(kind, str) or not kind:
        raise ProtocolError('message needs a string "type"', "malformed")
    return obj


def _reject_constant(name: str) -> Any:
    # NaN/Infinity are not JSON; accepting them would let them leak into results.
    raise ValueError(f"{name} is not allowed")


def send_msg(sock: socket.socket, msg: dict[str, Any]) -> None:
    sock.sendall(encode(msg))


class LineReader:
    """Reads JSON lines from a socket, buffering what arrived after a newline, with a hard
    cap on line length so a peer cannot make us buffer without bound."""

    def __init__(
        self,
        sock: socket.socket,
        partial_timeout: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.sock = sock
        self._buf = bytearray()
        # Once the first byte of a message has arrived, the whole message must follow within
        # this time, counted from that byte: a client trickling one byte at a time must not
        # renew the wait with each byte. Between messages the socket's own timeout applies.
        self.partial_timeout = partial_timeout
        self.clock = clock
        self.partial_since: float | None = None  # when the message now arriving began

    def read_line(self) -> bytes:
        """The next line without its newline. Raises EOFError on a clean close between
        lines, ProtocolError on an oversized line or a close mid-line; socket timeouts
        propagate (socket.timeout / TimeoutError)."""
        while True:
            nl = self._buf.find(b"\n")
            if nl >= 0:
                if nl > MAX_MESSAGE:
                    raise ProtocolError(f"message longer than {MAX_MESSAGE} bytes", "too-large")
                line = bytes(self._buf[:nl])
                del self._buf[: nl + 1]
                # Bytes after the newline are the next message's start: its clock runs now.
                self.partial_since = self.clock() if self._buf else None
                return line
            if len(self._buf) > MAX_MESSAGE:
                raise ProtocolError(f"message longer than {MAX_MESSAGE} bytes", "too-large")
            if self._buf and self.partial_timeout is not None:
                since = self.partial_since if self.partial_since is not None else self.clock()
                left = since + self.partial_timeout - self.clock()
                if left <= 0:
                    raise TimeoutError("message incomplete within its deadline")
                self.sock.settimeout(left)
            chunk = self.sock.recv(65536)
            if not chunk:
                if self._buf:
                    raise ProtocolError("connection closed in the middle of a message", "truncated")
                raise EOFError("connection closed")
            if not self._buf:
                self.partial_since = self.clock()
            self._buf += chunk

    def read_msg(self) -> dict[str, Any]:
        return decode(self.read_line())

    @property
    def pending(self) -> bytes:
        """Bytes received beyond the last line returned (must not be lost on hand-over)."""
        return bytes(self._buf)


def read_first_line(sock: socket.socket, deadline: float | None = None) -> bytes:
    """Read exactly one line without consuming anything after it: peek, then take only up
    to the newline. Attach connections are handed to the transfer engine afterwards and
    the bytes following the header belong to it. With `deadline` (time.monotonic), the
    whole line must have arrived by then, however the bytes trickle in."""
    got = bytearray()
    while True:
        room = MAX_MESSAGE + 1 - len(got)
        if room <= 0:
            raise ProtocolError(f"message longer than {MAX_MESSAGE} bytes", "too-large")
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("first message incomplete within its deadline")
            sock.settimeout(left)
        peek = sock.recv(min(room, 65536), socket.MSG_PEEK)
        if not peek:
            if got:
                raise ProtocolError("connection closed in the middle of a message", "truncated")
            raise EOFError("connection closed")
        nl = peek.find(b"\n")
        take = nl + 1 if nl >= 0 else len(peek)
        data = sock.recv(take)
        got += data
        if nl >= 0 and len(data) == take:
            return bytes(got[:-1])
