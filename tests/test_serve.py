"""serve over loopback: handshake, requests, auth, limits, timeouts, attach hand-over."""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
from collections.abc import Callable

import pytest

from tcpwizard.checks.facts import facts_from_json
from tcpwizard.measure.serve.limits import ServeLimits
from tcpwizard.measure.wire import auth, udp
from tcpwizard.measure.wire.control import ControlClient
from tcpwizard.measure.wire.protocol import (
    MAX_MESSAGE,
    AuthFailed,
    PeerUnavailable,
    ProtocolError,
    read_first_line,
)
from tests.serve_helpers import (
    HELLO,
    raw_conn,
    read_lines,
    read_one,
    running_server,
    send_line,
    serve_process,
)


def test_hello_ping_audit_bye() -> None:
    with running_server() as srv, ControlClient("127.0.0.1", srv.port) as c:
        assert c.version == 1
        assert c.server_info["auth"] == "none"
        assert len(c.udp_token) == udp.TOKEN_LEN
        assert c.request({"type": "ping", "id": 7}) == {
            "type": "pong",
            "id": 7,
            "t_ns": pytest.approx(time.time_ns(), abs=5e9),
        }
        audit = c.peer_audit()
        assert audit["source"] == "tcpwizard.checks"
        facts = facts_from_json(audit["facts"])
        assert facts.target_address == "127.0.0.1"  # route/metrics looked up toward us
        assert "net.ipv4.tcp_rmem" in dict(facts.sysctls)


def test_the_audit_asked_with_the_hello_comes_back_whatever_is_asked_first() -> None:
    """The audit request sent with the hello: its reply is read when the audit is wanted,
    or before any other request goes out (a ping's answer is the ping's, not the audit)."""
    with running_server() as srv:
        with ControlClient("127.0.0.1", srv.port, ask_audit=True) as c:
            assert c.peer_audit()["source"] == "tcpwizard.checks"
            assert c.request({"type": "ping", "id": 1})["type"] == "pong"
            assert c.peer_audit()["source"] == "tcpwizard.checks"  # asked again: a new request
        with ControlClient("127.0.0.1", srv.port, ask_audit=True) as c:
            assert c.request({"type": "ping", "id": 2}) == {
                "type": "pong",
                "id": 2,
                "t_ns": pytest.approx(time.time_ns(), abs=5e9),
            }
            assert c.peer_audit()["source"] == "tcpwizard.checks"
    # With a secret the challenge comes first: nothing is sent ahead of it.
    with (
        running_server(secret=b"s3cret") as srv,
        ControlClient("127.0.0.1", srv.port, secret=b"s3cret", ask_audit=True) as c,
    ):
        assert c.peer_audit()["source"] == "tcpwizard.checks"


def test_ipv6_and_dual_stack() -> None:
    if not socket.has_ipv6:
        pytest.skip("no IPv6")
    with running_server(bind="::") as srv:
        for host in ("::1", "127.0.0.1"):
            with ControlClient(host, srv.port) as c:
                assert c.request({"type": "ping"})["type"] == "pong"
                assert c.family == (socket.AF_INET6 if ":" in host else socket.AF_INET)


def test_unknown_request_gets_error_and_close() -> None:
    with running_server() as srv:
        s = raw_conn(srv)
        send_line(s, HELLO)
        assert read_one(s)["type"] == "hello"
        send_line(s, {"type": "frobnicate"})
        replies = read_lines(s)
        assert replies == [
            {
                "type": "error",
                "code": "unknown-type",
                "message": "unknown request type 'frobnicate'",
            }
        ]


def test_client_raises_protocol_error_on_error_reply() -> None:
    with running_server() as srv, ControlClient("127.0.0.1", srv.port) as c:
        with pytest.raises(ProtocolError) as info:
            c.request({"type": "probe_report", "trains": "all"})
        assert info.value.code == "bad-request"


def test_version_mismatch_refused_with_reason() -> None:
    with running_server() as srv:
        s = raw_conn(srv)
        send_line(s, {"type": "hello", "version": 99, "versions": [99, 100]})
        (err,) = read_lines(s)
        assert err["code"] == "version"
        assert "server speaks [1]" in err["message"]


def test_oversized_message_rejected_server_keeps_serving() -> None:
    with running_server() as srv, ControlClient("127.0.0.1", srv.port) as bystander:
        s = raw_conn(srv)
        send_line(s, HELLO)
        read_one(s)
        s.sendall(b'{"type":"ping","pad":"' + b"x" * (MAX_MESSAGE + 10))
        (err,) = read_lines(s)
        assert err["code"] == "too-large"
        assert bystander.request({"type": "ping"})["type"] == "pong"


