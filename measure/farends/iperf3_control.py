"""The client side of iperf3's control protocol (iperf 3.x, src/iperf_api.c), so a stock
`iperf3 -s` can be the far end of a test transfer with our own sockets on this side.

The conversation on the control connection:
  client: 37-byte cookie (36 base32 characters and a NUL)
  server: state PARAM_EXCHANGE (one signed byte)
  client: parameters (4-byte big-endian length + JSON)
  server: CREATE_STREAMS; the client opens each data connection and sends the cookie on it
  server: TEST_START, TEST_RUNNING; data flows (reverse: from the server)
  client: TEST_END when it has sent (or received) enough
  server: EXCHANGE_RESULTS; client sends its results JSON, server answers with its own
  server: DISPLAY_RESULTS; client: IPERF_DONE
A busy server answers the cookie with ACCESS_DENIED and closes; a failing one sends
SERVER_ERROR followed by two 32-bit codes (iperf3's i_errno and errno).

The codec (cookie, framing, parameters, results) is free of sockets so it can be tested
against bytes captured from a real iperf3 session.

Why one module of this size: one protocol client, iperf 3.x's control state machine from
connect to the results exchange, read beside src/iperf_api.c.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import secrets
import socket
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tcpwizard.measure.farends.interface import FarEndError
from tcpwizard.measure.wire import spec

DEFAULT_PORT = spec.IPERF3_PORT
COOKIE_SIZE = 37
_COOKIE_CHARS = "abcdefghijklmnopqrstuvwxyz234567"
# iperf3's own read limit for parameters is 8 KB; results carry the server's text output.
MAX_JSON = 4 * 1024 * 1024
BLOCK_SIZE = 128 * 1024  # iperf3's TCP default (-l)

TEST_START = 1
TEST_RUNNING = 2
TEST_END = 4
PARAM_EXCHANGE = 9
CREATE_STREAMS = 10
SERVER_TERMINATE = 11
CLIENT_TERMINATE = 12
EXCHANGE_RESULTS = 13
DISPLAY_RESULTS = 14
IPERF_START = 15
IPERF_DONE = 16
ACCESS_DENIED = -1
SERVER_ERROR = -2
STATE_NAMES = {
    TEST_START: "TEST_START",
    TEST_RUNNING: "TEST_RUNNING",
    TEST_END: "TEST_END",
    PARAM_EXCHANGE: "PARAM_EXCHANGE",
    CREATE_STREAMS: "CREATE_STREAMS",
    SERVER_TERMINATE: "SERVER_TERMINATE",
    CLIENT_TERMINATE: "CLIENT_TERMINATE",
    EXCHANGE_RESULTS: "EXCHANGE_RESULTS",
    DISPLAY_RESULTS: "DISPLAY_RESULTS",
    IPERF_START: "IPERF_START",
    IPERF_DONE: "IPERF_DONE",
    ACCESS_DENIED: "ACCESS_DENIED",
    SERVER_ERROR: "SERVER_ERROR",
}
# iperf3's i_errno values a client is likely to see (src/iperf_api.h, stable since 3.1).
SERVER_ERRORS = {
    5: "the server does not accept the test's duration",
    6: "the server does not accept that many streams",
    8: "the server does not accept the socket buffer size",
    37: "the test is longer than the server's maximum test duration",
    124: "the server could not set the socket buffer size",
    130: "the server could not set the window size",
    134: "the server could not set the congestion control algorithm",
    141: "the server's socket buffer size came out different from the request",
    142: "the server requires authentication (iperf3 --rsa-private-key-path) and the test "
    "carried no valid credentials",
}
AUTH_ERRORS = (22, 23, 35, 142)


ONE_OFF = "a one-off server, iperf3 -s -1, runs a single test"


class Iperf3Error(FarEndError):
    """The iperf3 server refused, failed, closed or spoke something else. `kind` says which,
    for the report: busy, auth, server-error, closed, not-iperf3, timeout."""

    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message)
        self.kind = kind

    @property
    def absent(self) -> bool:
        """Nothing at the port, or something else there; a busy or locked server is the
        answer itself."""
        return self.kind in ("closed", "not-iperf3", "timeout")

    def later(self) -> str:
        """A server that was there a moment ago and now refuses connections ran one test
        only."""
        return f"{self} ({ONE_OFF})" if self.kind == "closed" else str(self)


# ---------------------------------------------------------------------------- codec


def make_cookie(rng: Callable[[int], bytes] = secrets.token_bytes) -> bytes:
    """A fresh cookie: 36 characters of iperf3's alphabet and the NUL that ends it."""
    raw = rng(36)
    return "".join(_COOKIE_CHARS[b % 32] for b in raw).encode("ascii") + b"\0"


