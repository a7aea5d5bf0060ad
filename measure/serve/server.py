"""`tcpwizard serve`: the far end. One TCP port for control and attach connections, a UDP
reflector on the same port number, one thread per connection (blocking sockets).

Robustness rules (docs/protocol.md): every malformed, oversized or out-of-state message
gets one error line and the connection is closed; nothing a client sends can stop the
server or disturb other clients. Limits come from ServeLimits.

Why one module of this size: accept, limits, reservations and dispatch hold one lock and one
reservation table; what stands alone (sessions, the reflector, the transfer side) is already
in modules of its own.
"""

from __future__ import annotations

import contextlib
import importlib
import secrets
import socket
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from tcpwizard import __version__
from tcpwizard.measure.observe.synopts import save_syns, saved_syn
from tcpwizard.measure.serve.hostlock import HostLock
from tcpwizard.measure.serve.limits import ServeLimits
from tcpwizard.measure.serve.peer_audit import host_audit
from tcpwizard.measure.wire import auth, spec, udp
from tcpwizard.measure.wire.fields import message_type
from tcpwizard.measure.wire.probe_msgs import (
    MAX_ARRIVALS_PER_TRAIN,
    MAX_TRAINS_PER_SESSION,
    ProbeReport,
    ProbeReportRequest,
    ProbeTrain,
    ProbeTrainDone,
)
from tcpwizard.measure.wire.protocol import (
    MAX_MESSAGE,
    LineReader,
    ProtocolError,
    decode,
    encode,
    read_first_line,
)
from tcpwizard.measure.wire.session import (
    HMAC_AUTH,
    NO_AUTH,
    AuditReply,
    AuditRequest,
    Auth,
    AuthOk,
    Bye,
    ClientHello,
    ErrorReply,
    HelloLimits,
    Ping,
    Pong,
    ServerHello,
)
from tcpwizard.measure.wire.transfer_msgs import TRANSFER_PREFIX, Attach

Log = Callable[[str], None]
# With a host lock (serve --lock), the client that measures keeps serve to itself this long
# after its last control connection closes: a check holds one (two at once with --quick),
# but a monitor's round of checks opens one after another, with local work between them.
RESERVATION_GRACE_S = 2.0
# When a refused client should ask again while the holder's check runs (written in the lock
# file, renewed by each of its connections): asking is one hello, so poll rather than guess.
RESERVATION_EXPECT_S = 1.0
# Open connections per allowed control client: a DRS transfer with N streams uses 2N attach
# connections (data + DRS channel each) besides its control connection.
CONNECTIONS_PER_CLIENT = 2 * spec.MAX_STREAMS + 4  # streams x (data + DRS) + control + slack


class TransferHandler(Protocol):
    """What serve needs from measure/serve/transfers.TransferService (engineer T)."""

    def handle_request(
        self, request: dict[str, object], send: Callable[[dict[str, object]], None]
    ) -> None: ...

    def handle_attach(self, header: dict[str, object], sock: socket.socket) -> None: ...


@dataclass
class UdpSession:
    """UDP state of one control session, found by its token."""

    token: bytes
    peer_host: str
    address: Any = None  # registered UDP address for downlink trains
    trains: OrderedDict[int, list[tuple[int, int]]] = field(default_factory=OrderedDict)
    cond: threading.Condition = field(default_factory=threading.Condition)


