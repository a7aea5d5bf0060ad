"""The session messages of serve's control protocol (docs/protocol.md): the handshake
(hello both ways, auth, auth_ok), the requests any session may make (ping, audit, bye) and
the error reply, as typed, frozen dataclasses with one `to_wire` and one `from_wire` each.
serve and the client build and parse them here; nothing else spells a field name."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from tcpwizard.measure.observe.synopts import SynOptions
from tcpwizard.measure.wire.fields import int_in, message_type, opt_float, opt_int, typed_field
from tcpwizard.measure.wire.protocol import SUPPORTED_VERSIONS, ProtocolError

NO_AUTH = "none"
HMAC_AUTH = "hmac-sha256"
MIN_NONCE_CHARS, MAX_NONCE_CHARS = 16, 128
MAX_PING_ID = 2**53  # JSON numbers stay exact up to here


@dataclass(frozen=True)
class ClientHello:
    """client -> serve, the first line of a control connection: the protocol versions the
    client speaks. `release` (exporter --lock) asks a serve --lock to free its host now."""

    client: str
    versions: tuple[int, ...] = SUPPORTED_VERSIONS
    release: bool = False

    TYPE = "hello"

    def to_wire(self) -> dict[str, object]:
        msg: dict[str, object] = {
            "type": self.TYPE,
            "version": max(self.versions),
            "versions": list(self.versions),
            "client": self.client,
        }
        if self.release:
            msg["release"] = True
        return msg

    @classmethod
    def from_wire(cls, msg: Mapping[str, Any]) -> ClientHello:
        """The hello with only the versions both ends speak; ProtocolError `version` when
        there is none (a client may offer one version in `version` instead of a list)."""
        offered = msg.get("versions")
        if not isinstance(offered, list):
            offered = [msg.get("version")]
        common = tuple(v for v in offered if isinstance(v, int) and v in SUPPORTED_VERSIONS)
        if not common:
            raise ProtocolError(
                f"no common protocol version: server speaks {list(SUPPORTED_VERSIONS)}, "
                f"client offered {msg.get('versions', msg.get('version'))!r}",
                "version",
            )
        client = msg.get("client")
        return cls(client if isinstance(client, str) else "", common, msg.get("release") is True)


@dataclass(frozen=True)
class HelloLimits:
    """What serve allows one test and one connection, told in its hello."""

    max_duration_s: float | None
    max_bytes: int | None
    max_message: int | None
    idle_timeout_s: float | None

    def to_wire(self) -> dict[str, object]:
        return {
            "max_duration_s": self.max_duration_s,
            "max_bytes": self.max_bytes,
            "max_message": self.max_message,
            "idle_timeout_s": self.idle_timeout_s,
        }

    @classmethod
    def from_wire(cls, obj: object) -> HelloLimits | None:
        """Lenient: the client only shows these; a field it cannot read is None."""
        if not isinstance(obj, dict):
            return None
        return cls(
            max_duration_s=opt_float(obj.get("max_duration_s")),
            max_bytes=opt_int(obj.get("max_bytes")),
            max_message=opt_int(obj.get("max_message")),
            idle_timeout_s=opt_float(obj.get("idle_timeout_s")),
        )


@dataclass(frozen=True)
class ServerHello:
    """serve -> client: the version chosen and what this serve offers. Without
    authentication it carries the session's UDP token; with it, the challenge (the token
    then comes in auth_ok)."""

    version: int
    server: str
    auth: str  # NO_AUTH or HMAC_AUTH
    udp_port: int | None  # None: the control connection's port
    kernel_timestamps: bool
    transfer: bool
    limits: HelloLimits | None
    udp_token: bytes | None = None
    challenge: str | None = None  # the server's nonce
    # The options of this control connection's SYN as serve received it (TCP_SAVED_SYN);
    # None from a serve that predates it or a kernel that keeps no SYN.
    syn: SynOptions | None = None

    TYPE = "hello"

    def to_wire(self) -> dict[str, object]:
        msg: dict[str, object] = {
            "type": self.TYPE,
            "version": self.version,
            "server": self.server,
            "auth": self.auth,
        }
        if self.udp_port is not None:
            msg["udp_port"] = self.udp_port
        msg["kernel_timestamps"] = self.kernel_timestamps
        msg["transfer"] = self.transfer
        if self.limits is not None:
            msg["limits"] = self.limits.to_wire()
        if self.udp_token is not None:
            msg["udp_token"] = self.udp_token.hex()
        if self.challenge is not None:
            msg["challenge"] = self.challenge
        if self.syn is not None:
            msg["syn"] = self.syn.to_wire()
        return msg

    @classmethod
    def from_wire(cls, msg: Mapping[str, Any]) -> ServerHello:
        """ProtocolError `state` for another message, `malformed` for a hello the client
        cannot use (no version, no UDP token without authentication)."""
        kind = message_type(msg)
        if kind != cls.TYPE:
            raise ProtocolError(f"expected hello from serve, got {kind!r}", "state")
        auth = str(msg.get("auth", NO_AUTH))
        challenge = msg.get("challenge")
        try:
            return cls(
                version=int(msg["version"]),
                server=str(msg.get("server", "")),
                auth=auth,
                udp_port=int(msg["udp_port"]) if "udp_port" in msg else None,
                kernel_timestamps=msg.get("kernel_timestamps") is True,
                transfer=msg.get("transfer") is True,
                limits=HelloLimits.from_wire(msg.get("limits")),
                udp_token=_token(msg) if auth == NO_AUTH else None,
                challenge=challenge if isinstance(challenge, str) else None,
                syn=SynOptions.from_wire(msg.get("syn")),
            )
        except (KeyError, ValueError, TypeError) as exc:
            raise _malformed_hello(exc) from None


def _token(msg: Mapping[str, Any]) -> bytes:
    return bytes.fromhex(str(msg["udp_token"]))


def _malformed_hello(exc: Exception) -> ProtocolError:
    return ProtocolError(f"serve sent a malformed hello ({exc!r})", "malformed")


@dataclass(frozen=True)
class Auth:
    """client -> serve: the client's nonce and its proof of the shared secret."""

    nonce: str
    proof: str

    TYPE = "auth"

    def to_wire(self) -> dict[str, object]:
        return {"type": self.TYPE, "nonce": self.nonce, "proof": self.proof}

    @classmethod
    def from_wire(cls, msg: Mapping[str, Any]) -> Auth:
        """ProtocolError `auth` for anything but an auth with a usable nonce; a proof that
        is not a string is kept as "" (it then fails verification)."""
        if message_type(msg) != cls.TYPE:
            raise ProtocolError("this server requires authentication: expected auth", "auth")
        nonce = msg.get("nonce")
        if not isinstance(nonce, str) or not MIN_NONCE_CHARS <= len(nonce) <= MAX_NONCE_CHARS:
            raise ProtocolError(
                f"auth needs a nonce of {MIN_NONCE_CHARS}-{MAX_NONCE_CHARS} characters", "auth"
            )
        return cls(nonce, _text(msg.get("proof")))


