"""Available bandwidth (measure/probes/availbw.py) and the `cross-traffic` verdict, without a
network: the slope of synthetic streams through a fluid FIFO bottleneck, the estimate from a fleet,
and diagnose naming a shared path (and not a quiet one)."""

from __future__ import annotations

import dataclasses

import pytest

from tcpwizard.advice.diagnose import Evidence, diagnose
from tcpwizard.measure.model import TransferSample
from tcpwizard.measure.probes.availbw import (
    LADDER,
    LADDER_HIGH,
    AvailBandwidth,
    StreamResult,
    estimate,
    stream_result,
    theil_sen,
)
from tests.model_builders import audit, fixes, mode, path, transfer_of
from tests.test_diagnose_rules import rule_confidence

WIRE = 1500


def fluid_stream(
    rate: float, cap: float, cross: float, count: int = 400
) -> tuple[dict[int, int], dict[int, int]]:
    """Send times at `rate`; arrivals through a FIFO link of `cap` shared with `cross`:
    above the available bandwidth the stream leaves at rate * cap / (rate + cross)."""
    gap = WIRE * 8 / rate
    out_rate = rate if rate + cross <= cap else rate * cap / (rate + cross)
    out_gap = WIRE * 8 / out_rate
    tx = {i: round(i * gap * 1e9) for i in range(count)}
    rx = {
        i: round((0.010 + i * out_gap) * 1e9) + (50_000 if i % 37 == 0 else 0) for i in range(count)
    }
    return tx, rx


def test_theil_sen_ignores_an_outlier() -> None:
    points = [(float(x), 2.0 * x) for x in range(10)]
    points[4] = (4.0, 100.0)
    assert theil_sen(points) == pytest.approx(2.0)


@pytest.mark.parametrize("cross", [0.0, 60e6, 120e6])
def test_each_loaded_stream_estimates_the_available_bandwidth(cross: float) -> None:
    cap = 200e6
    results = []
    for share in (0.5, 0.6, 0.7, 0.85, 1.0):
        tx, rx = fluid_stream(share * cap, cap, cross)
        r = stream_result(tx, rx, len(tx), WIRE)
        assert r is not None and r.loss == 0.0
        results.append(r)
    est, low, high, loaded = estimate(results, cap)
    assert low <= est <= high
    assert est == pytest.approx(cap - cross, rel=0.03)
    if cross == 0:
        assert loaded == 0


@pytest.mark.parametrize(("cross", "expect"), [(0.0, 200e6), (60e6, 140e6), (120e6, 80e6)])
def test_the_whole_ladder_finds_light_cross_traffic(cross: float, expect: float) -> None:
    # Streams at every rate the ladder sends (the faster ones too, as when few loaded the
    # path): 30 % taken shows at 90 % of the capacity.
    cap = 200e6
    streams = []
    for share in (*LADDER, *LADDER_HIGH):
        tx, rx = fluid_stream(share * cap, cap, cross)
        r = stream_result(tx, rx, len(tx), WIRE)
        assert r is not None
        streams.append(r)
    est, _low, _high, loaded = estimate(streams, cap)
    assert est == pytest.approx(expect, abs=15e6)
    assert (loaded == 0) == (cross == 0)


def test_lossy_streams_give_no_estimate() -> None:
    cap = 200e6
    lossy = [StreamResult(150e6, 0.3, 0.2)] * 4
    est, _low, _high, loaded = estimate(lossy, cap)
    assert loaded == 0 and est == cap  # nothing trustworthy: no claim of cross traffic


def _shared(free_mbps: float, cap_mbps: float = 200.0) -> AvailBandwidth:
    return AvailBandwidth(free_mbps * 1e6, (free_mbps - 5) * 1e6, (free_mbps + 5) * 1e6,
                          cap_mbps * 1e6, 1.2, 6, 5, 3000)  # fmt: skip


def test_shared_path_is_cross_traffic_without_fixes() -> None:
    p = dataclasses.replace(path(20, 200), available=_shared(80))
    ev = Evidence(audit(), audit(), p, transfer_of(mode(76.0)), fixes("net.ipv4.tcp_rmem"))
    d = diagnose(ev)
    assert d.verdict.limiting_factor == "cross-traffic"
    assert d.fixes == ()  # advice, never a sysctl
    assert "quieter" in d.verdict.explanation
    assert any("available bandwidth 80" in e for e in d.verdict.evidence)


def test_quiet_path_keeps_its_verdict() -> None:
    quiet = dataclasses.replace(_shared(195), loaded=0)
    for av in (None, quiet):
        p = dataclasses.replace(path(20, 200), available=av)
        d = diagnose(Evidence(audit(), audit(), p, transfer_of(mode(190.0))))
        assert d.verdict.limiting_factor == "path-capacity"