class Server:
    def __init__(
        self,
        bind: str = "::",
        port: int = 5301,
        limits: ServeLimits | None = None,
        secret: bytes | None = None,
        once: bool = False,
        log: Log | None = None,
        transfer: TransferHandler | None = None,
        sysctl_root: str = "/proc/sys",
        host_lock: HostLock | None = None,
    ) -> None:
        self.limits = limits or ServeLimits()
        # One measurement at a time on this host (a mesh): the client holding it, its open
        # control sessions, and the timer that lets go after its last one.
        self.host_lock = host_lock
        self._holder: str | None = None
        self._holder_sessions = 0
        self._release_timer: threading.Timer | None = None
        self._release_asked = False  # the holder said its check is over
        self.secret = secret
        self.once = once
        self.log: Log = log or (lambda m: print(m, file=sys.stderr, flush=True))
        self.sysctl_root = sysctl_root
        self.stop_event = threading.Event()
        self._lock = threading.Lock()
        self._controls = 0
        self._conns: set[socket.socket] = set()
        # Half-open connections (first message not complete yet), oldest first.
        self._half_open: OrderedDict[socket.socket, float] = OrderedDict()
        # Control sessions' readers, so a stalled one can be found when the slots are full.
        self._readers: dict[socket.socket, LineReader] = {}
        self._threads: set[threading.Thread] = set()
        self._sessions: dict[bytes, UdpSession] = {}
        self._served_one = False
        self.transfer = transfer if transfer is not None else _load_transfer(self.limits)
        self.tcp, self.udp = _bind_pair(bind, port)
        self.port = self.tcp.getsockname()[1]
        self.kernel_timestamps = udp.enable_rx_timestamps(self.udp)

    # -- lifecycle -------------------------------------------------------------------------
    def serve_forever(self) -> None:
        """Until stop() (signal handler) or, with once=True, the first client is done."""
        udp_thread = threading.Thread(target=self._udp_loop, name="serve-udp", daemon=True)
        udp_thread.start()
        # The host audit's first run imports and opens what later runs reuse (0.11 s cold,
        # 0.013 s warm on the lab's hosts): done once here, not in the first client's check.
        threading.Thread(target=self._warm_audit, name="serve-warm", daemon=True).start()
        self.tcp.settimeout(0.2)  # wake up regularly to notice stop()
        try:
            while not self.stop_event.is_set():
                try:
                    conn, addr = self.tcp.accept()
                except TimeoutError:
                    continue
                except OSError:
                    if self.stop_event.is_set():
                        break
                    raise
                self._start_connection(conn, addr)
        finally:
            self._shutdown()
            udp_thread.join(timeout=2.0)

    def stop(self) -> None:
        self.stop_event.set()

    def _warm_audit(self) -> None:
        with contextlib.suppress(Exception):
            host_audit(self.sysctl_root, None)

    def _shutdown(self) -> None:
        self.stop_event.set()
        with self._lock:
            if self._release_timer is not None:
                self._release_timer.cancel()
            if self.host_lock is not None:
                self.host_lock.release()
        for s in (self.tcp, self.udp):
            with contextlib.suppress(OSError):
                s.close()
        with self._lock:
            conns = list(self._conns)
            threads = list(self._threads)
        for c in conns:  # unblock threads sitting in recv()
            with contextlib.suppress(OSError):
                c.shutdown(socket.SHUT_RDWR)
        deadline = time.monotonic() + 3.0
        for t in threads:
            t.join(timeout=max(0.0, deadline - time.monotonic()))

    def _start_connection(self, conn: socket.socket, addr: Any) -> None:
        evict: socket.socket | None = None
        with self._lock:
            too_many = len(self._conns) >= self.limits.max_clients * CONNECTIONS_PER_CLIENT
            if too_many and self._half_open:
                # A stalled newcomer gives way to this one rather than refusing it.
                evict, _ = self._half_open.popitem(last=False)
                too_many = False
            if not too_many:
                if len(self._half_open) >= self.limits.max_half_open:
                    evict, _ = self._half_open.popitem(last=False)
                self._conns.add(conn)
                self._half_open[conn] = time.monotonic()
        if evict is not None:
            _drop(evict)
        if too_many:
            self._refuse(conn, "busy", "server busy: too many open connections; try again later")
            return
        t = threading.Thread(target=self._connection, args=(conn, addr), daemon=True)
        with self._lock:
            self._threads.add(t)
        t.start()

    def _refuse(self, conn: socket.socket, code: str, message: str) -> None:
        with contextlib.suppress(OSError):
            conn.settimeout(1.0)
            conn.sendall(encode(ErrorReply(code, message).to_wire()))
        _close(conn)

    # -- one TCP connection ----------------------------------------------------------------
    def _connection(self, conn: socket.socket, addr: Any) -> None:
        peer = _fmt_addr(addr)
        handed_over = False
        try:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                opened = self._half_open.get(conn, time.monotonic())
            try:
                line = read_first_line(conn, opened + self.limits.slow_client_timeout_s)
            except ProtocolError as exc:
                self._send_error(conn, exc.code, str(exc))
                self.log(f"{peer}: {exc}")
                return
            finally:
                with self._lock:
                    self._half_open.pop(conn, None)
            try:
                first = decode(line)
            except ProtocolError as exc:
                self._send_error(conn, exc.code, str(exc))
                self.log(f"{peer}: {exc}")
                return
            kind = message_type(first)
            if kind == ClientHello.TYPE:
                self._control(conn, peer, ClientHello.from_wire(first))
            elif kind == Attach.TYPE:
                if self.transfer is None:
                    self._send_error(conn, "unsupported", "this serve has no transfer engine")
                    return
                handed_over = True  # the transfer engine owns and closes the socket now
                conn.settimeout(None)
                self.transfer.handle_attach(first, conn)
            else:
                self._send_error(
                    conn,
                    "bad-request",
                    f"first message must be hello or attach, not {kind[:40]!r}",
                )
        except ProtocolError as exc:  # raised outside a request: handshake, framing
            self._send_error(conn, exc.code, str(exc))
        except (EOFError, TimeoutError, ConnectionError):
            pass  # the client went away or stalled: nothing to answer
        except OSError as exc:
            self.log(f"{peer}: socket error: {exc}")
        except Exception as exc:  # a bug must cost one connection, never the server
            self.log(f"{peer}: internal error: {type(exc).__name__}: {exc}")
            self._send_error(conn, "internal", "internal server error")
        finally:
            if not handed_over:
                _close(conn)
            with self._lock:
                self._conns.discard(conn)
                self._half_open.pop(conn, None)
                self._threads.discard(threading.current_thread())

    def _send_error(self, conn: socket.socket, code: str, message: str) -> None:
        with contextlib.suppress(OSError):
            conn.sendall(encode(ErrorReply(code, message[:1000]).to_wire()))

    def _control(self, conn: socket.socket, peer: str, hello: ClientHello) -> None:
        version = max(hello.versions)
        if hello.release:
            # The holder's check is over (exporter --lock says so): free the host now rather
            # than after the grace period, so the next slot of a mesh starts on time.
            self._release_asked_by(_client_host(conn))
            self._send_error(conn, "released", "host lock released")
            return
        busy = not self._take_control_slot()
        if busy:
            self.log(f"{peer}: refused, {self.limits.max_clients} clients already connected")
            self._send_error(
                conn,
                "busy",
                f"server busy: {self.limits.max_clients} clients already connected "
                "(serve --max-clients); try again later",
            )
            return
        client = _client_host(conn)
        retry_after = self._reserve(client)
        if retry_after is not None:
            with self._lock:
                self._controls -= 1
            self.log(f"{peer}: refused, this host is measuring (retry after {retry_after:.0f} s)")
            with contextlib.suppress(OSError):
                measuring = ErrorReply(
                    "busy",
                    f"server busy: this host is in another measurement; "
                    f"try again in {retry_after:.0f} s",
                    retry_after_s=round(retry_after, 1),
                )
                conn.sendall(encode(measuring.to_wire()))
            return
        token = secrets.token_bytes(udp.TOKEN_LEN)
        session = UdpSession(token, peer)
        reader = LineReader(conn, partial_timeout=self.limits.slow_client_timeout_s)
        with self._lock:
            self._readers[conn] = reader
        try:
            self.log(f"{peer}: control connection (protocol {version})")
            offer = ServerHello(
                version=version,
                server=f"tcpwizard/{__version__}",
                auth=HMAC_AUTH if self.secret else NO_AUTH,
                udp_port=self.port,
                kernel_timestamps=self.kernel_timestamps,
                transfer=self.transfer is not None,
                limits=HelloLimits(
                    max_duration_s=self.limits.max_duration_s,
                    max_bytes=self.limits.max_bytes,
                    max_message=MAX_MESSAGE,
                    idle_timeout_s=self.limits.idle_timeout_s,
                ),
                syn=saved_syn(conn),
            )
            if self.secret:
                proof = self._authenticate(conn, reader, offer, peer)
                if proof is None:
                    return
                reply = AuthOk(token, proof).to_wire()
            else:
                reply = replace(offer, udp_token=token).to_wire()
            # Live before the client learns the token: its first echo may beat this thread.
            with self._lock:
                self._sessions[token] = session
            conn.sendall(encode(reply))
            self._requests(conn, reader, session)
        finally:
            with self._lock:
                self._sessions.pop(token, None)
                self._readers.pop(conn, None)
                self._controls -= 1
                self._served_one = True
            self._unreserve(client)
            self.log(f"{peer}: control connection closed")
            if self.once:
                self.stop()

    def _reserve(self, client: str) -> float | None:
        """None when `client` may measure now (it holds the host lock from here on), else
        the seconds it should wait. Without a host lock every client may."""
        lock = self.host_lock
        if lock is None:
            return None
        with self._lock:
            if self._holder not in (None, client):
                return lock.retry_after()
            if self._holder is None and not lock.try_acquire(client, RESERVATION_EXPECT_S):
                return lock.retry_after()  # this host's own exporter is measuring
            lock.extend(client, RESERVATION_EXPECT_S)
            self._holder = client
            self._holder_sessions += 1
            self._release_asked = False  # a new check of the same client
            if self._release_timer is not None:
                self._release_timer.cancel()
                self._release_timer = None
        return None

    def _unreserve(self, client: str) -> None:
        """The client's session ended: keep the host for it a little (its next connection of
        the same check), then let go."""
        if self.host_lock is None:
            return
        with self._lock:
            if self._holder != client:
                return
            self._holder_sessions -= 1
            if self._holder_sessions > 0:
                return
            if self._release_asked:
                self._let_go()
                return
            self.host_lock.extend(client, RESERVATION_GRACE_S)
            timer = threading.Timer(RESERVATION_GRACE_S, self._release_if_idle, args=(client,))
            timer.daemon = True
            self._release_timer = timer
        timer.start()

    def _release_if_idle(self, client: str) -> None:
        """The grace period is over: let go unless the holder came back."""
        with self._lock:
            if self._holder == client and self._holder_sessions == 0:
                self._let_go()

    def _release_asked_by(self, client: str) -> None:
        """The holder says its check is over: let go now, or as soon as the connections it
        closed are done here (their threads may not have noticed yet)."""
        with self._lock:
            if self._holder != client:
                return
            if self._holder_sessions > 0:
                self._release_asked = True
            else:
                self._let_go()

    def _let_go(self) -> None:
        """Free the host (self._lock held)."""
        self._holder = None
        self._release_asked = False
        if self._release_timer is not None:
            self._release_timer.cancel()
            self._release_timer = None
        if self.host_lock is not None:
            self.host_lock.release()

    def _take_control_slot(self) -> bool:
        """A control slot; when all are taken, the session stalled longest in the middle of
        a message gives its slot up (it is closed), so trickling clients cannot keep a
        real check out."""
        deadline = time.monotonic() + 2.0
        evicted = False
        while True:
            with self._lock:
                if self._controls < self.limits.max_clients:
                    self._controls += 1
                    return True
                victim = None if evicted else self._stalled_control()
            if victim is not None:
                _drop(victim)
                evicted = True
            elif not evicted or time.monotonic() >= deadline:
                return False
            time.sleep(0.02)

    def _stalled_control(self) -> socket.socket | None:
        """The control connection whose pending message began longest ago (lock held)."""
        now = time.monotonic()
        stalled = [
            (r.partial_since, c)
            for c, r in self._readers.items()
            if r.partial_since is not None and now - r.partial_since >= self.limits.stalled_evict_s
        ]
        return min(stalled, key=lambda item: item[0])[1] if stalled else None

    def _authenticate(
        self, conn: socket.socket, reader: LineReader, offer: ServerHello, peer: str
    ) -> str | None:
        """Challenge the client (in the hello `offer`); serve's own proof when the client
        proved the secret, else None (the client has been told)."""
        assert self.secret is not None
        nonce = auth.new_nonce()
        conn.sendall(encode(replace(offer, challenge=nonce).to_wire()))
        conn.settimeout(self.limits.slow_client_timeout_s)
        answer = Auth.from_wire(reader.read_msg())
        expected = auth.client_proof(self.secret, nonce, answer.nonce)
        if not auth.verify(expected, answer.proof):
            # A short pause makes online guessing slow; it only blocks this connection.
            time.sleep(0.2)
            self.log(f"{peer}: authentication failed")
            self._send_error(conn, "auth-failed", "authentication failed: wrong shared secret")
            return None
        return auth.server_proof(self.secret, nonce, answer.nonce)

    def _requests(self, conn: socket.socket, reader: LineReader, session: UdpSession) -> None:
        send_lock = threading.Lock()

        def send(msg: dict[str, object]) -> None:
            data = encode(msg)
            with send_lock:
                conn.sendall(data)

        ends = time.monotonic() + self.limits.max_session_s
        while not self.stop_event.is_set():
            left = ends - time.monotonic()
            if left <= 0:
                limit = f"{self.limits.max_session_s:g} s"
                why = f"connection open longer than {limit}; closing"
                send(ErrorReply("lifetime", why).to_wire())
                return
            conn.settimeout(min(self.limits.idle_timeout_s, left))
            try:
                line = reader.read_line()
            except TimeoutError:
                if time.monotonic() >= ends:
                    continue  # said at the top of the loop
                if reader.pending:
                    why = f"message incomplete after {self.limits.slow_client_timeout_s:g} s"
                    send(ErrorReply("slow", f"{why}; closing").to_wire())
                else:
                    idle = f"idle for {self.limits.idle_timeout_s:g} s; closing"
                    send(ErrorReply("idle", idle).to_wire())
                return
            try:
                msg = decode(line)
                conn.settimeout(self.limits.slow_client_timeout_s)
                if not self._dispatch(msg, send, session):
                    return
            except ProtocolError as exc:
                send(ErrorReply(exc.code, str(exc)[:1000]).to_wire())
                return

    def _dispatch(
        self, msg: dict[str, Any], send: Callable[[dict[str, object]], None], session: UdpSession
    ) -> bool:
        """Handle one request; False ends the conversation."""
        kind = message_type(msg)
        if kind == Bye.TYPE:
            send(Bye().to_wire())
            return False
        if kind == Ping.TYPE:
            send(Pong(Ping.from_wire(msg).id, time.time_ns()).to_wire())
        elif kind == AuditRequest.TYPE:
            client = session.peer_host.rsplit(":", 1)[0].strip("[]")
            send(AuditReply(host_audit(self.sysctl_root, client)).to_wire())
        elif kind == ProbeReportRequest.TYPE:
            send(self._probe_report(ProbeReportRequest.from_wire(msg), session).to_wire())
        elif kind == ProbeTrain.TYPE:
            send(self._probe_train(msg, session).to_wire())
        elif kind.startswith(TRANSFER_PREFIX):
            if self.transfer is None:
                raise ProtocolError("this serve has no transfer engine", "unsupported")
            self.transfer.handle_request(msg, send)
        elif kind in (ClientHello.TYPE, Auth.TYPE):
            raise ProtocolError(f"{kind} is only allowed at the start", "state")
        else:
            raise ProtocolError(f"unknown request type {kind[:40]!r}", "unknown-type")
        return True

    # -- probes ------------------------------------------------------------------------------
    def _probe_report(self, ask: ProbeReportRequest, session: UdpSession) -> ProbeReport:
        """Arrival times of the client's upload trains. Waits (bounded) for the expected
        packets so the client need not guess how long the bottleneck queue takes to drain."""
        ids, expect = ask.trains, ask.expect
        wait_s = min(ask.wait_ms / 1000.0, self.limits.max_duration_s)
        quiet_s = ask.quiet_ms / 1000.0
        deadline = time.monotonic() + wait_s

        def count() -> int:
            return sum(len(session.trains.get(i, ())) for i in ids)

        with session.cond:
            last_n, last_change = count(), time.monotonic()
            while (n := count()) < expect:
                now = time.monotonic()
                if n != last_n:
                    last_n, last_change = n, now
                if now >= deadline or now - last_change >= quiet_s:
                    break
                session.cond.wait(timeout=min(0.02, deadline - now))
            trains = {i: tuple(session.trains.pop(i, [])) for i in ids}
        return ProbeReport(trains, self.kernel_timestamps)

    def _probe_train(self, msg: dict[str, Any], session: UdpSession) -> ProbeTrainDone:
        """Send a train to the client's registered UDP address (download direction)."""
        if session.address is None:
            raise ProtocolError(
                "no UDP address registered for this session (UDP blocked?)", "no-udp"
            )
        ask = ProbeTrain.from_wire(msg)
        size = ask.size
        if ask.count * size > self.limits.max_bytes:
            raise ProtocolError(
                f"train of {ask.count * size} bytes exceeds the serve limit", "limit"
            )
        wire = udp.wire_bytes(self.udp.family, size)
        gap_ns = wire * 8 * 1e6 / ask.rate_kbps if ask.rate_kbps else 0.0
        deadline = time.monotonic() + self.limits.max_duration_s
        buf = bytearray(size)
        t0 = time.time_ns()
        p0 = time.perf_counter_ns()
        sent = 0
        if not gap_ns:
            # Back to back: batches per system call, or at 1 Gbit/s the train leaves at
            # Python's pace of one sendto per packet, not the path's.
            def stamp(batch: bytearray, offset: int, seq: int, now: int) -> None:
                udp.HEADER.pack_into(
                    batch, offset, udp.MAGIC, udp.KIND_TRAIN_DOWN, session.token,
                    ask.train, seq, now, 0,
                )  # fmt: skip

            sent = udp.send_train_batches(self.udp, ask.count, size, stamp, session.address)
        for seq in range(sent, ask.count):
            if gap_ns and seq % ask.burst == 0:
                udp.wait_until_ns(round(p0 + seq * gap_ns))
            udp.HEADER.pack_into(
                buf,
                0,
                udp.MAGIC,
                udp.KIND_TRAIN_DOWN,
                session.token,
                ask.train,
                seq,
                time.time_ns(),
                0,
            )
            try:
                self.udp.sendto(buf, session.address)
                sent += 1
            except OSError:
                break
            if time.monotonic() > deadline:
                break
        return ProbeTrainDone(ask.train, sent, time.time_ns() - t0)

    def _udp_loop(self) -> None:
        self.udp.settimeout(0.2)
        while not self.stop_event.is_set():
            try:
                data, addr, rx_ns, _kernel = udp.recv_stamped(self.udp)
            except TimeoutError:
                continue
            except OSError:
                if self.stop_event.is_set():
                    return
                continue  # e.g. ICMP port unreachable reported on the socket
            pkt = udp.unpack(data)
            if pkt is None:
                continue
            with self._lock:
                session = self._sessions.get(pkt.token)
            if session is None:
                continue  # only clients with a live control session get answers
            try:
                self._udp_packet(pkt, data, addr, rx_ns, session)
            except OSError:
                continue

    def _udp_packet(
        self, pkt: udp.Packet, data: bytes, addr: Any, rx_ns: int, session: UdpSession
    ) -> None:
        if pkt.kind == udp.KIND_ECHO:
            # Turnaround = kernel arrival -> just before sendto; the client subtracts it.
            reply = bytearray(data)
            turn = max(0, time.time_ns() - rx_ns)
            udp.HEADER.pack_into(
                reply,
                0,
                udp.MAGIC,
                udp.KIND_ECHO_REPLY,
                pkt.token,
                pkt.train,
                pkt.seq,
                pkt.client_ns,
                turn,
            )
            self.udp.sendto(bytes(reply), addr)
        elif pkt.kind == udp.KIND_TRAIN_UP:
            with session.cond:
                arr = session.trains.get(pkt.train)
                if arr is None:
                    if len(session.trains) >= MAX_TRAINS_PER_SESSION:
                        session.trains.popitem(last=False)
                    arr = session.trains[pkt.train] = []
                if len(arr) < MAX_ARRIVALS_PER_TRAIN:
                    arr.append((pkt.seq, rx_ns))
                session.cond.notify_all()
        elif pkt.kind == udp.KIND_REGISTER:
            session.address = addr
            ack = udp.pack(udp.KIND_REGISTER_ACK, pkt.token, 0, pkt.seq, pkt.client_ns)
            self.udp.sendto(ack, addr)


