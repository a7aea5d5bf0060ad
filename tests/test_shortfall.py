"""When `check` measures the available bandwidth unasked (advice/shortfall.py)."""

from __future__ import annotations

import dataclasses

from tcpwizard.advice.shortfall import fell_short
from tcpwizard.measure.model import Direction, TransferResult
from tests.model_builders import path
from tests.test_policer_bloat_rules import transfer


def _up(goodput: float, sndbuf: float = 0.0, direction: Direction = "up") -> TransferResult:
    t = transfer([goodput] * 20, [40.0] * 20, [0] * 20)
    m = dataclasses.replace(t.modes[0], sndbuf_limited=sndbuf, direction=direction)
    return TransferResult((m,))


def test_an_upload_far_below_the_probe_with_no_window_holding_it_asks() -> None:
    why = fell_short(path(40.0, 100.0), _up(30.0))
    assert "30.0 Mbit/s" in why and "100.0 Mbit/s" in why


def test_no_measurement_when_it_cannot_change_the_verdict() -> None:
    assert fell_short(path(40.0, 100.0), _up(90.0)) == ""  # the path is full
    assert fell_short(path(40.0, 100.0), _up(30.0, sndbuf=0.6)) == ""  # a window held it
    assert fell_short(path(40.0, 100.0), _up(30.0, direction="down")) == ""  # streams go up
    assert fell_short(None, _up(30.0)) == ""
    assert fell_short(path(40.0, 100.0), None) == ""