def test_transfer_faster_than_what_was_free_still_shares_the_path() -> None:
    """Others took 160 of 200 Mbit/s before; the transfer got 120: TCP flows gave way in
    part (they split a bottleneck) and kept the rest. Shared, named less surely; a limit
    of the transfer's own (its receive window) is named instead."""
    p = dataclasses.replace(path(20, 200), available=_shared(40))
    d = diagnose(Evidence(audit(), audit(), p, transfer_of(mode(120.0))))
    assert d.verdict.limiting_factor == "cross-traffic"
    assert rule_confidence(d.verdict) < 0.6  # the rule's; the matrix weighs what it is worth
    assert any("gave way" in e for e in d.verdict.evidence)
    small = audit(**{"net.ipv4.tcp_rmem": "4096 65536 262144"})
    held = Evidence(audit(), small, p, transfer_of(mode(120.0, rwnd=0.9)))
    assert diagnose(held).verdict.limiting_factor == "receiver-window"


def test_losses_of_a_full_share_are_the_sharing_not_congestion() -> None:
    """A Reno upload that fills the 35 of 120 Mbit/s a constant-rate flow leaves it loses
    what its rate implies (the loss bound holds): that is the full share, not a lossy
    link. Held well below what was free, the same losses are the congestion."""
    p = dataclasses.replace(path(20, 120), available=_shared(35, 120))
    full = mode(33.0, retrans=6, nbytes=16_000_000, cc="reno")
    d = diagnose(Evidence(audit(), audit(), p, transfer_of(full)))
    assert d.verdict.limiting_factor == "cross-traffic"
    lossy = mode(8.0, retrans=25, nbytes=4_000_000, cc="reno")
    assert diagnose(Evidence(audit(), audit(), p, transfer_of(lossy))).verdict.limiting_factor == (
        "congestion"
    )


def test_short_transfer_overdriving_the_queue_is_still_cross_traffic() -> None:
    # Its last samples ran at 110 Mbit/s against 75 free (unresponsive traffic loses its
    # share of the drops too), its average at 81: the path is shared.
    rates = [20.0, 50.0, 70.0, 80.0, 85.0, 90.0, 105.0, 110.0]
    samples = tuple(TransferSample(0.125 * (i + 1), r, 1 << 20, 0) for i, r in enumerate(rates))
    short = dataclasses.replace(mode(81.0), seconds=1.0, samples=samples)
    p = dataclasses.replace(path(50, 190), available=_shared(75, 190))
    d = diagnose(Evidence(audit(), audit(), p, transfer_of(short)))
    assert d.verdict.limiting_factor == "cross-traffic"


def test_window_limit_says_streams_only_hide_it() -> None:
    small = audit(**{"net.ipv4.tcp_rmem": "4096 65536 262144"})
    ev = Evidence(audit(), small, path(50, 100), transfer_of(mode(20.0, rwnd=0.9)))
    d = diagnose(ev)
    assert d.verdict.limiting_factor == "receiver-window"
    assert any("streams would only hide" in e for e in d.verdict.evidence)
    assert not [f for f in d.fixes if f.key == "streams"]


def test_streams_needed_bounds() -> None:
    from tcpwizard.advice.streams import MAX_STREAMS, streams_needed

    assert streams_needed(90, 1.9) == 48 or streams_needed(90, 1.9) == MAX_STREAMS
    assert streams_needed(100, 30) == 4
    assert streams_needed(100, 120) is None


def test_streams_that_overflow_the_queue_estimate_from_their_arrival_rate() -> None:
    # 160 Mbit/s of cross traffic on 200: every stream overflows the queue (loss), its
    # delay stops growing, but it arrives at R C / (R + X): A = R + C - R C / R_out.
    cap, cross = 200e6, 160e6
    streams = [StreamResult(r, 0.01, 0.3, r * cap / (r + cross)) for r in (100e6, 120e6, 140e6)]
    est, low, high, loaded = estimate(streams, cap)
    assert loaded == 3
    assert est == pytest.approx(cap - cross, rel=0.01)
    assert low <= est <= high


def test_a_stream_sent_back_is_read_at_the_rate_it_was_sent_whatever_it_lost() -> None:
    """Sent back, a stream's send times come only with the packets that arrived (serve
    stamps them in the packets): a FIFO full of others' traffic that dropped every third
    one must not make the stream look sent at the rate it arrived."""
    cap, cross, rate = 100e6, 60e6, 70e6
    tx, rx = fluid_stream(rate, cap, cross, count=300)
    kept = {i for i in tx if i % 3 != 2}
    sent_back = {i: t for i, t in tx.items() if i in kept}
    arrived = {i: t for i, t in rx.items() if i in kept}
    up = stream_result(tx, arrived, 300, WIRE)
    back = stream_result(sent_back, arrived, 300, WIRE)
    assert up is not None and back is not None
    assert back.rate_bps == pytest.approx(up.rate_bps, rel=0.01)
    assert back.rate_bps == pytest.approx(rate, rel=0.01)
    assert back.loss == pytest.approx(1 / 3, abs=0.01)