def frame_json(obj: dict[str, Any]) -> bytes:
    """iperf3's JSON framing: a 4-byte big-endian length, then compact JSON (no NUL)."""
    body = json.dumps(obj, separators=(",", ":"), allow_nan=False).encode()
    return struct.pack("!I", len(body)) + body


def parse_json_body(body: bytes) -> dict[str, Any]:
    try:
        obj = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise Iperf3Error(f"iperf3 server sent malformed JSON: {exc}", "not-iperf3") from None
    if not isinstance(obj, dict):
        raise Iperf3Error("iperf3 server sent JSON that is not an object", "not-iperf3")
    return obj


def state_byte(b: int) -> int:
    """The signed state of one received byte (ACCESS_DENIED is 0xff on the wire)."""
    return b - 256 if b >= 128 else b


@dataclass(frozen=True)
class Iperf3Params:
    """The test we ask for. `window` is iperf3's -w: the server sets SO_SNDBUF and
    SO_RCVBUF to it on its data sockets, so it tunes the far end's buffers too."""

    duration_s: float = spec.FIXED_DURATION_S
    streams: int = 1
    reverse: bool = False
    window: int | None = None
    nbytes: int | None = None
    block_size: int = BLOCK_SIZE
    congestion: str | None = None
    client_version: str = "3.12"

    def to_wire(self) -> dict[str, Any]:
        # The server's own timer ends a test at time + grace; we end it ourselves by
        # TEST_END, so the whole seconds only need to cover our duration.
        obj: dict[str, Any] = {
            "tcp": True,
            "omit": 0,
            "time": 0 if self.nbytes else max(1, math.ceil(self.duration_s)),
            "num": self.nbytes or 0,
            "blockcount": 0,
            "parallel": self.streams,
            "len": self.block_size,
            "pacing_timer": 1000,
            "get_server_output": 1,
            "client_version": self.client_version,
        }
        if self.reverse:
            obj["reverse"] = True
        if self.window is not None:
            obj["window"] = self.window
        if self.congestion:
            obj["congestion"] = self.congestion
        return obj


def stream_ids(n: int) -> list[int]:
    """The ids iperf3 gives its streams: 1, then 3, 4, ... (an old quirk it keeps for
    compatibility, src/iperf_api.c iperf_add_stream); results must use them."""
    return [1, *range(3, n + 2)][:n]


@dataclass(frozen=True)
class ClientStreamResult:
    id: int
    bytes: int
    retransmits: int
    seconds: float


def client_results(
    streams: list[ClientStreamResult], sender: bool, congestion: str = ""
) -> dict[str, Any]:
    """What a client sends at EXCHANGE_RESULTS (every field get_results requires)."""
    obj: dict[str, Any] = {
        "cpu_util_total": 0.0,
        "cpu_util_user": 0.0,
        "cpu_util_system": 0.0,
        "sender_has_retransmits": 1 if sender else -1,
        "streams": [
            {
                "id": s.id,
                "bytes": s.bytes,
                "retransmits": s.retransmits if sender else -1,
                "jitter": 0,
                "errors": 0,
                "omitted_errors": 0,
                "packets": 0,
                "omitted_packets": 0,
                "start_time": 0,
                "end_time": s.seconds,
            }
            for s in streams
        ],
    }
    if congestion:
        obj["congestion_used"] = congestion
    return obj


@dataclass(frozen=True)
class ServerInterval:
    """One reporting interval of the server's own output (sums over its streams)."""

    start_s: float
    end_s: float
    bytes: int
    retransmits: int | None = None
    snd_cwnd: int | None = None
    rtt_us: int | None = None


