"""The top of a jittery path's delay range as the RTT with no queue (advice/path_jitter.py),
on lab reports measured through the delay line with +-8 ms of jitter each way, and the same
reports with one tell against the jitter changed."""

from __future__ import annotations

import dataclasses
import gzip
import json
from pathlib import Path

from benchmarks.report_evidence import evidence
from tcpwizard.advice.diagnose import Evidence, diagnose
from tcpwizard.advice.evidence import directions
from tcpwizard.advice.idle_follow_up import wanted
from tcpwizard.advice.path_jitter import jitter_range_ms, queue_free_rtt_ms
from tcpwizard.advice.shortfall import fell_short
from tcpwizard.measure.model import PathEstimate, TcpInfoSample
from tests.model_builders import path

CASES = Path(__file__).parent / "data" / "matrix-cases"
POLICED = "lab-jitter-policer-30m-of-100m-40ms"  # 100 Mbit/s x 40 ms, +-8 ms, policed at 30


def _evidence(name: str) -> Evidence:
    return evidence(json.loads(gzip.decompress((CASES / f"{name}.json.gz").read_bytes())))


def _with_path(ev: Evidence, path: PathEstimate) -> Evidence:
    return dataclasses.replace(ev, path=path)


def test_the_idle_range_is_the_paths_when_nothing_else_shares_it() -> None:
    ev = _evidence(POLICED)
    assert ev.path is not None
    rtt = ev.path.rtt
    assert jitter_range_ms(ev) == rtt.p95 - rtt.min > 20.0
    assert all(queue_free_rtt_ms(ev, d) == rtt.p95 for d in directions(ev))


def test_a_shared_or_unmeasured_path_keeps_the_minimum() -> None:
    ev = _evidence(POLICED)
    assert ev.path is not None and ev.path.available is not None
    shared = dataclasses.replace(
        ev.path.available, estimate_bps=0.5 * ev.path.available.capacity_bps
    )
    assert jitter_range_ms(_with_path(ev, dataclasses.replace(ev.path, available=shared))) == 0.0
    assert jitter_range_ms(_with_path(ev, dataclasses.replace(ev.path, available=None))) == 0.0


def test_a_transfer_below_the_echoes_shows_they_carried_a_queue() -> None:
    ev = _evidence(POLICED)
    assert ev.path is not None and ev.transfer is not None
    low_us = round((ev.path.rtt.min - 1.0) * 1e3)
    m = ev.transfer.modes[0]
    first = next(s for s in m.samples if s.tcp_info is not None)
    assert isinstance(first.tcp_info, TcpInfoSample)
    dipped = dataclasses.replace(first, tcp_info=dataclasses.replace(first.tcp_info, rtt_us=low_us))
    samples = tuple(dipped if s is first else s for s in m.samples)
    modes = (dataclasses.replace(m, samples=samples), *ev.transfer.modes[1:])
    ev = dataclasses.replace(ev, transfer=dataclasses.replace(ev.transfer, modes=modes))
    assert jitter_range_ms(ev) == 0.0


def test_a_spread_within_the_timer_noise_is_no_jitter() -> None:
    ev = _evidence(POLICED)
    assert ev.path is not None
    tight = dataclasses.replace(ev.path.rtt, p95=ev.path.rtt.min + 0.3)
    assert jitter_range_ms(_with_path(ev, dataclasses.replace(ev.path, rtt=tight))) == 0.0


def test_the_three_readings_on_a_jittery_path() -> None:
    """Before: the policer read `path-capacity` (its plateau judged against the transfer's
    own rate), the healthy path `bufferbloat` (1.6 BDP "queue" against the idle minimum),
    Reno's random loss on both hosts `cross-traffic` (others' queue)."""
    got = {
        name: (v.limiting_factor, v.host_to_fix)
        for name in (
            POLICED,
            "lab-jitter-healthy-100m-40ms",
            "lab-jitter-reno-loss-100m-60ms",
        )
        for v in [diagnose(_evidence(name)).verdict]
    }
    assert got == {
        POLICED: ("policer", "path"),
        "lab-jitter-healthy-100m-40ms": ("path-capacity", None),
        "lab-jitter-reno-loss-100m-60ms": ("congestion", "both"),
    }


def test_a_wide_idle_spread_asks_for_the_available_bandwidth() -> None:
    ev = _evidence(POLICED)
    assert ev.path is not None
    unmeasured = dataclasses.replace(ev.path, available=None)
    why = fell_short(unmeasured, ev.transfer)
    assert "idle RTT spread" in why and "jitter" in why
    # A quiet path's echoes (0.1 ms apart) ask only what its upload's shortfall asks.
    quiet = fell_short(dataclasses.replace(path(40.0, 100.0), peer=True), ev.transfer)
    assert quiet.startswith("the upload held")
    # The spread asks once: the upload's streams when an upload ran, else the download's.
    assert ev.transfer is not None
    assert {m.direction for m in ev.transfer.modes} == {"up", "down"}
    assert "idle RTT spread" not in fell_short(unmeasured, ev.transfer, "down")
    back = tuple(m for m in ev.transfer.modes if m.direction == "down")
    only_down = dataclasses.replace(ev.transfer, modes=back)
    assert "idle RTT spread" in fell_short(unmeasured, only_down, "down")


def test_the_follow_up_probes_are_asked_where_jitter_hid_the_policer() -> None:
    """BBR policed at 20 of 100 Mbit/s under +-8 ms, one upload that lost 14.7 % (below
    BBR's own policed share): only idle probes can rule random loss out, and with the queue
    read from the idle minimum the policer test failed before they were asked for."""
    ev = _evidence("lab-jitter-policer-20m-of-100m-40ms-upload")
    count, why = wanted(ev.path, ev.transfer)
    assert count > 0 and "at random, or only above a rate?" in why
    assert ev.path is not None
    plain = dataclasses.replace(ev.path, available=None)
    assert wanted(plain, ev.transfer) == (0, "")
