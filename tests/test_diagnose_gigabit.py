"""Verdicts at gigabit rates on synthetic evidence: transfers bound the capacity from below,
a weak probe never overrules a transfer that ran at the path's rate, and a full send buffer
at the path's rate is not a sender-buffer limit."""

from __future__ import annotations

import dataclasses

import pytest

from tcpwizard.advice.capacity_view import path_capacity
from tcpwizard.advice.diagnose import Evidence, diagnose
from tcpwizard.advice.window_law import window_limit_mbps
from tcpwizard.measure.model import CapacityEstimate, ModeResult, TcpInfoSample, TransferResult
from tests.model_builders import audit, fixes, mode, peer_path, samples

STOCK = {  # Linux defaults: 6 MB receive, 4 MB send autotuning maxima
    "net.ipv4.tcp_rmem": "4096 131072 6291456",
    "net.ipv4.tcp_wmem": "4096 16384 4194304",
}


def _bursty(mbps: float) -> CapacityEstimate:
    return CapacityEstimate(mbps, "train", 0.5, None, mbps, "coalescing", "bursts")


def _ramp(m: ModeResult, rates: list[float], delivered: float = 0.0) -> ModeResult:
    """m with one sample per rate (0.1 s apart) and the sender's delivery rate."""
    info = TcpInfoSample(20_000, 500, 1000, 0, int(delivered * 1e6), 0, 0, 0, 1448)
    return dataclasses.replace(m, samples=samples(rates, [info] * len(rates), buf=1 << 22))


def test_a_bursty_probe_claiming_more_is_overruled_by_a_transfer_at_the_path_rate() -> None:
    # 1 Gbit/s x 20 ms, stock buffers: the sender fills its buffer 70 % of the time, which
    # a fast healthy sender does; a bursty probe claimed 2.7 Gbit/s.
    up = mode(925.0, snd=0.7)
    ev = Evidence(
        audit(**STOCK), audit(**STOCK), peer_path(_bursty(2700)), TransferResult((up,)), fixes()
    )
    v = diagnose(ev).verdict
    assert v.limiting_factor == "path-capacity"
    assert any("probe said 2.70 Gbit/s" in e and "at least 958" in e for e in v.evidence)
    cap, note = path_capacity(ev)["up"]
    assert cap == pytest.approx(925 * 1500 / 1448) and "transfers showed" in note


def test_a_probe_below_the_transfers_is_raised_to_what_they_carried() -> None:
    down = mode(900.0, direction="down")
    ev = Evidence(
        audit(**STOCK),
        audit(**STOCK),
        peer_path(_bursty(990), CapacityEstimate(300, "train (down)", 0.4, None, 300, "sender")),
        TransferResult((mode(930.0), down)),
    )
    caps = path_capacity(ev)
    assert caps["down"][0] == pytest.approx(900 * 1500 / 1448)
    assert "probe said 300.0 Mbit/s" in caps["down"][1]
    assert diagnose(ev).verdict.limiting_factor == "path-capacity"


def test_a_delivery_rate_sample_is_never_reported_as_the_rate_once_up_to_speed() -> None:
    # A short test whose sender's TCP_INFO delivery-rate samples read 950 per round trip
    # while the receiver got 780-820 in the second half: the figure is the bytes delivered.
    up = _ramp(mode(620.0), [20, 350, 650, 700, 760, 780, 800, 820, 800, 810], delivered=950)
    ev = Evidence(audit(**STOCK), audit(**STOCK), peer_path(_bursty(1000)), TransferResult((up,)))
    v = diagnose(ev).verdict
    assert v.limiting_factor == "path-capacity"
    assert any("802.0 Mbit/s once up to speed" in e for e in v.evidence)  # 780..810
    assert not any("950" in e for e in v.evidence)


def test_a_small_send_buffer_still_names_the_sender_at_high_rates() -> None:
    small = audit(**{**STOCK, "net.ipv4.tcp_wmem": "4096 16384 1048576"})
    bound = window_limit_mbps(0.7 * 1048576, 20)  # ~290 Mbit/s
    up = mode(bound, snd=0.9)
    ev = Evidence(small, audit(**STOCK), peer_path(_bursty(1100)), TransferResult((up,)), fixes())
    v = diagnose(ev).verdict
    assert (v.limiting_factor, v.host_to_fix) == ("sender-buffer", "local")
    assert path_capacity(ev)["up"][0] == pytest.approx(1100)  # not overruled: window-limited


def test_send_buffer_time_alone_is_weak_when_the_window_law_allows_thepeer_path() -> None:
    # 700 of a confidently measured 1000: sndbuf-limited time, but 4 MB allows 1.1 Gbit/s.
    up = mode(700.0, snd=0.8)
    sure = CapacityEstimate(1000, "capprobe-pairs+train", 0.9, 1000, 1000)
    ev = Evidence(audit(**STOCK), audit(**STOCK), peer_path(sure), TransferResult((up,)))
    v = diagnose(ev).verdict
    assert v.limiting_factor != "sender-buffer"


