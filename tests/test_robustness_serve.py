"""Robustness, serve: deadlines per connection hold against clients that trickle bytes, slow
clients never make a real check see "busy", and no request value raises inside serve."""

from __future__ import annotations

import io
import json
import select
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tcpwizard.context import Context
from tcpwizard.main import main
from tcpwizard.measure.serve.limits import ServeLimits
from tcpwizard.measure.serve.server import Server
from tcpwizard.measure.wire.control import ControlClient
from tests.robustness_helpers import client_threads
from tests.serve_helpers import HELLO, raw_conn, read_lines, read_one, running_server, send_line

HELLO_LINE = json.dumps(HELLO).encode() + b"\n"


@contextmanager
def tricklers(
    srv: Server, count: int, after_hello: bool, period_s: float = 1.0
) -> Iterator[list[float]]:
    """`count` clients sending one byte every `period_s` (of the hello itself, or of a
    request after a hello). Yields, then records for each how long the server kept it."""
    stop = threading.Event()
    kept: list[float] = []
    lock = threading.Lock()

    def client() -> None:
        t0 = time.monotonic()
        try:
            s = raw_conn(srv, timeout=30)
            if after_hello:
                s.sendall(HELLO_LINE)
                read_one(s)
            payload = b'{"type": "ping", "id": 1}\n' if after_hello else HELLO_LINE
            for byte in payload[:-1]:  # never the newline: the message never completes
                if stop.is_set():
                    break
                s.sendall(bytes([byte]))
                time.sleep(period_s)
        except OSError:
            pass  # closed by the server: the point of the test
        finally:
            with lock:
                kept.append(time.monotonic() - t0)

    with client_threads(client, count, stop):
        yield kept


def trickle_until_closed(s: socket.socket, payload: bytes, period_s: float) -> float | None:
    """Send `payload` a byte at a time; the seconds until the server answered or closed,
    or None if it let the whole payload trickle in."""
    t0 = time.monotonic()
    for byte in payload:
        try:
            s.sendall(bytes([byte]))
        except OSError:
            return time.monotonic() - t0
        readable, _, _ = select.select([s], [], [], period_s)
        if readable:
            return time.monotonic() - t0
    return None


def test_trickled_request_after_hello_is_cut_at_the_message_deadline() -> None:
    limits = ServeLimits(slow_client_timeout_s=1.0, idle_timeout_s=30)
    with running_server(limits) as srv:
        s = raw_conn(srv, timeout=10)
        s.sendall(HELLO_LINE)
        read_one(s)
        # Each byte comes well inside 1 s: only a deadline from the first byte stops this.
        took = trickle_until_closed(s, b'{"type": "ping", "id": 1, "pad": "xxxxxxxx"}', 0.3)
        assert took is not None and 0.9 < took < 3, took
        (err,) = read_lines(s)
        assert err["code"] == "slow"


def test_trickled_hello_is_cut_at_the_first_message_deadline() -> None:
    with running_server(ServeLimits(slow_client_timeout_s=1.0)) as srv:
        s = raw_conn(srv, timeout=10)
        took = trickle_until_closed(s, HELLO_LINE[:-1], 0.3)
        assert took is not None and 0.9 < took < 3, took


def test_connection_lifetime_is_bounded() -> None:
    limits = ServeLimits(max_session_s=1.0, idle_timeout_s=30)
    with running_server(limits) as srv, ControlClient("127.0.0.1", srv.port) as c:
        t0 = time.monotonic()
        with pytest.raises(Exception, match=r"lifetime|longer than|closed"):
            while time.monotonic() - t0 < 5:
                c.request({"type": "ping"})
                time.sleep(0.2)
        assert time.monotonic() - t0 < 3


@pytest.mark.slow
def test_eight_tricklers_never_make_a_real_client_see_busy() -> None:
    """--max-clients 4 and 8 clients trickling a byte a second (4 in their hello, 4 after
    it): a real client still gets a control session at once, repeatedly."""
    with (
        running_server(ServeLimits(max_clients=4)) as srv,
        tricklers(srv, 4, after_hello=True),
        tricklers(srv, 4, after_hello=False),
    ):
        time.sleep(2.5)  # every trickler is connected and mid-message
        for _ in range(3):
            with ControlClient("127.0.0.1", srv.port) as c:
                assert c.request({"type": "ping", "id": 5})["id"] == 5
            time.sleep(0.5)