def test_a_mode_that_moved_past_what_was_free_refutes_the_leftover() -> None:
    """Autotuning held by a small send buffer at about what the available bandwidth read
    free, while DRS moved three times that on the same path (a 4.6 Gbit/s matrix scenario):
    what is left did not hold the transfer; its send buffer did."""
    p = dataclasses.replace(path(5, 2600), available=_shared(1200, 2600))
    small = audit(**{"net.ipv4.tcp_wmem": "4096 16384 518144"})
    auto = mode(760.0)  # TCP_INFO's send-buffer counter read 0 (it undercounts)
    drs = mode(3500.0, name="drs")
    d = diagnose(Evidence(small, audit(), p, transfer_of(auto, drs)))
    assert d.verdict.limiting_factor == "sender-buffer"
    alone = diagnose(Evidence(audit(), audit(), p, transfer_of(mode(1150.0))))
    assert alone.verdict.limiting_factor == "cross-traffic"


@pytest.mark.parametrize(
    ("rmem_max", "factor"), [(262144, "receiver-window"), (33554432, "cross-traffic")]
)
def test_windows_below_the_least_that_was_free_are_the_limit_not_the_leftover(
    rmem_max: int, factor: str
) -> None:
    """80 of 200 Mbit/s free (75-85); the upload got 52 over 20 ms. A 256 KB receive buffer
    allows ~52 Mbit/s there (window law, below the least free): the window held it, not
    what others left. With 32 MB the window allows the path and the leftover is the reading
    (scenario matrix 20261201.111: 136 KB at 2.4 ms, 294 of 342-494 Mbit/s free)."""
    p = dataclasses.replace(path(20, 200), available=_shared(80))
    peer = audit(**{"net.ipv4.tcp_rmem": f"4096 65536 {rmem_max}"})
    ev = Evidence(audit(), peer, p, transfer_of(mode(52.0, rwnd=0.3)))
    assert diagnose(ev).verdict.limiting_factor == factor


def test_random_loss_is_no_overflow() -> None:
    """A lossy link drops a stream's packets at its own rate, whatever the queue: streams
    that lost what the idle probes' share explains rose no queue (5 % random loss each way
    read `cross-traffic` once in three checks before); one that lost far more still did."""
    cap = 9e6
    # Six streams with flat delays, 6-9 % of 60-80 packets lost: random loss at 8 % (the
    # idle probes' share) explains them; with no idle loss known they count as overflows.
    streams = [
        StreamResult(rate, 0.0, lost / n, rate * (1 - lost / n), n)
        for rate, lost, n in ((4.5e6, 4, 60), (5.4e6, 5, 70), (6.3e6, 7, 80)) * 2
    ]
    assert estimate(streams, cap, random_loss=0.08)[3] == 0
    assert estimate(streams, cap, random_loss=0.08)[0] == cap
    assert estimate(streams, cap)[3] == len(streams)
    # 40 % lost where random loss drops 8 %: an overflow, whatever the random share.
    assert StreamResult(8e6, 0.0, 0.4, 4.8e6, 80).overflowed(0.08)
    assert not StreamResult(8e6, 0.0, 0.04, 7.7e6, 80).overflowed(0.0)  # under MAX_LOSS


def held_and_released(rate: float, rise: float, count: int = 2000) -> StreamResult:
    """Sent at `rate`; a forwarder (or the receiving host) held the packets more and more
    for the first three quarters of the stream, `rise` s per s, then let them all go: the
    last quarter arrives at the idle delay. No FIFO queue does that (it drains at most at
    the line's rate); the lab's delay line at 1.5-2.3 Gbit/s of 1500-byte packets did."""
    gap = WIRE * 8 / rate
    tx = {i: round(i * gap * 1e9) for i in range(count)}
    held = 3 * count // 4
    rx = {i: round((0.010 + i * gap * (1 + rise if i < held else 1)) * 1e9) for i in tx}
    r = stream_result(tx, rx, count, WIRE)
    assert r is not None
    return r


def test_a_stall_is_not_a_queue_growing() -> None:
    """An idle 2.5 Gbit/s path whose forwarder holds and releases each stream: the fitted
    slopes rise while the streams arrive hardly stretched; the kinematic test (slope =
    R / out - 1 within the slope noise) finds no queue growing, nothing is taken."""
    cap = 2.5e9
    streams = [held_and_released(share * cap, 0.5) for share in (*LADDER, *LADDER_HIGH)]
    assert all(r.slope > 0.1 for r in streams)  # each would have read as rising
    assert not any(r.queue_grew() for r in streams)
    est, _low, _high, loaded = estimate(streams, cap)
    assert loaded == 0 and est == cap


def test_a_growing_queue_passes_the_kinematic_test() -> None:
    cap, cross = 200e6, 100e6
    for share in (0.7, 0.8, 0.9):
        tx, rx = fluid_stream(share * cap, cap, cross)
        r = stream_result(tx, rx, len(tx), WIRE)
        assert r is not None and r.slope > 0.1 and r.queue_grew()
