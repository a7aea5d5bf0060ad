"""serve's transfer messages: one typed message per wire type, round trips, and the range
checks serve answers with `bad-request` (never an exception inside serve)."""

from __future__ import annotations

from typing import Any

import pytest

from tcpwizard.measure.protocol import ProtocolError, decode, encode
from tcpwizard.measure.wire import (
    MAX_SOCKET_BUFFER,
    TransferReady,
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
        ({"streams": 9}, "streams must be 1-8"),
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
    from tcpwizard.measure.transfer import static_request

    request = static_request(0.200, 100e9)  # 2.5 GB of BDP
    assert TransferStart.from_wire({**start(static_request=request).to_wire()}).static_request
    assert 2 * request <= 1 << 30  # the kernel doubles it: at most the advice's 1 GiB