def test_oversized_first_line_rejected() -> None:
    with running_server() as srv:
        s = raw_conn(srv)
        s.sendall(b"x" * (MAX_MESSAGE + 100))
        (err,) = read_lines(s)
        assert err["code"] == "too-large"


def test_first_message_must_be_hello_or_attach() -> None:
    with running_server() as srv:
        s = raw_conn(srv)
        send_line(s, {"type": "audit"})
        (err,) = read_lines(s)
        assert err["code"] == "bad-request"
        assert "hello or attach" in err["message"]


def test_max_clients_refused_with_clear_message() -> None:
    with running_server(ServeLimits(max_clients=2)) as srv:
        a = ControlClient("127.0.0.1", srv.port)
        b = ControlClient("127.0.0.1", srv.port)
        with pytest.raises(PeerUnavailable, match=r"server busy: 2 clients already connected"):
            ControlClient("127.0.0.1", srv.port)
        s = raw_conn(srv)
        send_line(s, HELLO)
        (err,) = read_lines(s)
        assert err["type"] == "error" and err["code"] == "busy"
        a.close()
        # The slot frees once the server has seen the bye.
        deadline = time.monotonic() + 3
        while True:
            try:
                c = ControlClient("127.0.0.1", srv.port)
                break
            except PeerUnavailable:
                assert time.monotonic() < deadline
                time.sleep(0.05)
        c.close()
        b.close()


def test_auth_right_secret() -> None:
    with (
        running_server(secret=b"s3cret") as srv,
        ControlClient("127.0.0.1", srv.port, secret=b"s3cret") as c,
    ):
        assert c.server_info["auth"] == "hmac-sha256"
        assert c.request({"type": "ping"})["type"] == "pong"


def test_auth_wrong_secret_refused() -> None:
    with running_server(secret=b"s3cret") as srv:
        with pytest.raises(AuthFailed, match="rejected the shared secret"):
            ControlClient("127.0.0.1", srv.port, secret=b"guess")
        assert any("authentication failed" in m for m in srv.logs)  # type: ignore[attr-defined]


def test_auth_missing_secret_refused() -> None:
    with (
        running_server(secret=b"s3cret") as srv,
        pytest.raises(AuthFailed, match="requires a shared secret"),
    ):
        ControlClient("127.0.0.1", srv.port)


def test_no_secret_on_the_wire_and_requests_before_auth_refused() -> None:
    with running_server(secret=b"s3cret") as srv:
        s = raw_conn(srv)
        send_line(s, HELLO)
        hello = read_one(s)
        assert "udp_token" not in hello  # no UDP service before the client proved itself
        assert b"s3cret" not in repr(hello).encode()
        send_line(s, {"type": "audit"})
        (err,) = read_lines(s)
        assert err["code"] == "auth"


def test_auth_proofs_are_bound_to_both_nonces() -> None:
    a, b = auth.new_nonce(), auth.new_nonce()
    proof = auth.client_proof(b"k", a, b)
    assert auth.verify(proof, auth.client_proof(b"k", a, b))
    assert not auth.verify(proof, auth.client_proof(b"k", b, a))
    assert not auth.verify(proof, auth.server_proof(b"k", a, b))  # no reflection
    assert not auth.verify(proof, auth.client_proof(b"other", a, b))
    assert not auth.verify(proof, None)


def test_idle_client_is_closed() -> None:
    with running_server(ServeLimits(idle_timeout_s=0.3)) as srv:
        s = raw_conn(srv)
        send_line(s, HELLO)
        read_one(s)
        t0 = time.monotonic()
        (err,) = read_lines(s)
        assert err["code"] == "idle"
        assert 0.25 < time.monotonic() - t0 < 3


def test_slow_client_mid_message_is_closed() -> None:
    with running_server(ServeLimits(idle_timeout_s=30, slow_client_timeout_s=0.3)) as srv:
        s = raw_conn(srv)
        send_line(s, HELLO)
        read_one(s)
        s.sendall(b'{"type": "pi')  # and then nothing
        t0 = time.monotonic()
        (err,) = read_lines(s)
        assert err["code"] == "slow"
        assert time.monotonic() - t0 < 3