def _load_transfer(limits: ServeLimits) -> TransferHandler | None:
    """The transfer engine lives in measure/serve/transfers.py (engineer T)."""
    try:
        mod = importlib.import_module("tcpwizard.measure.serve.transfers")
    except ImportError:
        return None
    cls = getattr(mod, "TransferService", None)
    if cls is None:
        return None
    handler: TransferHandler = cls(limits)
    return handler


def _bind_pair(bind: str, port: int) -> tuple[socket.socket, socket.socket]:
    """TCP listener and UDP socket on the same port number. '::' means dual-stack (IPv4
    clients arrive as mapped addresses); hosts without IPv6 fall back to 0.0.0.0."""
    candidates = [bind]
    if bind == "::":
        candidates.append("0.0.0.0")
    last: OSError | None = None
    for host in candidates:
        for attempt in range(20 if port == 0 else 1):
            try:
                return _try_bind(host, port)
            except OSError as exc:
                last = exc
                if port != 0 or attempt == 19:
                    break
    assert last is not None
    raise last


def _try_bind(host: str, port: int) -> tuple[socket.socket, socket.socket]:
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    family, _, _, _, sockaddr = infos[0]
    tcp = socket.socket(family, socket.SOCK_STREAM)
    try:
        tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6 and host == "::":
            tcp.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        tcp.bind(sockaddr)
        # Keep each accepted SYN: its options as they arrived go back in the hello.
        save_syns(tcp)
        # The kernel's most (net.core.somaxconn): a burst of connections (TCP hop probes
        # toward this port, `path --method tcp`, or many clients at once) must not find a
        # full accept queue, whose overflow drops SYNs silently and makes a hop of silence.
        tcp.listen(socket.SOMAXCONN)
        real_port = tcp.getsockname()[1]
        udp = socket.socket(family, socket.SOCK_DGRAM)
        try:
            if family == socket.AF_INET6 and host == "::":
                udp.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
            udp.bind((sockaddr[0], real_port, *sockaddr[2:]))
            # Bursts of trains must not be dropped by our own receive buffer.
            with contextlib.suppress(OSError):
                udp.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        except OSError:
            udp.close()
            raise
    except OSError:
        tcp.close()
        raise
    return tcp, udp


def _client_host(conn: socket.socket) -> str:
    """The client's address without its port (IPv4-mapped IPv6 as IPv4)."""
    try:
        host = str(conn.getpeername()[0])
    except OSError:
        return "?"
    return host[7:] if host.startswith("::ffff:") else host


def _fmt_addr(addr: Any) -> str:
    host, port = addr[0], addr[1]
    if isinstance(host, str) and host.startswith("::ffff:"):
        host = host[7:]
    return f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"


def _drop(sock: socket.socket) -> None:
    """Wake the thread blocked on `sock` (it then closes it) without racing its close."""
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.close()
