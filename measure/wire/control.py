"""ControlClient: the client end of a serve control connection (docs/protocol.md).

Used by the probes (RTT, capacity), by the transfer engine (transfer_* requests and
attach connections) and by `check` (the peer's audit).
"""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Self

from tcpwizard import __version__
from tcpwizard.measure.observe.handshake import HandshakeFacts, read_handshake
from tcpwizard.measure.observe.tcpinfo import read_tcp_info
from tcpwizard.measure.wire import auth, udp
from tcpwizard.measure.wire.fields import message_type
from tcpwizard.measure.wire.protocol import (
    MAX_MESSAGE,
    AuthFailed,
    LineReader,
    PeerSilent,
    PeerUnavailable,
    ProtocolError,
    encode,
)
from tcpwizard.measure.wire.session import (
    NO_AUTH,
    AuditReply,
    AuditRequest,
    Auth,
    AuthOk,
    Bye,
    ClientHello,
    ErrorReply,
    ServerHello,
)
from tcpwizard.measure.wire.transfer_msgs import Attach, AttachRole
from tcpwizard.updown import UpDown

Presetup = Callable[[socket.socket], None]


def resolve(host: str, port: int, socktype: int = socket.SOCK_STREAM) -> list[Any]:
    """getaddrinfo results, or one clear line when the name does not resolve."""
    try:
        infos = socket.getaddrinfo(host, port, type=socktype)
    except socket.gaierror as exc:
        raise PeerUnavailable(f"cannot resolve host {host!r}: {exc.strerror}") from None
    except UnicodeError:
        raise PeerUnavailable(f"cannot resolve host {host!r}: invalid name") from None
    if not infos:
        raise PeerUnavailable(f"cannot resolve host {host!r}: no addresses")
    return infos


def connect(
    host: str, port: int, timeout: float, presetup: Presetup | None = None
) -> socket.socket:
    """A TCP connection to the first address that answers (IPv6 and IPv4 in resolver order)."""
    errors: list[str] = []
    refused = False
    deadline = time.monotonic() + timeout
    for family, socktype, proto, _, sockaddr in resolve(host, port):
        sock = socket.socket(family, socktype, proto)
        try:
            if presetup is not None:
                presetup(sock)
            sock.settimeout(max(0.05, deadline - time.monotonic()))
            sock.connect(sockaddr)
        except ConnectionRefusedError:
            refused = True
            errors.append(f"{sockaddr[0]}: connection refused")
            sock.close()
            continue
        except (TimeoutError, OSError) as exc:
            errors.append(f"{sockaddr[0]}: {getattr(exc, 'strerror', None) or 'timed out'}")
            sock.close()
            continue
        sock.settimeout(timeout)
        return sock
    hint = " (is `tcpwizard serve` running there?)" if refused else ""
    raise PeerUnavailable(f"cannot connect to {host} port {port}: {'; '.join(errors)}{hint}")


DEFAULT_IDLE_TIMEOUT_S = 30.0  # serve's own default, for a hello that does not say
# A hello the far end's kernel acknowledged reached a listening process that has not run
# since. A process throttled by a CPU quota runs once per quota period, at most 1 s (the
# longest cpu.cfs_period_us / cpu.max period the kernel accepts), so ten periods give a
# starved serve several turns to answer; a serve that is gone never will.
STARVED_HELLO_S = 10.0


def kernel_acknowledged(sock: socket.socket, sent: int) -> bool:
    """Whether the other end's kernel acknowledged every byte this socket sent (`sent`
    bytes of data at least): its host and TCP are alive, whatever its process does."""
    try:
        info = read_tcp_info(sock)
    except OSError:
        return False
    return info.get("unacked") == 0 and (info.get("bytes_acked") or 0) >= sent