def test_silent_connection_before_hello_is_dropped() -> None:
    with running_server(ServeLimits(slow_client_timeout_s=0.3)) as srv:
        s = raw_conn(srv)
        t0 = time.monotonic()
        assert read_lines(s) == []
        assert time.monotonic() - t0 < 3


class RecordingTransfer:
    """A transfer handler for testing the hand-over seam only (the real engine is T's)."""

    def __init__(self) -> None:
        self.requests: list[dict[str, object]] = []

    def handle_request(
        self, request: dict[str, object], send: Callable[[dict[str, object]], None]
    ) -> None:
        if request.get("bad"):
            raise ProtocolError("bad transfer request", "bad-request")
        self.requests.append(request)
        send({"type": "transfer_ack", "n": len(self.requests)})

    def handle_attach(self, header: dict[str, object], sock: socket.socket) -> None:
        # Echo everything after the header: proves serve did not swallow those bytes.
        data = bytearray()
        while chunk := sock.recv(65536):
            data += chunk
        sock.sendall(repr(header).encode() + b"|" + bytes(data))
        sock.close()


def test_transfer_requests_and_attach_handover_keep_bytes() -> None:
    handler = RecordingTransfer()
    with running_server(transfer=handler) as srv, ControlClient("127.0.0.1", srv.port) as c:
        assert c.request({"type": "transfer_start", "mode": "x"}) == {
            "type": "transfer_ack",
            "n": 1,
        }
        sock = c.open_attached("tok", "data", stream=3)
        payload = os.urandom(200_000)
        sock.sendall(payload)  # right behind the header, likely in the same segment
        sock.shutdown(socket.SHUT_WR)
        got = bytearray()
        while chunk := sock.recv(65536):
            got += chunk
        sock.close()
        head, _, body = bytes(got).partition(b"|")
        assert b"'session': 'tok'" in head and b"'stream': 3" in head
        assert body == payload
        with pytest.raises(ProtocolError, match="bad transfer request"):
            c.request({"type": "transfer_start", "bad": True})


def test_read_first_line_does_not_over_read() -> None:
    a, b = socket.socketpair()
    with a, b:
        a.sendall(b'{"type":"attach"}\nREST-OF-STREAM')
        assert read_first_line(b) == b'{"type":"attach"}'
        assert b.recv(100) == b"REST-OF-STREAM"


def test_udp_echo_only_for_live_sessions() -> None:
    with running_server() as srv:
        u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        u.settimeout(0.3)
        u.connect(("127.0.0.1", srv.port))
        u.send(udp.pack(udp.KIND_ECHO, b"\0" * 8, 1, 1, 5, 0, 64))
        with pytest.raises(TimeoutError):
            u.recv(100)
        with ControlClient("127.0.0.1", srv.port) as c:
            u.send(udp.pack(udp.KIND_ECHO, c.udp_token, 1, 2, 5, 0, 64))
            pkt = udp.unpack(u.recv(100))
            assert pkt is not None
            assert (pkt.kind, pkt.seq, pkt.client_ns) == (udp.KIND_ECHO_REPLY, 2, 5)
            assert 0 <= pkt.turnaround_ns < 100_000_000
        u.close()


def test_once_exits_after_first_client() -> None:
    with running_server(once=True) as srv:
        with ControlClient("127.0.0.1", srv.port) as c:
            c.request({"type": "ping"})
        assert srv.stop_event.wait(3)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_cli_serve_graceful_shutdown(sig: signal.Signals) -> None:
    with serve_process() as (proc, port), ControlClient("127.0.0.1", port) as c:
        # A connected client must not keep the server from stopping.
        proc.send_signal(sig)
        assert proc.wait(timeout=5) == 0
        with pytest.raises((PeerUnavailable, ProtocolError)):
            c.request({"type": "ping"})


def test_connection_refused_is_one_clear_line() -> None:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    with pytest.raises(PeerUnavailable, match=r"connection refused.*tcpwizard serve"):
        ControlClient("127.0.0.1", port, timeout=1)


def test_many_concurrent_clients_with_threads() -> None:
    errors: list[BaseException] = []
    with running_server(ServeLimits(max_clients=8)) as srv:

        def worker() -> None:
            try:
                for _ in range(10):
                    with ControlClient("127.0.0.1", srv.port) as c:
                        assert c.request({"type": "ping"})["type"] == "pong"
            except PeerUnavailable as exc:
                if "busy" not in str(exc):
                    errors.append(exc)
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=worker) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=20)
    assert errors == []
