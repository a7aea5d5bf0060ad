"""serve's control messages: one typed message per wire type, round trips, the range checks
serve answers with an error reply (never an exception inside serve), and what the client
refuses from serve."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tcpwizard.measure.engine.datapath import SideReport
from tcpwizard.measure.wire.probe_msgs import (
    ProbeReport,
    ProbeReportRequest,
    ProbeTrain,
    ProbeTrainDone,
)
from tcpwizard.measure.wire.protocol import ProtocolError, decode, encode
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
from tcpwizard.measure.wire.transfer_msgs import (
    MAX_SOCKET_BUFFER,
    Attach,
    TransferReady,
    TransferResultReply,
    TransferRunning,
    TransferStart,
)


def start(**changes: Any) -> TransferStart:
    base = TransferStart("drs", "down", 4, 3.0, None, 625_000, until_steady=True)
    return TransferStart(**{**base.__dict__, **changes})


def test_start_round_trips_through_the_line_codec() -> None:
    msg = start()
    assert TransferStart.from_wire(decode(encode(msg.to_wire()))) == msg


@pytest.mark.parametrize(
    ("changes", "why"),
    [
        ({"mode": "turbo"}, "unknown mode"),
        ({"direction": "sideways"}, "direction"),
        ({"streams": 17}, "streams must be 1-16"),
        ({"streams": True}, "must be a number"),
        ({"duration_s": None}, "exactly one"),
        ({"bytes": 10}, "exactly one"),
        ({"duration_s": -1.0}, "positive"),
        ({"static_request": MAX_SOCKET_BUFFER + 1}, "static_request"),
    ],
)
def test_start_range_checks(changes: dict[str, Any], why: str) -> None:
    wire = {**start().to_wire(), **changes}
    with pytest.raises(ProtocolError, match=why):
        TransferStart.from_wire(wire)


def test_start_clamps_sampling_and_stall_times() -> None:
    got = TransferStart.from_wire(
        {**start().to_wire(), "sample_interval_s": 5.0, "stall_timeout_s": 0.001}
    )
    assert (got.sample_interval_s, got.stall_timeout_s) == (0.25, 1.0)


def test_ready_and_running() -> None:
    ready = TransferReady("ab" * 16, "bbr", 3.0, None, 60.0, 1 << 30, {"rmem_max": 1})
    assert TransferReady.from_wire(decode(encode(ready.to_wire()))) == ready
    assert TransferRunning.from_wire(TransferRunning("sender").to_wire()).role == "sender"
    with pytest.raises(ProtocolError, match="serve: busy"):
        TransferRunning.from_wire({"type": "error", "message": "busy", "code": "busy"})


def test_static_request_at_100_gbit_fits_what_serve_accepts() -> None:
    from tcpwizard.measure.engine.transfer import static_request

    request = static_request(0.200, 100e9)  # 2.5 GB of BDP
    assert TransferStart.from_wire({**start(static_request=request).to_wire()}).static_request
    assert 2 * request <= 1 << 30  # the kernel doubles it: at most the advice's 1 GiB


# -- every message: one round trip through the line codec --------------------------------
LIMITS = HelloLimits(30.0, 2_000_000_000, 65536, 30.0)
ROUND_TRIPS: list[Any] = [
    ClientHello("tcpwizard/0.1.0"),
    ClientHello("tcpwizard-mesh", release=True),
    ServerHello(1, "tcpwizard/0.1.0", NO_AUTH, 5301, True, True, LIMITS, udp_token=b"\x01" * 8),
    ServerHello(1, "tcpwizard/0.1.0", HMAC_AUTH, 5301, False, False, LIMITS, challenge="ab" * 32),
    Auth("cd" * 32, "ef" * 32),
    AuthOk(b"\x02" * 8, "01" * 32),
    Ping(7),
    Pong(7, 1_700_000_000_000_000_000),
    AuditRequest(),
    AuditReply({"source": "tcpwizard.checks", "facts": {}}),
    Bye(),
    ErrorReply("bad-request", "streams must be 1-16"),
    ErrorReply("busy", "server busy", retry_after_s=1.5),
    ProbeReportRequest((16, 17), 2048, 500, 100),
    ProbeReport({16: ((0, 1_000), (1, 1_250), (1, 1_260)), 17: ()}, kernel_timestamps=True),
    ProbeTrain(32, 1024, 1472, 100_000, 4),
    ProbeTrainDone(32, 1024, 12_000_000),
    Attach("ab" * 16, "drs", 3),
    TransferRunning("receiver"),
    TransferResultReply(SideReport("sender", 2, bytes=1_000_000, seconds=1.5)),
]


@pytest.mark.parametrize("msg", ROUND_TRIPS, ids=lambda m: type(m).__name__)
def test_every_message_round_trips(msg: Any) -> None:
    line = encode(msg.to_wire())
    assert json.loads(line)["type"] == msg.TYPE
    assert type(msg).from_wire(decode(line)) == msg


def test_probe_report_sends_times_relative_to_the_first_arrival() -> None:
    wire = ProbeReport({5: ((0, 1_000), (1, 1_250))}, kernel_timestamps=False).to_wire()
    assert (wire["base_ns"], wire["trains"]) == (1_000, {"5": [[0, 0], [1, 250]]})


def test_server_hello_carries_the_token_only_without_authentication() -> None:
    plain = ServerHello(1, "s", NO_AUTH, None, True, True, None, udp_token=b"\x01")
    assert plain.to_wire() == {
        "type": "hello",
        "version": 1,
        "server": "s",
        "auth": "none",
        "kernel_timestamps": True,
        "transfer": True,
        "udp_token": "01",
    }
    with_auth = ServerHello.from_wire({**plain.to_wire(), "auth": HMAC_AUTH})
    assert with_auth.udp_token is None and "udp_token" not in with_auth.to_wire()


# -- what serve answers with an error reply ----------------------------------------------
@pytest.mark.parametrize(
    ("cls", "wire", "code", "why"),
    [
        (ClientHello, {"versions": [99, 100]}, "version", r"client offered \[99, 100\]"),
        (ClientHello, {"version": "1"}, "version", "server speaks"),
        (Auth, {"type": "ping"}, "auth", "expected auth"),
        (Auth, {"type": "auth", "nonce": "short"}, "auth", "16-128 characters"),
        (Auth, {"type": "auth", "nonce": 5}, "auth", "nonce"),
        (Ping, {"id": -1}, "bad-request", r"id must be an integer in 0\.\.9007199254740992"),
        (Ping, {"id": True}, "bad-request", "id must be an integer"),
        (ProbeReportRequest, {"trains": "all"}, "bad-request", "list of 1-16 ids"),
        (ProbeReportRequest, {"trains": []}, "bad-request", "list of 1-16 ids"),
        (ProbeReportRequest, {"trains": [1] * 17}, "bad-request", "list of 1-16 ids"),
        (ProbeReportRequest, {"trains": [1, True]}, "bad-request", "must be integers"),
        (ProbeReportRequest, {"trains": [1], "wait_ms": 5001}, "bad-request", "wait_ms"),
        (ProbeReportRequest, {"trains": [1], "quiet_ms": 0}, "bad-request", "quiet_ms"),
        (ProbeReportRequest, {"trains": [1], "expect": 16385}, "bad-request", "expect"),
        (ProbeTrain, {"count": 0}, "bad-request", r"count must be an integer in 1\.\.1024"),
        (ProbeTrain, {"count": "1"}, "bad-request", "count"),
        (ProbeTrain, {"size": 10}, "bad-request", "size"),
        (ProbeTrain, {"rate_kbps": 1.5}, "bad-request", "rate_kbps"),
        (ProbeTrain, {"burst": 65}, "bad-request", "burst"),
        (ProbeTrain, {"train": 2**32}, "bad-request", "train"),
        (Attach, {"role": "data"}, "bad-request", "missing session"),
        (Attach, {"session": "t", "role": "audio"}, "bad-request", "role must be"),
        (Attach, {"session": "t", "role": "data", "stream": -1}, "bad-request", "out of range"),
        (Attach, {"session": "t", "role": "data", "stream": False}, "bad-request", "out of range"),
    ],
)
def test_serve_rejects(cls: Any, wire: dict[str, Any], code: str, why: str) -> None:
    with pytest.raises(ProtocolError, match=why) as info:
        cls.from_wire({"type": cls.TYPE, **wire})
    assert info.value.code == code


# -- what the client rejects from serve --------------------------------------------------
@pytest.mark.parametrize(
    ("cls", "wire", "code", "why"),
    [
        (ServerHello, {"type": "pong"}, "state", "expected hello from serve, got 'pong'"),
        (ServerHello, {"type": "hello", "udp_token": "00"}, "malformed", "KeyError"),
        (ServerHello, {"type": "hello", "version": 1}, "malformed", "udp_token"),
        (ServerHello, {"type": "hello", "version": 1, "udp_token": "xyz"}, "malformed", "hello"),
        (AuthOk, {"type": "auth_ok", "proof": "p"}, "malformed", "udp_token"),
        (AuditReply, {"type": "audit", "audit": []}, "malformed", "without an audit"),
        (Pong, {"type": "pong", "id": 1, "t_ns": "now"}, "bad-request", "t_ns"),
        (TransferResultReply, {"type": "transfer_result", "report": {}}, "malformed", "bad report"),
        (ProbeReport, {"base_ns": 0, "trains": {"x": []}}, "malformed", "train id 'x'"),
    ],
)
def test_client_rejects(cls: Any, wire: dict[str, Any], code: str, why: str) -> None:
    with pytest.raises(ProtocolError, match=why) as info:
        cls.from_wire(wire)
    assert info.value.code == code


def test_client_takes_arrivals_leniently() -> None:
    got = ProbeReport.from_wire(
        {"base_ns": 100, "trains": {"3": [[0, 5], "junk", [1], [2, "x"], [4, 9]], "4": None}}
    )
    assert got.trains == {3: ((0, 105), (4, 109)), 4: ()}
    assert ProbeReport.from_wire({"base_ns": "0", "trains": {"3": [[0, 5]]}}).trains == {}


def test_error_reply_is_told_from_other_messages() -> None:
    busy = ErrorReply.of({"type": "error", "code": "busy", "retry_after_s": "soon"})
    assert busy == ErrorReply("busy", "error", None)
    assert ErrorReply.of(Pong(1, 2).to_wire()) is None
