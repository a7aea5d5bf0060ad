"""iperf3's control protocol, our side, against bytes captured from a real iperf3 3.12
session (tests/data/capture_iperf3.py recorded them through a relay), and a fuzz test:
whatever a server sends, the client ends with Iperf3Error in bounded time."""

from __future__ import annotations

import json
import socket
import struct
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tcpwizard.measure.farends import iperf3_control
from tcpwizard.measure.farends.iperf3_control import (
    Iperf3Error,
    Iperf3Params,
    Iperf3Session,
    ServerResults,
    client_results,
    frame_json,
    make_cookie,
    stream_ids,
)

DATA = Path(__file__).parent / "data"


def _capture(name: str) -> tuple[bytes, bytes]:
    base = f"iperf3-3.12-{name}"
    return (DATA / f"{base}.c2s").read_bytes(), (DATA / f"{base}.s2c").read_bytes()


def _frames(data: bytes, start: int) -> tuple[dict[str, object], int]:
    (n,) = struct.unpack("!I", data[start : start + 4])
    return json.loads(data[start + 4 : start + 4 + n]), start + 4 + n


def test_real_client_bytes_have_the_shape_we_send() -> None:
    c2s, _ = _capture("reverse")
    cookie = c2s[: iperf3_control.COOKIE_SIZE]
    assert cookie.endswith(b"\0") and len(cookie) == 37
    assert set(cookie[:-1].decode()) <= set("abcdefghijklmnopqrstuvwxyz234567")
    params, pos = _frames(c2s, iperf3_control.COOKIE_SIZE)
    assert params["tcp"] is True and params["reverse"] is True and params["parallel"] == 1
    ours = Iperf3Params(duration_s=1.0, reverse=True).to_wire()
    # Every key the real client sends for such a test, we send too, with the same type.
    for key in ("tcp", "omit", "time", "num", "blockcount", "parallel", "reverse", "len"):
        assert type(ours[key]) is type(params[key]), key
    assert c2s[pos] == iperf3_control.TEST_END
    results, pos = _frames(c2s, pos + 1)
    ours_res = client_results([iperf3_control.ClientStreamResult(1, 10, 0, 1.0)], sender=False)
    assert set(results) - {"congestion_used"} <= set(ours_res)
    assert set(results["streams"][0]) <= set(ours_res["streams"][0])  # type: ignore[index]
    assert c2s[pos:] == bytes([iperf3_control.IPERF_DONE])


def test_our_cookie_and_framing() -> None:
    cookie = make_cookie()
    assert len(cookie) == 37 and cookie[-1] == 0
    assert frame_json({"a": 1}) == b'\x00\x00\x00\x07{"a":1}'
    assert stream_ids(1) == [1] and stream_ids(4) == [1, 3, 4, 5]  # iperf3's numbering


class _Replay:
    """The server side of a session: writes the captured bytes to our client."""

    def __init__(self, s2c: bytes) -> None:
        self.ours, self.theirs = socket.socketpair()
        self.theirs.sendall(s2c)
        self.theirs.shutdown(socket.SHUT_WR)

    def session(self, params: Iperf3Params) -> Iperf3Session:
        s = Iperf3Session("127.0.0.1", 1, params, timeout=2.0)
        s.ctrl = self.ours
        return s


@pytest.mark.parametrize(
    ("name", "streams", "reverse"), [("reverse", 1, True), ("upload-2streams", 2, False)]
)
def test_client_follows_a_real_servers_states(name: str, streams: int, reverse: bool) -> None:
    _, s2c = _capture(name)
    replay = _Replay(s2c)
    session = replay.session(Iperf3Params(streams=streams, reverse=reverse))
    for state in (
        iperf3_control.PARAM_EXCHANGE,
        iperf3_control.CREATE_STREAMS,
        iperf3_control.TEST_START,
    ):
        session.expect(state)
    session.expect(iperf3_control.TEST_RUNNING)
    got = session.results(
        [iperf3_control.ClientStreamResult(i, 1, 0, 1.0) for i in stream_ids(2)], True
    )
    assert got.streams == streams and got.bytes > 1_000_000 and got.seconds > 0.9
    assert got.congestion in ("bbr", "cubic", "reno")
    assert got.intervals and got.intervals[0].start_s == 0.0
    if reverse:  # the sending server reports its retransmits and cwnd per interval
        assert got.retransmits == 0 and got.intervals[0].snd_cwnd
    else:
        assert got.retransmits is None
        # Two streams: the [SUM] line's bytes, and the short last interval after the rule.
        assert got.intervals[0].bytes == pytest.approx(4.75 * 2**20, rel=0.01)
        assert got.intervals[-1].end_s > 1.0


def test_server_results_json_output() -> None:
    obj = {
        "cpu_util_total": 1,
        "cpu_util_user": 1,
        "cpu_util_system": 0,
        "sender_has_retransmits": 1,
        "streams": [{"id": 1, "bytes": 1000, "retransmits": 3, "start_time": 0, "end_time": 2}],
        "server_output_json": {
            "intervals": [
                {
                    "streams": [
                        {
                            "start": 0,
                            "end": 1,
                            "bytes": 500,
                            "retransmits": 1,
                            "snd_cwnd": 28960,
                            "rtt": 50123,
                        },
                    ]
                }
            ]
        },
    }
    r = ServerResults.from_wire(obj)
    assert (r.bytes, r.seconds, r.retransmits) == (1000, 2.0, 3)
    assert r.intervals[0].rtt_us == 50123 and r.intervals[0].snd_cwnd == 28960


@pytest.mark.parametrize(
    ("reply", "kind"),
    [
        (b"\xff", "busy"),  # ACCESS_DENIED
        (b"\xfe" + struct.pack("!ii", 142, 0), "auth"),  # SERVER_ERROR, IEAUTHTEST
        (b"SSH-2.0-OpenSSH_9.2\r\n", "not-iperf3"),
        (b"", "closed"),
        (b"\x09\x09", "not-iperf3"),  # PARAM_EXCHANGE twice: out of order
    ],
)
def test_refusals_are_named(reply: bytes, kind: str) -> None:
    replay = _Replay(reply)
    session = replay.session(Iperf3Params())
    with pytest.raises(Iperf3Error) as err:
        session.expect(iperf3_control.PARAM_EXCHANGE, first=True)
        session.expect(iperf3_control.CREATE_STREAMS)
    assert err.value.kind == kind


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=64), st.integers(min_value=0, max_value=3))
def test_fuzzed_server_replies_never_hang_or_crash(reply: bytes, step: int) -> None:
    """Random bytes at any point of the conversation: Iperf3Error or a parsed result."""
    replay = _Replay(reply)
    session = replay.session(Iperf3Params())
    done = threading.Event()

    def talk() -> None:
        try:
            if step == 0:
                session.expect(iperf3_control.PARAM_EXCHANGE, first=True)
            elif step == 1:
                session.read_json()
            elif step == 2:
                ServerResults.from_wire(session.read_json())
            else:
                session.results([], sender=True)
        except Iperf3Error:
            pass
        done.set()

    t = threading.Thread(target=talk, daemon=True)
    t.start()
    t.join(timeout=5)
    assert done.is_set(), "the client hung on a malformed reply"
