"""The transfer messages of serve's control protocol (docs/protocol.md), and the first line
of the attach connections that carry a transfer's streams, as typed, frozen dataclasses
with one `to_wire` and one `from_wire` each: the client builds them, serve parses and
range-checks them here, and nothing else spells a field name."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, cast

from tcpwizard.measure.engine import datapath
from tcpwizard.measure.model import Direction, Mode
from tcpwizard.measure.wire import spec
from tcpwizard.measure.wire.fields import opt_float, opt_int, typed_field
from tcpwizard.measure.wire.protocol import ProtocolError

MAX_SOCKET_BUFFER = (1 << 31) - 1  # SO_RCVBUF/SO_SNDBUF take a C int
MIN_STALL_S, MAX_STALL_S = 1.0, 30.0
MIN_INTERVAL_S, MAX_INTERVAL_S = 0.02, 0.25
DEFAULT_INTERVAL_S = 0.1
DEFAULT_STALL_S = 5.0
# Every type of the transfer conversation starts with this: serve hands them all to its
# transfer engine.
TRANSFER_PREFIX = "transfer"


@dataclass(frozen=True)
class TransferStart:
    """client -> serve: run one transfer. Exactly one of duration_s and bytes."""

    mode: Mode
    direction: Direction
    streams: int
    duration_s: float | None
    bytes: int | None
    static_request: int | None = None
    force: bool = False
    sample_interval_s: float = DEFAULT_INTERVAL_S
    stall_timeout_s: float = DEFAULT_STALL_S
    until_steady: bool = False  # end the send once the rate is steady (optional field)

    TYPE = "transfer_start"

    def to_wire(self) -> dict[str, object]:
        return {
            "type": self.TYPE,
            "mode": self.mode,
            "direction": self.direction,
            "streams": self.streams,
            "duration_s": self.duration_s,
            "bytes": self.bytes,
            "static_request": self.static_request,
            "force": self.force,
            "sample_interval_s": self.sample_interval_s,
            "stall_timeout_s": self.stall_timeout_s,
            "until_steady": self.until_steady,
        }

    @classmethod
    def from_wire(cls, msg: Mapping[str, Any]) -> TransferStart:
        """Parse and range-check; ProtocolError (a `bad-request` reply) for anything else.
        The sampling and stall times are clamped to what serve allows."""
        w = cls.TYPE
        mode = typed_field(msg, w, "mode", str)
        if mode not in spec.MODES:
            raise ProtocolError(f"{w}: unknown mode {mode[:40]!r}")
        direction = typed_field(msg, w, "direction", str)
        if direction not in ("up", "down"):
            raise ProtocolError(f"{w}: direction must be 'up' or 'down'")
        streams = typed_field(msg, w, "streams", int)
        if not spec.MIN_STREAMS <= streams <= spec.MAX_STREAMS:
            raise ProtocolError(f"{w}: streams must be {spec.MIN_STREAMS}-{spec.MAX_STREAMS}")
        duration = typed_field(msg, w, "duration_s", float, required=False)
        nbytes = typed_field(msg, w, "bytes", int, required=False)
        if (duration is None) == (nbytes is None):
            raise ProtocolError(f"{w}: give exactly one of duration_s and bytes")
        if duration is not None and duration <= 0:
            raise ProtocolError(f"{w}: duration_s must be positive")
        if nbytes is not None and nbytes <= 0:
            raise ProtocolError(f"{w}: bytes must be positive")
        static = typed_field(msg, w, "static_request", int, required=False)
        if static is not None and not 1 <= static <= MAX_SOCKET_BUFFER:
            # setsockopt takes a C int: a larger request would fail inside the engine.
            raise ProtocolError(
                f"{w}: static_request must be 1-{MAX_SOCKET_BUFFER} bytes, not {static}"
            )
        interval = typed_field(msg, w, "sample_interval_s", float, required=False)
        stall = typed_field(msg, w, "stall_timeout_s", float, required=False)
        return cls(
            mode=cast(Mode, mode),
            direction=cast(Direction, direction),
            streams=streams,
            duration_s=duration,
            bytes=nbytes,
            static_request=static,
            force=bool(msg.get("force", False)),
            sample_interval_s=min(MAX_INTERVAL_S, max(MIN_INTERVAL_S, interval or 0.1)),
            stall_timeout_s=min(MAX_STALL_S, max(MIN_STALL_S, stall or DEFAULT_STALL_S)),
            until_steady=typed_field(msg, w, "until_steady", bool, required=False) or False,
        )


@dataclass(frozen=True)
class TransferReady:
    """serve -> client: the session to attach the data connections to, and the length
    serve will actually run (clamped to its limits)."""

    session: str
    congestion_control: str
    duration_s: float | None
    bytes: int | None
    max_duration_s: float | None = None
    max_bytes: int | None = None
    limits: dict[str, object] | None = None

    TYPE = "transfer_ready"

    def to_wire(self) -> dict[str, object]:
        return {
            "type": self.TYPE,
            "session": self.session,
            "limits": self.limits,
            "congestion_control": self.congestion_control,
            "max_duration_s": self.max_duration_s,
            "max_bytes": self.max_bytes,
            "duration_s": self.duration_s,
            "bytes": self.bytes,
        }

    @classmethod
    def from_wire(cls, msg: Mapping[str, Any]) -> TransferReady:
        if msg.get("type") != cls.TYPE:
            raise ProtocolError(f"serve: expected {cls.TYPE}, got {str(msg.get('type'))[:40]!r}")
        limits = msg.get("limits")
        return cls(
            session=str(msg.get("session", "")),
            congestion_control=str(msg.get("congestion_control", "")),
            duration_s=opt_float(msg.get("duration_s")),
            bytes=opt_int(msg.get("bytes")),
            max_duration_s=opt_float(msg.get("max_duration_s")),
            max_bytes=opt_int(msg.get("max_bytes")),
            limits=limits if isinstance(limits, dict) else None,
        )


@dataclass(frozen=True)
class TransferRunning:
    """serve -> client: every stream attached; serve now sends or receives."""

    role: Literal["sender", "receiver"]

    TYPE = "transfer_running"

    def to_wire(self) -> dict[str, object]:
        return {"type": self.TYPE, "role": self.role}

    @classmethod
    def from_wire(cls, msg: Mapping[str, Any]) -> TransferRunning:
        if msg.get("type") != cls.TYPE or msg.get("role") not in ("sender", "receiver"):
            what = msg.get("message", msg.get("type"))
            raise ProtocolError(f"serve: {what}", str(msg.get("code", "state")))
        return cls(cast(Literal["sender", "receiver"], msg["role"]))


@dataclass(frozen=True)
class TransferResultReply:
    """serve -> client: serve's side of the transfer, once it has ended."""

    report: datapath.SideReport

    TYPE = "transfer_result"

    def to_wire(self) -> dict[str, object]:
        return {"type": self.TYPE, "report": self.report.to_json()}

    @classmethod
    def from_wire(cls, msg: Mapping[str, Any]) -> TransferResultReply:
        """ProtocolError `malformed` for a report the engine cannot read."""
        try:
            return cls(datapath.SideReport.from_json(msg.get("report")))
        except ValueError as exc:
            raise ProtocolError(f"serve sent a bad report: {exc}", "malformed") from None


AttachRole = Literal["data", "drs"]


@dataclass(frozen=True)
class Attach:
    """client -> serve, the first line of an attach connection: the stream of a transfer
    session (the token from transfer_ready) this connection carries. Whether the session
    and the stream exist is serve's state, checked by the transfer engine."""

    session: str
    role: AttachRole
    stream: int = 0

    TYPE = "attach"

    def to_wire(self) -> dict[str, object]:
        return {
            "type": self.TYPE,
            "session": self.session,
            "role": self.role,
            "stream": self.stream,
        }

    @classmethod
    def from_wire(cls, msg: Mapping[str, Any]) -> Attach:
        token = msg.get("session")
        if not isinstance(token, str):
            raise ProtocolError("attach: missing session")
        role = msg.get("role")
        if role not in ("data", "drs"):
            raise ProtocolError("attach: role must be 'data' or 'drs'")
        stream = msg.get("stream", 0)
        if not isinstance(stream, int) or isinstance(stream, bool) or stream < 0:
            raise ProtocolError("attach: stream number out of range")
        return cls(token, cast(AttachRole, role), stream)
