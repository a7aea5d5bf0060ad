"""The lab's iperf3 helper: a UDP run whose connect datagram was lost is bounded and tried
once more; a TCP run that overruns is an error (lab/tools.py)."""

from __future__ import annotations

import subprocess
from typing import Any

import pytest

from tcpwizard.lab import tools


def _stall_first(calls: list[float]) -> Any:
    def once(lab: object, client: str, args: list[str], seconds: float, nbytes: object,
             grace_s: float = tools.TCP_GRACE_S) -> dict[str, Any]:  # fmt: skip
        calls.append(grace_s)
        if len(calls) == 1:
            raise subprocess.TimeoutExpired(["iperf3"], seconds + grace_s)
        return {"end": {"sum": {"packets": 5000, "lost_packets": 250}}}

    return once


def test_a_stalled_udp_connect_is_tried_once_more(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[float] = []
    monkeypatch.setattr(tools, "_iperf3_once", _stall_first(calls))
    result = tools.iperf3_udp(object(), "a", rate_bps=20e6, seconds=2)  # type: ignore[arg-type]
    assert (result.sent, result.lost) == (5000, 250)
    assert calls == [tools.UDP_CONNECT_GRACE_S, tools.UDP_CONNECT_GRACE_S]


def test_a_tcp_run_that_overruns_is_not_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[float] = []
    monkeypatch.setattr(tools, "_iperf3_once", _stall_first(calls))
    with pytest.raises(subprocess.TimeoutExpired):
        tools.iperf3_tcp(object(), "a", seconds=2)  # type: ignore[arg-type]
    assert calls == [tools.TCP_GRACE_S]