@dataclass(frozen=True)
class AuthOk:
    """serve -> client: the session's UDP token and serve's proof of the shared secret."""

    udp_token: bytes
    proof: str

    TYPE = "auth_ok"

    def to_wire(self) -> dict[str, object]:
        return {"type": self.TYPE, "udp_token": self.udp_token.hex(), "proof": self.proof}

    @classmethod
    def from_wire(cls, msg: Mapping[str, Any]) -> AuthOk:
        if message_type(msg) != cls.TYPE:
            raise ProtocolError(f"expected auth_ok from serve, got {message_type(msg)!r}", "auth")
        try:
            return cls(_token(msg), _text(msg.get("proof")))
        except (KeyError, ValueError, TypeError) as exc:
            raise _malformed_hello(exc) from None


def _text(v: object) -> str:
    return v if isinstance(v, str) else ""


@dataclass(frozen=True)
class Ping:
    """client -> serve; answered by a pong carrying the same id."""

    id: int = 0

    TYPE = "ping"

    def to_wire(self) -> dict[str, object]:
        return {"type": self.TYPE, "id": self.id}

    @classmethod
    def from_wire(cls, msg: Mapping[str, Any]) -> Ping:
        return cls(int_in(msg, "id", 0, 0, MAX_PING_ID))


@dataclass(frozen=True)
class Pong:
    """serve -> client: the ping's id and serve's clock (ns since the epoch)."""

    id: int
    t_ns: int

    TYPE = "pong"

    def to_wire(self) -> dict[str, object]:
        return {"type": self.TYPE, "id": self.id, "t_ns": self.t_ns}

    @classmethod
    def from_wire(cls, msg: Mapping[str, Any]) -> Pong:
        w = cls.TYPE
        return cls(typed_field(msg, w, "id", int), typed_field(msg, w, "t_ns", int))


TypeOnlyT = TypeVar("TypeOnlyT", bound="_TypeOnly")


class _TypeOnly:
    """A message that is its type alone."""

    TYPE: ClassVar[str]

    def to_wire(self) -> dict[str, object]:
        return {"type": self.TYPE}

    @classmethod
    def from_wire(cls: type[TypeOnlyT], msg: Mapping[str, Any]) -> TypeOnlyT:
        return cls()


@dataclass(frozen=True)
class AuditRequest(_TypeOnly):
    """client -> serve: the raw facts of serve's host (measure/serve/peer_audit.py)."""

    TYPE = "audit"


@dataclass(frozen=True)
class AuditReply:
    """serve -> client: the facts, untrusted until checks/facts.py has read them."""

    audit: dict[str, object]

    TYPE = "audit"

    def to_wire(self) -> dict[str, object]:
        return {"type": self.TYPE, "audit": self.audit}

    @classmethod
    def from_wire(cls, msg: Mapping[str, Any]) -> AuditReply:
        audit = msg.get("audit")
        if not isinstance(audit, dict):
            raise ProtocolError("serve sent an audit reply without an audit", "malformed")
        return cls(audit)


@dataclass(frozen=True)
class Bye(_TypeOnly):
    """Either way: the conversation is over (serve answers bye, then closes)."""

    TYPE = "bye"


@dataclass(frozen=True)
class ErrorReply:
    """serve -> client, the last line before serve closes: a code of docs/protocol.md and
    one line for people. A busy serve --lock says when to come back (retry_after_s)."""

    code: str
    message: str
    retry_after_s: float | None = None

    TYPE = "error"

    def to_wire(self) -> dict[str, object]:
        msg: dict[str, object] = {"type": self.TYPE, "code": self.code, "message": self.message}
        if self.retry_after_s is not None:
            msg["retry_after_s"] = self.retry_after_s
        return msg

    @classmethod
    def from_wire(cls, msg: Mapping[str, Any]) -> ErrorReply:
        return cls(
            code=str(msg.get("code", "error")),
            message=str(msg.get("message", "error")),
            retry_after_s=opt_float(msg.get("retry_after_s")),
        )

    @classmethod
    def of(cls, msg: Mapping[str, Any]) -> ErrorReply | None:
        """The error `msg` is, or None when it is another message."""
        return cls.from_wire(msg) if message_type(msg) == cls.TYPE else None