@dataclass(frozen=True)
class ServerResults:
    """The server's side of a test, from its EXCHANGE_RESULTS JSON."""

    bytes: int
    seconds: float
    retransmits: int | None
    congestion: str
    intervals: tuple[ServerInterval, ...] = ()
    streams: int = 0
    notes: tuple[str, ...] = field(default=())

    @classmethod
    def from_wire(cls, obj: dict[str, Any]) -> ServerResults:
        streams = obj.get("streams")
        if not isinstance(streams, list):
            raise Iperf3Error("iperf3 results without streams", "not-iperf3")
        total, secs, retrans = 0, 0.0, 0
        has_retrans = _num(obj.get("sender_has_retransmits")) == 1
        for s in streams:
            if not isinstance(s, dict):
                raise Iperf3Error("iperf3 results: a stream is not an object", "not-iperf3")
            b = _num(s.get("bytes"))
            if b is None or b < 0:
                raise Iperf3Error("iperf3 results: a stream without bytes", "not-iperf3")
            total += int(b)
            start, end = _num(s.get("start_time")), _num(s.get("end_time"))
            if start is not None and end is not None and end >= start:
                secs = max(secs, end - start)
            r = _num(s.get("retransmits"))
            if r is not None and r >= 0:
                retrans += int(r)
        congestion = obj.get("congestion_used")
        intervals, notes = _server_intervals(obj)
        return cls(
            bytes=total,
            seconds=secs,
            retransmits=retrans if has_retrans else None,
            congestion=congestion if isinstance(congestion, str) else "",
            intervals=intervals,
            streams=len(streams),
            notes=notes,
        )


def _num(v: object) -> float | None:
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    return float(v) if math.isfinite(v) else None


def _server_intervals(obj: dict[str, Any]) -> tuple[tuple[ServerInterval, ...], tuple[str, ...]]:
    """Per-interval figures from the server's output: JSON when it runs with -J (bytes,
    retransmits, cwnd, RTT), else its text lines (bytes, retransmits, cwnd)."""
    js = obj.get("server_output_json")
    if isinstance(js, dict):
        return _intervals_from_json(js), ()
    text = obj.get("server_output_text")
    if isinstance(text, str):
        return _intervals_from_text(text), ("the server's intervals are from its text output",)
    return (), ("the server sent no per-interval output",)


def _intervals_from_json(js: dict[str, Any]) -> tuple[ServerInterval, ...]:
    out: list[ServerInterval] = []
    for iv in js.get("intervals") or []:
        if not isinstance(iv, dict) or not isinstance(iv.get("streams"), list):
            continue
        rows = [s for s in iv["streams"] if isinstance(s, dict)]
        if not rows:
            continue
        start, end = _num(rows[0].get("start")), _num(rows[0].get("end"))
        if start is None or end is None:
            continue
        rtts = [v for s in rows if (v := _num(s.get("rtt"))) is not None and v > 0]
        cwnds = [v for s in rows if (v := _num(s.get("snd_cwnd"))) is not None]
        rets = [v for s in rows if (v := _num(s.get("retransmits"))) is not None]
        out.append(
            ServerInterval(
                start,
                end,
                int(sum(_num(s.get("bytes")) or 0 for s in rows)),
                int(sum(rets)) if rets else None,
                int(sum(cwnds)) if cwnds else None,
                int(min(rtts)) if rtts else None,
            )
        )
    return tuple(out)


_UNITS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}


def _size(number: str, unit: str) -> int | None:
    scale = _UNITS.get(unit[:1].upper()) if unit.endswith("Bytes") else None
    try:
        return None if scale is None else int(float(number) * scale)
    except ValueError:
        return None


