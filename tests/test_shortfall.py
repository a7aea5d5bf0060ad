"""When `check` measures the available bandwidth unasked (advice/shortfall.py)."""

from __future__ import annotations

import dataclasses

from tcpwizard.advice.shortfall import fell_short
from tcpwizard.measure.model import Direction, TransferResult
from tcpwizard.measure.probes.availbw import AvailBandwidth
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
    # the upload's streams say nothing of a download, and the other way round
    assert fell_short(path(40.0, 100.0), _up(30.0, direction="down")) == ""
    assert fell_short(path(40.0, 100.0), _up(30.0), "down") == ""
    assert fell_short(None, _up(30.0)) == ""
    assert fell_short(path(40.0, 100.0), None) == ""


def test_a_download_far_below_its_probe_asks_for_the_streams_sent_back() -> None:
    down = _up(30.0, direction="down")
    why = fell_short(path(40.0, 100.0), down, "down")
    assert why.startswith("the download held 30.0 Mbit/s of the 100.0 Mbit/s"), why
    # measured that way already: nothing more to ask
    measured = dataclasses.replace(path(40.0, 100.0), available_down=_free(100.0))
    assert fell_short(measured, down, "down") == ""
    # the upload's measurement is not the download's
    up_only = dataclasses.replace(path(40.0, 100.0), available=_free(100.0))
    assert fell_short(up_only, down, "down") == why
    # the download is judged against its own way's capacity, probed even when the upload's
    # was not
    p = path(40.0, 100.0)
    only_down = dataclasses.replace(p, capacity=None, capacity_down=p.capacity)
    assert fell_short(only_down, down, "down") == why
    assert fell_short(only_down, _up(30.0), "up") == ""


def _free(cap_mbps: float) -> AvailBandwidth:
    return AvailBandwidth(cap_mbps * 1e6, cap_mbps * 1e6, cap_mbps * 1e6, cap_mbps * 1e6,
                          1.0, 6, 0, 1800)  # fmt: skip