def test_a_small_receive_window_at_the_far_end_is_named_at_gigabit() -> None:
    small = audit(**{**STOCK, "net.ipv4.tcp_rmem": "4096 131072 1048576"})
    got = window_limit_mbps(0.62 * 1048576, 20)
    ev = Evidence(
        audit(**STOCK), small, peer_path(_bursty(950)), TransferResult((mode(got, rwnd=0.8),))
    )
    v = diagnose(ev).verdict
    assert (v.limiting_factor, v.host_to_fix) == ("receiver-window", "peer")


def test_a_transfer_at_its_own_window_bound_is_no_capacity_even_above_a_weak_probe() -> None:
    # This host's 256 KB receive buffer holds downloads at ~26 Mbit/s; the download probe
    # came out lower still (sender-limited), so the transfer is the fastest evidence, but
    # it sat at its window: a lower bound, not the path.
    small = audit(**{"net.ipv4.tcp_rmem": "4096 65536 262144"})
    got = window_limit_mbps(0.62 * 262144, 50)
    slow_probe = CapacityEstimate(20, "train (down)", 0.4, None, 20, "sender")
    p = peer_path(CapacityEstimate(100, "train", 0.9), slow_probe, rtt_ms=50.0)
    down = mode(got, direction="down", rwnd=0.3)
    ev = Evidence(small, audit(), p, TransferResult((mode(95.0), down)))
    v = diagnose(ev).verdict
    assert (v.limiting_factor, v.host_to_fix) == ("receiver-window", "local")


def test_a_delivery_rate_inflated_by_batched_acks_does_not_double_the_floor() -> None:
    # 200 Mbit/s path: goodput 160 once up to speed, but ACKs released in batches made the
    # sender's delivery-rate samples read 340. The floor may not claim 1.7x the path.
    up = _ramp(mode(150.0), [20, 120, 150, 160, 155, 165, 160, 158, 162, 160], delivered=340)
    ev = Evidence(audit(**STOCK), audit(**STOCK), peer_path(_bursty(200)), TransferResult((up,)))
    cap = path_capacity(ev)["up"][0]
    assert cap is not None and cap <= 200 * 1.0
    assert diagnose(ev).verdict.limiting_factor == "path-capacity"


def test_a_weak_probe_is_not_overruled_by_a_transfer_at_its_own_window_bound() -> None:
    # The probe, starved of CPU, read 352 of a 1 Gbit/s path; autotune sat at the 1 MB send
    # buffer's bound (~290). The transfer is not the path's rate: the buffer is named.
    small = audit(**{**STOCK, "net.ipv4.tcp_wmem": "4096 16384 1048576"})
    bound = window_limit_mbps(0.7 * 1048576, 20)
    ev = Evidence(
        small, audit(**STOCK), peer_path(_bursty(352)), TransferResult((mode(bound, snd=0.6),))
    )
    assert path_capacity(ev)["up"][0] == pytest.approx(352)
    assert diagnose(ev).verdict.limiting_factor == "sender-buffer"


def test_a_loss_bound_reno_transfer_does_not_speak_for_thepeer_path() -> None:
    # Reno at 0.1 % loss on 1 Gbit/s x 20 ms: 28 Mbit/s, near its Mathis bound; a weak
    # probe read 680. The tuned mode (drs) is as slow: loss, not the path, held both.
    up = mode(28.0, cc="reno", retrans=20, nbytes=14_000_000)
    drs = mode(27.0, name="drs", cc="reno", retrans=20, nbytes=14_000_000)
    local = audit(**STOCK)
    ev = Evidence(local, audit(**STOCK), peer_path(_bursty(680)), TransferResult((up, drs)))
    assert path_capacity(ev)["up"][0] == pytest.approx(680)
    assert diagnose(ev).verdict.limiting_factor == "congestion"


def test_a_transfer_faster_than_the_probe_makes_the_verdict_less_sure() -> None:
    # The same transfer at 900 down; one probe saw 950 of the path, another only 300. The
    # capacity is raised to what the transfer delivered, never beyond, and less surely.
    def verdict_for(probe_mbps: float) -> tuple[float, float | None, tuple[str, ...]]:
        down = mode(900.0, direction="down")
        probe = CapacityEstimate(probe_mbps, "train (down)", 0.8, None, probe_mbps)
        ev = Evidence(
            audit(**STOCK),
            audit(**STOCK),
            peer_path(_bursty(990), probe),
            TransferResult((down,)),
        )
        v = diagnose(ev).verdict
        assert v.limiting_factor == "path-capacity"
        return v.confidence, path_capacity(ev)["down"][0], v.evidence

    sure, cap_sure, _ = verdict_for(950.0)
    unsure, cap, evidence = verdict_for(300.0)
    assert cap_sure is not None and cap_sure <= 950.0  # no more than the probe saw
    assert cap == pytest.approx(900 * 1500 / 1448)  # what was delivered, at the IP layer
    assert unsure < sure
    assert any("probe said 300.0 Mbit/s" in e and "less sure" in e for e in evidence)