def _intervals_from_text(text: str) -> tuple[ServerInterval, ...]:
    """Lines like `[  5]   0.00-1.00   sec  9.50 MBytes  79.7 Mbits/sec   12   1.23 MBytes`
    (a sending server adds Retr and Cwnd). With several streams the `[SUM]` line holds the
    interval's bytes; the summary lines (ending in `sender`/`receiver`) are left out, and a
    short last interval may follow a `- - -` rule."""
    per: dict[tuple[float, float], list[ServerInterval]] = {}
    sums: dict[tuple[float, float], ServerInterval] = {}
    for line in text.splitlines():
        if not line.startswith("[") or line.rstrip().endswith(("sender", "receiver")):
            continue
        tag, _, rest = line.partition("]")
        parts = rest.split()
        if len(parts) < 6 or parts[1] != "sec" or "-" not in parts[0]:
            continue
        a, _, b = parts[0].partition("-")
        try:
            span = (float(a), float(b))
        except ValueError:
            continue
        nbytes = _size(parts[2], parts[3])
        if nbytes is None:
            continue
        retr = int(parts[6]) if len(parts) > 6 and parts[6].isdigit() else None
        cwnd = _size(parts[7], parts[8]) if len(parts) > 8 else None
        iv = ServerInterval(span[0], span[1], nbytes, retr, cwnd, None)
        if "SUM" in tag:
            sums[span] = iv
        else:
            per.setdefault(span, []).append(iv)
    out: list[ServerInterval] = []
    for span in sorted(set(per) | set(sums)):
        rows = per.get(span, [])
        if span in sums:
            s = sums[span]
            cw = [r.snd_cwnd for r in rows if r.snd_cwnd is not None]
            out.append(ServerInterval(*span, s.bytes, s.retransmits, sum(cw) if cw else None))
        else:
            re = [r.retransmits for r in rows if r.retransmits is not None]
            cw = [r.snd_cwnd for r in rows if r.snd_cwnd is not None]
            out.append(
                ServerInterval(
                    *span,
                    sum(r.bytes for r in rows),
                    sum(re) if re else None,
                    sum(cw) if cw else None,
                )
            )
    return tuple(out)


# ---------------------------------------------------------------------------- session

Presetup = Callable[[socket.socket], None]