class ControlClient(UpDown):
    """A control connection. A context manager; close() says bye."""

    def __init__(
        self,
        host: str,
        port: int,
        secret: bytes | None = None,
        timeout: float = 5.0,
        starved_wait: float = STARVED_HELLO_S,
        ask_audit: bool = False,
    ) -> None:
        """`starved_wait`: how long to wait for serve's hello in all when serve's kernel took
        ours (a caller on a time budget gives its own timeout: no extension). `ask_audit`:
        the audit request goes out with the hello (without a secret to prove there is
        nothing to wait for in between), and peer_audit() reads its reply a round trip
        sooner."""
        self.host = host
        self.port = port
        self.timeout = timeout
        self.starved_wait = starved_wait
        self._sock = connect(host, port, timeout)
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.family: int = self._sock.family
        self.address: tuple[Any, ...] = self._sock.getpeername()
        self._reader = LineReader(self._sock)
        self._closed = False
        self.hello_wait_s = 0.0  # from the hello sent to serve's answer
        # The audit request sent with the hello, its reply not yet read.
        self._audit_asked = ask_audit and secret is None
        self._audit_reply: dict[str, object] | None = None
        try:
            self.hello = self._handshake(secret)
        except BaseException:
            self._sock.close()
            raise
        token = self.hello.udp_token
        assert token is not None  # in the hello without authentication, else in auth_ok
        self.version: int = self.hello.version
        self.udp_token: bytes = token
        self.udp_port: int = port if self.hello.udp_port is None else self.hello.udp_port

    @property
    def server_info(self) -> dict[str, object]:
        """serve's hello as it would send it (the UDP token included, however it came)."""
        return self.hello.to_wire()

    def _handshake(self, secret: bytes | None) -> ServerHello:
        """serve's hello, with the UDP token of auth_ok when serve asked for the secret."""
        sent = encode(ClientHello(f"tcpwizard/{__version__}").to_wire())
        if self._audit_asked:
            sent += encode(AuditRequest().to_wire())
        self.send_raw(sent)
        start = time.monotonic()
        try:
            first = self._recv_checked(self.timeout)
        except PeerSilent:
            first = self._late_hello(len(sent), start)
        self.hello_wait_s = time.monotonic() - start
        hello = ServerHello.from_wire(first)
        if hello.auth == NO_AUTH:
            return hello
        if secret is None:
            raise AuthFailed(
                f"serve at {self.host} port {self.port} requires a shared secret (--secret-file)"
            )
        challenge = hello.challenge
        if challenge is None:
            raise ProtocolError("serve asked for authentication without a challenge", "auth")
        nonce = auth.new_nonce()
        self.send(Auth(nonce, auth.client_proof(secret, challenge, nonce)).to_wire())
        try:
            reply = self._recv_checked(self.timeout)
        except ProtocolError as exc:
            if exc.code == "auth-failed":
                raise AuthFailed(f"serve at {self.host} rejected the shared secret") from None
            raise
        ok = AuthOk.from_wire(reply) if message_type(reply) == AuthOk.TYPE else None
        if ok is None or not auth.verify(auth.server_proof(secret, challenge, nonce), ok.proof):
            # The other end does not know the secret: not the serve we meant to talk to.
            raise AuthFailed(f"serve at {self.host} could not prove it knows the shared secret")
        return replace(hello, udp_token=ok.udp_token)

    def _late_hello(self, sent: int, start: float) -> dict[str, Any]:
        """serve's hello after the first timeout, when its kernel took ours: a starved serve
        answers within STARVED_HELLO_S; otherwise why none came."""
        if kernel_acknowledged(self._sock, sent):
            left = self.starved_wait - (time.monotonic() - start)
            if left > 0:
                with contextlib.suppress(PeerUnavailable):
                    return self._recv_checked(left)
            waited = max(self.starved_wait, self.timeout)
        else:
            waited = self.timeout
        # The kernel accepted the connection for the listening socket; the process behind
        # it never ran long enough to answer (measured: a serve held to 0.1 % of a core by
        # a cgroup quota does this).
        raise PeerSilent(
            f"port {self.port} at {self.host} accepted the connection but no hello came "
            f"within {waited:g} s: a serve starved of CPU (a CPU quota, a host too busy "
            "to run it) or stalled, or a program that is not serve"
        )

    # -- messages ---------------------------------------------------------------------------
    def send(self, msg: dict[str, object]) -> None:
        self._take_audit_reply()  # a reply still due is read before anything else is asked
        self.send_raw(encode(msg))

    def _take_audit_reply(self) -> None:
        if self._audit_asked:
            self._audit_asked = False
            self._audit_reply = self._recv_checked(self.timeout)

    def send_raw(self, data: bytes) -> None:
        try:
            self._sock.sendall(data)
        except OSError as exc:
            raise PeerUnavailable(f"lost the connection to serve at {self.host}: {exc}") from None

    def recv(self, timeout: float | None = None) -> dict[str, object]:
        """The next message, whatever its type (an error message is returned, not raised)."""
        self._sock.settimeout(self.timeout if timeout is None else timeout)
        try:
            return self._reader.read_msg()
        except EOFError:
            raise PeerUnavailable(f"serve at {self.host} closed the connection") from None
        except TimeoutError:
            raise PeerSilent(f"serve at {self.host} did not answer in time") from None
        except OSError as exc:
            raise PeerUnavailable(f"lost the connection to serve at {self.host}: {exc}") from None

    def _recv_checked(self, timeout: float | None = None) -> dict[str, Any]:
        msg = self.recv(timeout)
        error = ErrorReply.of(msg)
        if error is not None:
            if error.code in ("busy", "version"):
                raise PeerUnavailable(f"serve at {self.host}: {error.message}")
            raise ProtocolError(f"serve at {self.host}: {error.message}", error.code)
        return msg

    def request(self, msg: dict[str, object], timeout: float | None = None) -> dict[str, object]:
        """Send one request and return its reply; a {"type":"error"} reply raises."""
        self.send(msg)
        return self._recv_checked(timeout)

    def handshake(self, sysctl_root: str = "/proc/sys") -> HandshakeFacts | None:
        """What serve's host agreed to in the TCP handshake of this connection, with the
        options of our SYN as serve received it (its hello says, where it keeps SYNs)."""
        hs = read_handshake(self._sock, port=self.port, sysctl_root=sysctl_root)
        if hs is None or self.hello.syn is None:
            return hs
        return replace(hs, received_syn=self.hello.syn)

    def peer_audit(self) -> dict[str, object]:
        self._take_audit_reply()
        if self._audit_reply is not None:
            reply, self._audit_reply = self._audit_reply, None
            return AuditReply.from_wire(reply).audit
        return AuditReply.from_wire(self.request(AuditRequest().to_wire())).audit

    # -- attach connections and UDP --------------------------------------------------------
    def open_attached(
        self, session: str, role: AttachRole, stream: int = 0, presetup: Presetup | None = None
    ) -> socket.socket:
        """A new TCP connection to the same address, announced as part of `session`.
        `presetup` runs after socket() and before connect() (buffer sizes fix the window
        scale at SYN time)."""
        sock = self.connect_new(role, presetup)
        self.attach(sock, session, role, stream)
        return sock

    def connect_new(self, role: AttachRole, presetup: Presetup | None = None) -> socket.socket:
        """A new TCP connection to the same address, not yet announced: it may be opened
        while the request that names its session is still on its way."""
        sock = socket.socket(self.family, socket.SOCK_STREAM)
        try:
            if presetup is not None:
                presetup(sock)
            sock.settimeout(self.timeout)
            sock.connect(self.address)
        except OSError as exc:
            sock.close()
            raise PeerUnavailable(
                f"cannot open a {role} connection to {self.host}: {exc}"
            ) from None
        return sock

    def attach(self, sock: socket.socket, session: str, role: AttachRole, stream: int) -> None:
        """Announce a connection from `connect_new` as stream `stream` of `session`."""
        try:
            sock.sendall(encode(Attach(session, role, stream).to_wire()))
        except OSError as exc:
            sock.close()
            raise PeerUnavailable(
                f"cannot open a {role} connection to {self.host}: {exc}"
            ) from None

    def udp_socket(self) -> socket.socket:
        """A UDP socket connected to the serve's reflector, with kernel receive timestamps."""
        sock = socket.socket(self.family, socket.SOCK_DGRAM)
        addr = (self.address[0], self.udp_port, *self.address[2:])
        sock.connect(addr)
        udp.enable_rx_timestamps(sock)
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        return sock

    # -- lifetime ----------------------------------------------------------------------------
    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def idle_timeout_s(self) -> float:
        """How long serve keeps this connection without a request (its hello says)."""
        limits = self.hello.limits
        told = limits.idle_timeout_s if limits is not None else None
        return told if told is not None and told > 0 else DEFAULT_IDLE_TIMEOUT_S

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(OSError, PeerUnavailable, ProtocolError):
            self._sock.settimeout(min(self.timeout, 1.0))
            self._sock.sendall(encode(Bye().to_wire()))
        with contextlib.suppress(OSError):
            self._sock.close()

    def up(self) -> Self:
        """Connected and greeted when built: `with` only closes it."""
        return self

    def down(self) -> None:
        self.close()


__all__ = ["MAX_MESSAGE", "ControlClient", "connect", "resolve"]