@pytest.mark.slow
def test_a_real_check_runs_measured_transfers_among_tricklers() -> None:
    """The acceptance case: serve --max-clients 4, 8 clients trickling a byte every
    second; a real `check` within the next 15 s runs measured transfers."""
    with (
        running_server(ServeLimits(max_clients=4), bind="127.0.0.1") as srv,
        tricklers(srv, 4, after_hello=True),
        tricklers(srv, 4, after_hello=False),
    ):
        time.sleep(2.0)
        out, err = io.StringIO(), io.StringIO()
        t0 = time.monotonic()
        code = main(
            [
                "check",
                "127.0.0.1",
                "--port",
                str(srv.port),
                "--modes",
                "autotune",
                "--duration",
                "0.5",
                "--direction",
                "up",
                "--quick",
                "--json",
                "--no-history",
            ],
            Context(stdout=out, stderr=err),
        )
        assert time.monotonic() - t0 < 15
        doc = json.loads(out.getvalue())
        assert code in (0, 1, 2), err.getvalue()
        assert "busy" not in err.getvalue()
        modes = doc["transfer"]["modes"]
        assert modes and all(m["throughput_mbps"] > 0 for m in modes)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("static_request", 2**31),
        ("static_request", 2**63),
        ("static_request", -1),
        ("static_request", 0),
        ("streams", 2**70),
        ("bytes", "lots"),
        ("duration_s", [1]),
        ("sample_interval_s", {"x": 1}),
    ],
)
def test_transfer_request_values_are_range_checked(field: str, value: object) -> None:
    with running_server() as srv:
        s = raw_conn(srv)
        send_line(s, HELLO)
        read_one(s)
        req: dict[str, object] = {
            "type": "transfer_start",
            "mode": "static",
            "direction": "up",
            "streams": 1,
            "duration_s": 0.5,
            "static_request": 65536,
        }
        req[field] = value
        send_line(s, req)
        replies = read_lines(s)
        assert replies[-1]["type"] == "error" and replies[-1]["code"] == "bad-request", replies
        assert not any("internal" in str(r) for r in replies)
        assert not any("internal error" in line for line in srv.logs)  # type: ignore[attr-defined]


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner),
    max_leaves=8,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    kind=st.sampled_from(["ping", "probe_report", "probe_train", "transfer_start", "audit"]),
    fields=st.dictionaries(
        st.sampled_from(
            [
                "id",
                "trains",
                "expect",
                "wait_ms",
                "quiet_ms",
                "count",
                "size",
                "rate_kbps",
                "mode",
                "direction",
                "streams",
                "duration_s",
                "bytes",
                "static_request",
            ]
        ),
        _JSON,
        max_size=5,
    ),
)
def test_generated_requests_never_raise_inside_serve(
    kind: str, fields: dict[str, object], shared_server: Server
) -> None:
    s = raw_conn(shared_server)
    try:
        send_line(s, HELLO)
        read_one(s)
        send_line(s, {**fields, "type": kind, "wait_ms": 0, "duration_s": 0.2})
        s.settimeout(5)
        line = read_one(s)
        assert line.get("code") != "internal", line
    except (OSError, EOFError):
        pass  # closed after an error line or a transfer that never attached
    finally:
        s.close()
    logs: list[str] = shared_server.logs  # type: ignore[attr-defined]
    assert not [m for m in logs if "internal error" in m]


@pytest.fixture(scope="module")
def shared_server() -> Iterator[Server]:
    with running_server(ServeLimits(max_clients=64, max_duration_s=0.5)) as srv:
        yield srv


def test_garbage_clients_do_not_disturb_a_real_one() -> None:
    with running_server(ServeLimits(max_clients=2)) as srv:
        junk = []
        for payload in (b"\x00" * 70000, b"GET / HTTP/1.0\r\n\r\n", b"\xff\xfe{]\n", b"{}\n"):
            s = raw_conn(srv)
            with suppress(OSError):
                s.sendall(payload)
            junk.append(s)
        with ControlClient("127.0.0.1", srv.port) as c:
            assert c.request({"type": "ping"})["type"] == "pong"
        for s in junk:
            s.close()