class Iperf3Session:
    """One iperf3 test: control connection, parameters, data connections, end, results.

    The data sockets are ours (opened with `presetup` before connect, so window scaling
    follows our buffer plan); the caller moves the data with them between `start()` and
    `finish()`."""

    def __init__(self, address: str, port: int, params: Iperf3Params, timeout: float = 5.0) -> None:
        self.address = address
        self.port = port
        self.params = params
        self.timeout = timeout
        self.cookie = make_cookie()
        self.ctrl: socket.socket | None = None
        self.data: list[socket.socket] = []

    def __enter__(self) -> Iperf3Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _connect(self, presetup: Presetup | None = None) -> socket.socket:
        family = socket.AF_INET6 if ":" in self.address else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            if presetup is not None:
                presetup(sock)
            sock.settimeout(self.timeout)
            sock.connect((self.address, self.port))
        except ConnectionRefusedError:
            sock.close()
            raise Iperf3Error(
                f"no iperf3 server at {self.address} port {self.port} (connection refused)",
                "closed",
            ) from None
        except OSError as exc:
            sock.close()
            reason = exc.strerror or "timed out"
            raise Iperf3Error(
                f"cannot connect to iperf3 at {self.address} port {self.port}: {reason}",
                "closed",
            ) from None
        return sock

    def open(self) -> socket.socket:
        """Control connection and parameters, up to the server's CREATE_STREAMS."""
        self.ctrl = self._connect()
        self.ctrl.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._send(self.cookie)
        state = self.expect(PARAM_EXCHANGE, first=True)
        del state
        self._send(frame_json(self.params.to_wire()))
        try:
            self.expect(CREATE_STREAMS)
        except Iperf3Error as exc:
            if exc.kind != "closed":
                raise
            # iperf3 (3.x) hangs up without a word on a test it will not run: a server
            # that requires authentication, or one that rejects the parameters.
            raise Iperf3Error(
                f"the iperf3 server at {self.address} port {self.port} closed the connection "
                "after the test parameters: it requires authentication (iperf3 "
                "--rsa-private-key-path) or refused the test",
                "refused",
            ) from None
        return self.ctrl

    def attach(self, presetup: Presetup | None = None) -> list[socket.socket]:
        """One data connection per stream, each announced with the cookie."""
        for _ in range(self.params.streams):
            s = self._connect(presetup)
            self.data.append(s)
            try:
                s.sendall(self.cookie)
            except OSError as exc:
                raise Iperf3Error(f"iperf3 closed a data connection: {exc}", "closed") from None
        self.expect(TEST_START)
        self.expect(TEST_RUNNING)
        return self.data

    def end(self) -> None:
        """Tell the server the test is over (it stops sending in reverse mode)."""
        self._send(bytes([TEST_END]))

    def results(
        self, ours: list[ClientStreamResult], sender: bool, congestion: str = ""
    ) -> ServerResults:
        """Exchange results and close the test politely."""
        self.expect(EXCHANGE_RESULTS, timeout=self.timeout + 10.0)
        self._send(frame_json(client_results(ours, sender, congestion)))
        theirs = ServerResults.from_wire(self.read_json())
        self.expect(DISPLAY_RESULTS)
        self._send(bytes([IPERF_DONE & 0xFF]))
        self._await_close()
        return theirs

    def _await_close(self, timeout: float = 2.0) -> None:
        """The server closes the control connection once it is ready for the next test;
        a test started before that would be told the server is busy."""
        assert self.ctrl is not None
        deadline = time.monotonic() + timeout
        with contextlib.suppress(OSError):
            while (left := deadline - time.monotonic()) > 0:
                self.ctrl.settimeout(left)
                if not self.ctrl.recv(256):
                    return

    def close(self) -> None:
        for s in (*self.data, *([self.ctrl] if self.ctrl else [])):
            with contextlib.suppress(OSError):
                s.close()
        self.data = []
        self.ctrl = None

    # -- wire helpers

    def _send(self, data: bytes) -> None:
        assert self.ctrl is not None
        try:
            self.ctrl.sendall(data)
        except OSError as exc:
            raise Iperf3Error(
                f"iperf3 server closed the control connection: {exc}", "closed"
            ) from None

    def _recv_exact(self, n: int, timeout: float) -> bytes:
        assert self.ctrl is not None
        deadline = time.monotonic() + timeout
        buf = bytearray()
        while len(buf) < n:
            left = deadline - time.monotonic()
            if left <= 0:
                raise Iperf3Error(f"iperf3 server sent nothing for {timeout:g} s", "timeout")
            self.ctrl.settimeout(left)
            try:
                chunk = self.ctrl.recv(n - len(buf))
            except TimeoutError:
                continue
            except OSError as exc:
                raise Iperf3Error(f"iperf3 control connection failed: {exc}", "closed") from None
            if not chunk:
                raise Iperf3Error("the iperf3 server closed the control connection", "closed")
            buf += chunk
        return bytes(buf)

    def read_state(self, timeout: float | None = None, first: bool = False) -> int:
        raw = self._recv_exact(1, self.timeout if timeout is None else timeout)
        state = state_byte(raw[0])
        if state == ACCESS_DENIED:
            raise Iperf3Error(
                f"the iperf3 server at {self.address} port {self.port} is busy "
                "(another test is running)",
                "busy",
            )
        if state == SERVER_ERROR:
            code, err = struct.unpack("!ii", self._recv_exact(8, self.timeout))
            raise _server_error(code, err)
        if state == SERVER_TERMINATE:
            raise Iperf3Error("the iperf3 server terminated the test", "closed")
        if state not in STATE_NAMES:
            what = "is not an iperf3 server" if first else "sent an unknown iperf3 state"
            raise Iperf3Error(
                f"{self.address} port {self.port} {what} (state byte {raw[0]:#04x})",
                "not-iperf3",
            )
        return state

    def expect(self, wanted: int, timeout: float | None = None, first: bool = False) -> int:
        state = self.read_state(timeout, first)
        if state != wanted:
            raise Iperf3Error(
                f"iperf3 server sent {STATE_NAMES[state]} where {STATE_NAMES[wanted]} was due",
                "not-iperf3",
            )
        return state

    def read_json(self) -> dict[str, Any]:
        (size,) = struct.unpack("!I", self._recv_exact(4, self.timeout))
        if not 0 < size <= MAX_JSON:
            raise Iperf3Error(f"iperf3 server announced {size} bytes of JSON", "not-iperf3")
        return parse_json_body(self._recv_exact(size, self.timeout))


def _server_error(code: int, err: int) -> Iperf3Error:
    what = SERVER_ERRORS.get(code, f"iperf3 error {code}")
    if err > 0:
        what += f" ({os.strerror(err)})"
    kind = "auth" if code in AUTH_ERRORS else "server-error"
    return Iperf3Error(f"iperf3 server error: {what}", kind)
