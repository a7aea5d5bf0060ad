"""The serve end of test transfers (docs/transfer.md, docs/protocol.md).

One request on the control connection runs one transfer (the messages:
measure/wire/transfer_msgs.py):

  client -> transfer_start (mode, direction, streams, length, sampling)
  serve  -> transfer_ready (the session token, serve's buffer limits and length limits)
  client opens `streams` attach connections role "data" (and as many role "drs" for DRS)
  serve  -> transfer_running (serve's role: sender or receiver)
  ... data flows; "up" means client -> serve (serve receives) ...
  serve  -> transfer_result (serve's SideReport)

Bad requests raise ProtocolError (serve answers with an error line and closes). A client
that never attaches, or vanishes mid-transfer, costs at most the stall timeout.
"""

from __future__ import annotations

import contextlib
import secrets
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from tcpwizard.measure.engine import buffers, datapath
from tcpwizard.measure.engine.steady import SteadyStop
from tcpwizard.measure.observe import hostload
from tcpwizard.measure.observe.tcpinfo import congestion_control
from tcpwizard.measure.serve.limits import ServeLimits
from tcpwizard.measure.wire import transfer_msgs
from tcpwizard.measure.wire.fields import message_type
from tcpwizard.measure.wire.protocol import ProtocolError, encode
from tcpwizard.measure.wire.session import ErrorReply
from tcpwizard.measure.wire.transfer_msgs import (
    MAX_STALL_S,
    Attach,
    TransferReady,
    TransferResultReply,
    TransferRunning,
    TransferStart,
)

ATTACH_TIMEOUT = 10.0  # from transfer_ready until every stream has attached
MAX_STALL = MAX_STALL_S
MAX_SOCKET_BUFFER = transfer_msgs.MAX_SOCKET_BUFFER


@dataclass
class _Session:
    token: str
    streams: int
    drs: bool
    data: list[socket.socket | None]
    drs_socks: list[socket.socket | None]
    cond: threading.Condition = field(default_factory=threading.Condition)
    done: threading.Event = field(default_factory=threading.Event)
    closed: bool = False

    def complete(self) -> bool:
        return all(s is not None for s in self.data) and (
            not self.drs or all(s is not None for s in self.drs_socks)
        )


class TransferService:
    def __init__(
        self,
        limits: ServeLimits,
        sysctl_root: str = "/proc/sys",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.limits = limits
        self.sysctl_root = sysctl_root
        self.clock = clock
        self._lock = threading.Lock()
        self._sessions: dict[str, _Session] = {}

    # ------------------------------------------------------------------ control requests
    def handle_request(
        self, request: dict[str, object], send: Callable[[dict[str, object]], None]
    ) -> None:
        kind = message_type(request)
        if kind != TransferStart.TYPE:
            raise ProtocolError(f"unknown transfer request {kind[:40]!r}", "unknown-type")
        start = TransferStart.from_wire(request)
        mode, direction, streams = start.mode, start.direction, start.streams
        duration, nbytes, static = start.duration_s, start.bytes, start.static_request
        force, until_steady = start.force, start.until_steady
        interval, stall = start.sample_interval_s, start.stall_timeout_s
        # Our limits, not the client's wishes, bound how long and how much.
        if duration is not None:
            duration = self.limits.clamp_duration(duration)
        if nbytes is not None:
            nbytes = self.limits.clamp_bytes(nbytes)
        try:
            host = buffers.read_host_limits(self.sysctl_root)
        except OSError as exc:
            raise ProtocolError(f"cannot read buffer limits: {exc}", "internal") from None
        try:
            plan = datapath.plan_buffers(
                mode, host, static, force and buffers.can_force(), streams=streams
            )
        except datapath.TransferError as exc:
            raise ProtocolError(str(exc)) from None

        session = self._new_session(streams, plan.drs)
        try:
            probe = socket.socket()
            cc = congestion_control(probe)
            probe.close()
            send(
                TransferReady(
                    session=session.token,
                    congestion_control=cc,
                    duration_s=duration,
                    bytes=nbytes,
                    max_duration_s=self.limits.max_duration_s,
                    max_bytes=self.limits.max_bytes,
                    limits=host.to_json(),
                ).to_wire()
            )
            if not self._wait_attached(session):
                raise ProtocolError(
                    f"transfer streams did not attach within {ATTACH_TIMEOUT:g} s", "timeout"
                )
            data = [s for s in session.data if s is not None]
            drs = [s for s in session.drs_socks if s is not None]
            for s in data:
                plan.postsetup(s, accepted=True)
            role: Literal["sender", "receiver"] = "sender" if direction == "down" else "receiver"
            send(TransferRunning(role).to_wire())
            load = hostload.sample_host()
            if role == "sender":
                report = datapath.run_sender(
                    data,
                    duration_s=duration,
                    nbytes=nbytes,
                    drs_socks=drs,
                    plan=plan,
                    clock=self.clock,
                    sample_interval=interval,
                    stall_timeout=stall,
                    max_seconds=self.limits.max_duration_s,
                    steady=SteadyStop() if until_steady and nbytes is None else None,
                )
            else:
                report = datapath.run_receiver(
                    data,
                    drs_socks=drs,
                    plan=plan,
                    clock=self.clock,
                    sample_interval=interval,
                    stall_timeout=stall,
                    # The sender may drain for MAX_DRAIN_S after the duration.
                    max_seconds=self.limits.max_duration_s + datapath.MAX_DRAIN_S + stall,
                )
            report.host_load = load.stop()
            send(TransferResultReply(report).to_wire())
        finally:
            self._end_session(session)

    def _new_session(self, streams: int, drs: bool) -> _Session:
        # The token is the capability for attach connections: unguessable.
        token = secrets.token_hex(16)
        s = _Session(token, streams, drs, [None] * streams, [None] * (streams if drs else 0))
        with self._lock:
            self._sessions[token] = s
        return s

    def _wait_attached(self, session: _Session) -> bool:
        deadline = self.clock() + ATTACH_TIMEOUT
        with session.cond:
            while not session.complete():
                left = deadline - self.clock()
                if left <= 0:
                    return False
                session.cond.wait(timeout=min(left, 0.5))
        return True

    def _end_session(self, session: _Session) -> None:
        with self._lock:
            self._sessions.pop(session.token, None)
        with session.cond:
            session.closed = True
            socks = [s for s in (*session.data, *session.drs_socks) if s is not None]
        for s in socks:
            with contextlib.suppress(OSError):
                s.close()
        session.done.set()

    # ------------------------------------------------------------------ attach connections
    def handle_attach(self, header: dict[str, object], sock: socket.socket) -> None:
        try:
            session, slot = self._register(header, sock)
        except ProtocolError as exc:
            with contextlib.suppress(OSError):
                sock.settimeout(1.0)
                sock.sendall(encode(ErrorReply(exc.code, str(exc)).to_wire()))
            sock.close()
            return
        # The control thread owns the transfer; this thread only keeps the socket's
        # lifetime bounded and closes it if the session never runs.
        bound = self.limits.max_duration_s + datapath.MAX_DRAIN_S + ATTACH_TIMEOUT + 2 * MAX_STALL
        if not session.done.wait(timeout=bound):
            with session.cond:
                if slot[0][slot[1]] is sock:
                    slot[0][slot[1]] = None
            with contextlib.suppress(OSError):
                sock.close()

    def _register(
        self, header: dict[str, object], sock: socket.socket
    ) -> tuple[_Session, tuple[list[socket.socket | None], int]]:
        attach = Attach.from_wire(header)
        stream = attach.stream
        with self._lock:
            session = self._sessions.get(attach.session)
        if session is None:
            raise ProtocolError("attach: unknown or finished session", "unknown-session")
        slots = session.data if attach.role == "data" else session.drs_socks
        if stream >= len(slots):
            raise ProtocolError("attach: stream number out of range")
        with session.cond:
            if session.closed:
                raise ProtocolError("attach: session already finished", "unknown-session")
            if slots[stream] is not None:
                raise ProtocolError("attach: stream already attached")
            slots[stream] = sock
            session.cond.notify_all()
        return session, (slots, stream)
