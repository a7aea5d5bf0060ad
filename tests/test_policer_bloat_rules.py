"""The policer and bufferbloat rules, and the RTT-under-load figures, on synthetic transfers
built from what the causes do (a flat plateau with no queue and bursty losses; a standing
queue of several BDPs) — the lab tests and `python -m benchmarks causes` run them on real paths."""

from __future__ import annotations

import dataclasses

import pytest

from tcpwizard.advice import idle_follow_up
from tcpwizard.advice.diagnose import Evidence, diagnose
from tcpwizard.advice.evidence import directions
from tcpwizard.advice.loss_episodes import settled_loss
from tcpwizard.advice.ramp import still_ramping
from tcpwizard.advice.rules import bufferbloat
from tcpwizard.advice.rules.cross_traffic import CROSS_SHARED_CONFIDENCE
from tcpwizard.advice.rules.policer import BUCKET_MAX_S, bucket_s
from tcpwizard.advice.window_law import backoff, lossy_window_share
from tcpwizard.checks.model import HostAudit
from tcpwizard.measure.engine.loaded_rtt import loaded_rtt, loss_pattern, percentile, plateau_mbps
from tcpwizard.measure.model import (
    IdleLoss,
    ModeResult,
    PathEstimate,
    TcpInfoSample,
    TransferResult,
    TransferSample,
)
from tcpwizard.measure.observe.hostload import CoreLoad, HostDrops, HostLoad
from tcpwizard.measure.probes.availbw import AvailBandwidth
from tests.model_builders import path, samples

TUNED = (
    ("net.ipv4.tcp_rmem", "4096 131072 33554432"),
    ("net.ipv4.tcp_wmem", "4096 16384 33554432"),
    ("net.ipv4.tcp_window_scaling", "1"),
)
MSS = 1448
IP = (MSS + 52) / MSS


def audit(cc: str = "bbr") -> HostAudit:
    return HostAudit("h", "6.18", (), cc, TUNED)


def transfer(
    goodputs: list[float],
    rtts_ms: list[float],
    retrans: list[int],
    cc: str = "bbr",
) -> TransferResult:
    """A transfer sampled every 0.25 s: goodput, the sender's srtt and new retransmissions
    per interval."""
    total = 0
    infos = []
    for g, r, x in zip(goodputs, rtts_ms, retrans, strict=True):
        total += x
        infos.append(
            TcpInfoSample(round(r * 1e3), 100, 100, total, round(g * 1e6 * IP), 0, 0, 0, MSS)
        )
    nbytes = round(sum(goodputs) * 1e6 / 8 * 0.25)
    mbps = sum(goodputs) / len(goodputs)
    m = ModeResult(
        "autotune", "up", 1, nbytes, 0.25 * len(goodputs), mbps, 4_000_000, total,
        samples(goodputs, infos, dt=0.25), 0.0, 0.3, 1.0, cc,
    )  # fmt: skip
    return TransferResult((m,))


def policed(rate: float = 19.3, line: float = 100, rtt: float = 40.0, cc: str = "bbr") -> Evidence:
    """Line rate while the bucket lasts, then the policed plateau; RTT at idle; losses in a
    burst when the bucket ran dry and a few more at each refill."""
    n = 20
    goodputs = [60.0, 70.0, 65.0, 10.0, 30.0] + [rate] * (n - 5)
    rtts = [rtt + 30, rtt + 35, rtt + 20, rtt + 2] + [rtt + 0.4] * (n - 4)
    retrans = [0, 300, 900, 500, 100] + [0, 0, 40, 0, 0] * 3
    t = transfer(goodputs, rtts, retrans, cc)
    return Evidence(audit(cc), audit(cc), with_follow_up(path(rtt, line), t), t)


def with_follow_up(p: PathEstimate, t: TransferResult, lost: int = 0) -> PathEstimate:
    """The path as `check` leaves it: with the idle round-trip probes it sends after the
    transfers where they could tell a bucket from random loss (advice/idle_follow_up.py),
    `lost` of them lost (a bucket passes them all)."""
    n, _ = idle_follow_up.wanted(p, t)
    return dataclasses.replace(p, idle_loss=IdleLoss(n, min(lost, n), "udp-echo")) if n else p


def bloated(line: float = 50, rtt: float = 40.0, bdps: float = 5.0) -> Evidence:
    """A loss-based sender through a deep queue: the path is full and the RTT stands at
    idle + `bdps` BDPs of queue."""
    n = 20
    goodputs = [10.0, 30.0] + [line * 0.965] * (n - 2)
    rtts = [rtt, rtt * 2] + [rtt * (1 + bdps)] * (n - 2)
    retrans = [0] * 10 + [30] + [0] * 9
    t = transfer(goodputs, rtts, retrans, "reno")
    return Evidence(audit("reno"), audit("reno"), path(rtt, line), t)


def test_loaded_rtt_figures() -> None:
    lr = loaded_rtt(bloated(bdps=5.0).transfer.modes[0], 40.0)  # type: ignore[union-attr]
    assert lr is not None
    assert lr.median_ms == pytest.approx(240.0)
    assert lr.p90_ms == pytest.approx(240.0)
    assert lr.rpm == pytest.approx(60 / 0.240)
    assert lr.queue_bdps == pytest.approx(5.0)
    assert lr.samples == 10


def test_percentile_nearest_rank() -> None:
    assert percentile([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 0.9) == 9
    assert percentile([3.0], 0.5) == 3.0


def test_policed_path_is_policer_on_the_path_with_pacing_fixes() -> None:
    d = diagnose(policed())
    v = d.verdict
    assert (v.limiting_factor, v.host_to_fix) == ("policer", "path")
    assert "19.3" not in v.explanation  # the IP-layer rate is named, not the goodput
    assert "20.0 Mbit/s" in v.explanation
    assert "parallel streams" in v.explanation
    commands = [f.command for f in d.fixes]
    assert any("fq maxrate 18mbit" in c for c in commands)
    assert any("SO_MAX_PACING_RATE" in c for c in commands)
    assert all(f.host == "local" for f in d.fixes)  # the sender paces (an upload: this host)


def test_policed_reno_sender_is_told_to_try_bbr() -> None:
    d = diagnose(policed(cc="reno"))
    assert d.verdict.limiting_factor == "policer"
    assert any("tcp_congestion_control=bbr" in f.command for f in d.fixes)


def spread(cc: str, rate: float = 19.3) -> Evidence:
    """Policed, with the sender losing segments in every interval after the burst (BBR
    overshooting the bucket each round until it learns its rate)."""
    ev = policed(cc=cc)
    n = 20
    goodputs = [60.0, 70.0, 65.0, 10.0, 30.0] + [rate] * (n - 5)
    rtts = [70.0, 75.0, 60.0, 42.0] + [40.4] * (n - 4)
    retrans = [0, 300, 400, 300, 300] + [60] * (n - 5)
    t = transfer(goodputs, rtts, retrans, cc)
    return dataclasses.replace(ev, transfer=t, path=with_follow_up(path(40.0, 100), t))


def test_losses_in_every_interval_far_below_the_line_are_policed() -> None:
    """BBR keeps its rate through random loss: evenly spread losses do not explain a plateau
    at a fifth of the line. Nor for Reno here: 14 % of its segments lost puts its loss bound
    at 1 Mbit/s, a twentieth of its rate, and a fifth of the line is far below the 0.75
    Reno's own sawtooth keeps busy through no queue at all. Evenly spread losses at 70 % of
    the line, within reach of that sawtooth, are no bucket's for Reno."""
    v = diagnose(spread("bbr")).verdict
    assert (v.limiting_factor, v.host_to_fix) == ("policer", "path")
    assert any("BBR" in e for e in v.evidence)
    assert diagnose(spread("reno")).verdict.limiting_factor == "policer"
    assert diagnose(spread("reno", rate=70.0)).verdict.limiting_factor != "policer"


def test_a_probe_train_that_found_no_room_rules_the_policer_out() -> None:
    """Flows that share the bottleneck keep its queue standing before the transfer as during
    it: the idle RTT already holds that queue, and the probe's long train, which a full
    bucket lets pass, lost most of itself (lab, 100 Mbit/s x 20 ms with two BBR flows:
    90 %). BBR's plateau at a third of the line is then its share, not a policer's rate."""
    ev = sharing("bbr")
    assert ev.path is not None and ev.path.capacity is not None
    full = dataclasses.replace(ev.path.capacity, train_loss=0.9)
    shared = dataclasses.replace(ev, path=dataclasses.replace(ev.path, capacity=full))
    assert diagnose(shared).verdict.limiting_factor != "policer"
    passed = dataclasses.replace(ev.path.capacity, train_loss=0.02)
    idle = dataclasses.replace(ev, path=dataclasses.replace(ev.path, capacity=passed))
    assert diagnose(idle).verdict.limiting_factor == "policer"


def sharing(cc: str) -> Evidence:
    """A flow beside others' at a FIFO: its first half never runs far above the share it
    settles on (0.93-1.64 x in the matrix's cross-traffic runs), losses all along."""
    ev = spread(cc)
    n = 20
    goodputs = [12.0, 24.0, 30.0, 26.0, 22.0] + [19.3] * (n - 5)
    rtts = [41.0, 42.0, 41.0, 40.6] + [40.4] * (n - 4)
    retrans = [0, 40, 90, 60, 60] + [60] * (n - 5)
    t = transfer(goodputs, rtts, retrans, cc)
    return dataclasses.replace(ev, transfer=t, path=with_follow_up(path(40.0, 100), t))


def test_a_train_lost_to_a_small_queue_keeps_the_policer_when_the_flow_burst_through() -> None:
    """A policer at 13 % of a 292 Mbit/s x 15 ms line behind a 0.68-BDP queue: the probe's
    unpaced train lost 84 % to the queue, the available-bandwidth streams met the bucket (7 %
    free), yet the transfer's first half ran at 2.2 x its plateau: a full bucket let it pass,
    which others' traffic at a FIFO does not. (`congestion` at this host, before.)"""
    ev = spread("bbr")  # a first half at 3.6 x the plateau
    assert ev.path is not None and ev.path.capacity is not None
    lost = dataclasses.replace(ev.path.capacity, train_loss=0.84)
    taken = AvailBandwidth(7e6, 0.0, 14e6, 100e6, 1.8, 10, 4, 10_000)
    policed_path = dataclasses.replace(
        ev, path=dataclasses.replace(ev.path, capacity=lost, available=taken)
    )
    v = diagnose(policed_path).verdict
    assert (v.limiting_factor, v.host_to_fix) == ("policer", "path")


def test_a_train_lost_to_a_small_queue_on_a_free_path_keeps_the_policer() -> None:
    """An unpaced train overflows a queue of a few dozen packets (312 Mbit/s x 2 ms, a
    0.9-BDP queue: 95 % lost), but the available bandwidth shows the path three-quarters
    free: no one else's queue, so the bucket behind it still explains the plateau."""
    ev = sharing("bbr")
    assert ev.path is not None and ev.path.capacity is not None
    lost = dataclasses.replace(ev.path.capacity, train_loss=0.95)
    free = AvailBandwidth(76e6, 72e6, 80e6, 100e6, 1.2, 10, 3, 10_000)
    small_queue = dataclasses.replace(
        ev, path=dataclasses.replace(ev.path, capacity=lost, available=free)
    )
    assert diagnose(small_queue).verdict.limiting_factor == "policer"
    taken = dataclasses.replace(free, estimate_bps=10e6, low_bps=8e6, high_bps=12e6)
    shared = dataclasses.replace(
        ev, path=dataclasses.replace(ev.path, capacity=lost, available=taken)
    )
    assert diagnose(shared).verdict.limiting_factor != "policer"


@pytest.mark.parametrize(("loaded", "policer"), [(10, False), (6, True), (0, True)])
def test_every_periodic_stream_queued_is_others_queue_not_a_bucket(
    loaded: int, policer: bool
) -> None:
    """Every available-bandwidth stream, the slowest at half the capacity, met a growing
    queue: others' traffic holds one standing, which a bucket never makes. Some of them
    loaded is the delay line's noise on policed paths (up to 6 of 10 in the matrix)."""
    ev = policed()
    assert ev.path is not None
    av = AvailBandwidth(0.0, 0.0, 5e6, 100e6, 1.2, 10, loaded, 10_000)
    queued = dataclasses.replace(ev, path=dataclasses.replace(ev.path, available=av))
    assert (diagnose(queued).verdict.limiting_factor == "policer") is policer


def test_a_train_no_plausible_bucket_passes_at_that_rate_rules_the_policer_out() -> None:
    """The probe's main train passed the path whole at the line rate; to pass it, a bucket
    at a plateau of 1 % of the line must hold ~8 s of that rate, where vendors size theirs
    at 1.5-3 s (random loss at 231 ms, Reno's window a handful of segments, in the scenario
    matrix). At a fifth of the line the same train needs 0.16 s: a policer's."""
    ev = policed()
    assert diagnose(ev).verdict.limiting_factor == "policer"
    assert bucket_s(100.0, 0.0, 20.0) < BUCKET_MAX_S
    assert bucket_s(36.5, 0.02, 0.3) > BUCKET_MAX_S
    assert bucket_s(100.0, 0.0, 0.0) == 0.0


def test_a_plateau_the_send_buffer_explains_is_no_policer() -> None:
    """BBR held by a small send buffer on a lossy path also settles on a flat plateau with
    losses and no queue; the window law says the buffer allows no more (128 KB -> a 92 KB
    send window -> 18 Mbit/s at 40.4 ms), so the window rules speak, not the policer."""
    ev = spread("bbr")
    small = (("net.ipv4.tcp_wmem", "4096 16384 131072"), *TUNED[::2])
    held = dataclasses.replace(ev, local=HostAudit("h", "6.18", (), "bbr", small))
    assert diagnose(held).verdict.limiting_factor != "policer"
    roomy = (("net.ipv4.tcp_wmem", "4096 16384 1048576"), *TUNED[::2])
    free = dataclasses.replace(ev, local=HostAudit("h", "6.18", (), "bbr", roomy))
    assert diagnose(free).verdict.limiting_factor == "policer"


def test_plateau_is_the_ip_rate_of_the_second_half() -> None:
    m = policed().transfer.modes[0]  # type: ignore[union-attr]
    assert plateau_mbps(m) == pytest.approx(19.3 * IP)
    pattern = loss_pattern(m)
    assert pattern is not None and pattern.bursty


def test_a_queue_is_no_policer() -> None:
    """The same plateau with a standing queue: a shaper or cross traffic, not a policer."""
    ev = policed()
    m = ev.transfer.modes[0]  # type: ignore[union-attr]
    queued = tuple(
        TransferSample(
            s.t_s,
            s.goodput_mbps,
            0,
            0,
            tcp_info=TcpInfoSample(60_000, 100, 100, s.tcp_info.total_retrans, 1, 0, 0, 0, MSS)
            if s.tcp_info
            else None,
        )
        for s in m.samples
    )
    from dataclasses import replace

    ev = replace(ev, transfer=TransferResult((replace(m, samples=queued),)))
    assert diagnose(ev).verdict.limiting_factor != "policer"


def test_random_loss_at_the_mathis_bound_stays_congestion() -> None:
    """Reno at 1 % random loss: the rate sits at the Mathis bound — loss, not a policer."""
    n = 20
    rate = 2.0  # ~ Mathis at 1 % and 50 ms: 1448*8/0.05*1.22/0.1 = 2.8 Mbit/s
    goodputs = [rate] * n
    rtts = [50.3] * n
    retrans = [5] * n
    t = transfer(goodputs, rtts, retrans, "reno")
    d = diagnose(Evidence(audit("reno"), audit("reno"), path(50, 100), t))
    assert d.verdict.limiting_factor == "congestion"


def test_bloated_queue_on_a_full_path_is_bufferbloat() -> None:
    d = diagnose(bloated())
    v = d.verdict
    assert (v.limiting_factor, v.host_to_fix) == ("bufferbloat", "path")
    assert "RPM" in v.evidence[0]
    assert any("cake" in f.command or "fq_codel" in f.command for f in d.fixes)


def test_one_bdp_queue_is_healthy() -> None:
    """The classic 1-BDP buffer: a Reno flow's median queue stays below 1 BDP."""
    d = diagnose(bloated(bdps=0.6))
    assert d.verdict.limiting_factor == "path-capacity"


def _both_at_once(bdps: float) -> Evidence:
    """Both directions full at the same time, each way's RTT at idle + `bdps` BDPs: each
    one's ACKs wait behind the other's data."""
    ev = bloated(bdps=bdps)
    up = ev.transfer.modes[0]  # type: ignore[union-attr]
    down = dataclasses.replace(up, direction="down")
    return dataclasses.replace(ev, transfer=TransferResult((up, down), "both", at_once=True))


def test_both_ways_at_once_two_classic_queues_are_no_bloat() -> None:
    # Each way's own queue at most one BDP (the classic buffer): the RTT holds both, 1.9 BDPs.
    d = diagnose(_both_at_once(1.9))
    assert d.verdict.limiting_factor == "path-capacity"
    # The same RTT from one way alone is its own queue: bloated.
    one_way = diagnose(bloated(bdps=1.9))
    assert one_way.verdict.limiting_factor == "bufferbloat"


def test_both_ways_at_once_a_deep_queue_is_still_bloat() -> None:
    v = diagnose(_both_at_once(5.0)).verdict
    assert v.limiting_factor == "bufferbloat"
    assert any("both directions ran at once" in e for e in v.evidence)


def _shared_path(bdps: float) -> Evidence:
    """bloated(), with the upload's available bandwidth measured mostly taken by others."""
    ev = bloated(bdps=bdps)
    assert ev.path is not None
    taken = AvailBandwidth(10e6, 8e6, 12e6, 50e6, 1.2, 10, 4, 10_000)
    return dataclasses.replace(ev, path=dataclasses.replace(ev.path, available=taken))


def test_a_queue_others_keep_full_is_bloat_only_past_the_buffer_one_flow_would_bloat() -> None:
    # Others hold the buffer full: a 1.9 BDP reading is the buffer itself, under the 2.33
    # BDPs at which one Reno flow's median queue would reach 1.5.
    assert bufferbloat.rule(bloated(bdps=1.9), directions(bloated(bdps=1.9))[0]) is not None
    shared = _shared_path(1.9)
    assert bufferbloat.rule(shared, directions(shared)[0]) is None
    deep = _shared_path(3.0)
    assert bufferbloat.rule(deep, directions(deep)[0]) is not None
    assert pytest.approx(7 / 3) == bufferbloat.SHARED_BLOAT_BDPS


def test_bloat_beside_another_verdict_is_a_finding() -> None:
    """A receiver-window limit with a bloated queue (RTT far above idle): the window is the
    verdict, the bloat a line in the evidence."""
    ev = bloated()
    small = HostAudit("h", "6.18", (), "reno", (("net.ipv4.tcp_rmem", "4096 65536 262144"),))
    m = ev.transfer.modes[0]  # type: ignore[union-attr]
    from dataclasses import replace

    slow = replace(
        m,
        samples=tuple(replace(s, goodput_mbps=5.0) for s in m.samples),
        throughput_mbps=5.0,
        rwnd_limited=0.9,
    )
    ev = replace(ev, peer=small, transfer=TransferResult((slow,)))
    v = diagnose(ev).verdict
    assert v.limiting_factor == "receiver-window"
    assert any("bufferbloat" in e for e in v.evidence)


def test_capture_of_a_policed_flow_names_the_policer() -> None:
    """A captured flow: a burst at the line rate, then a plateau at a fifth of it, the RTT
    at its minimum, 5 % of the data retransmitted (far above the Mathis bound)."""
    from tcpwizard.advice.capture import judge_direction
    from tests.capture_data import flow

    policed = flow(
        window_full_share=0.0, max_window=6_000_000, window_p50=6_000_000,
        retransmits=700, retransmitted_bytes=1_000_000, loss_episodes=4, late_loss_episodes=1,
        steady_mbps=19.3, peak_mbps=95.0, rtt_p50_ms=50.4, rtt_p90_ms=51.0,
    )  # fmt: skip
    d = judge_direction(policed, lambda a: a == "10.0.0.1")
    assert (d.verdict.limiting_factor, d.verdict.host_to_fix) == ("policer", "path")
    assert any("fq maxrate" in f.command for f in d.fixes)
    from dataclasses import replace

    queued = replace(policed, rtt_p50_ms=80.0)  # a queue: a shaper or a full buffer
    assert judge_direction(queued, lambda a: a == "10.0.0.1").verdict.limiting_factor != "policer"
    at_line = replace(policed, peak_mbps=20.0)  # no burst above the plateau: the line itself
    assert judge_direction(at_line, lambda a: a == "10.0.0.1").verdict.limiting_factor != "policer"
    # Every loss in the first half: slow start overshooting a queue, not a policer.
    early = replace(policed, late_loss_episodes=0)
    assert judge_direction(early, lambda a: a == "10.0.0.1").verdict.limiting_factor != "policer"


def test_live_connection_losing_bursts_without_a_queue_is_policed() -> None:
    from tcpwizard.advice.conns import judge
    from tests.conns_data import obs

    policed = obs(send_mbps=19.3, retransmits=60, segs_out=1700, delivery_rate_max_mbps=60.0)
    v = judge(policed).verdict
    assert v is not None and (v.limiting_factor, v.host_to_fix) == ("policer", "path")
    queued = obs(send_mbps=19.3, retransmits=60, segs_out=1700, rtt_ms=90.0)
    v2 = judge(queued).verdict
    assert v2 is not None and v2.limiting_factor != "policer"
    clean = obs(send_mbps=19.3)
    v3 = judge(clean).verdict
    assert v3 is not None and v3.limiting_factor != "policer"


def test_a_weak_probe_is_not_overruled_by_the_policed_transfer() -> None:
    """The transfer's average (the bucket's burst averaged in) must not pass for the path's
    capacity when the probe flagged itself weak: the policer stays the verdict."""
    from dataclasses import replace

    ev = policed()
    assert ev.path is not None and ev.path.capacity is not None
    weak = replace(ev.path, capacity=replace(ev.path.capacity, confidence=0.5))
    v = diagnose(replace(ev, path=weak)).verdict
    assert (v.limiting_factor, v.host_to_fix) == ("policer", "path")


def test_loss_pattern_tells_bursts_from_random_loss() -> None:
    """A bucket running dry over 1.5 s of a 5 s transfer (BBR's startup into a policer) is a
    burst; the same losses spread over every interval are not."""
    drained = [0, 0, 259, 145, 190, 283, 209, 201, 22] + [0] * 11
    spread = [65] * 20
    for deltas, bursty in ((drained, True), (spread, False)):
        t = transfer([20.0] * 20, [40.0] * 20, deltas)
        pattern = loss_pattern(t.modes[0])
        assert pattern is not None and pattern.bursty is bursty, pattern


def test_bursty_losses_the_senders_own_host_dropped_are_interface_not_a_policer() -> None:
    """The same bursty, queue-free losses, but the sender's transmit ring counted them: the
    host's own drops explain the loss, so no policer is named."""
    ev = policed()
    assert ev.transfer is not None
    m = ev.transfer.modes[0]
    drops = HostDrops(tx_dropped=m.retransmits, interface="eth0")
    load = HostLoad(5.0, (CoreLoad(0, 0.1, 0.1, 0.0, 0.2),), 0.1, 0.1, 0.0, drops)
    dropped = dataclasses.replace(m, sender_load=load)
    ev = dataclasses.replace(ev, transfer=dataclasses.replace(ev.transfer, modes=(dropped,)))
    v = diagnose(ev).verdict
    assert (v.limiting_factor, v.host_to_fix) == ("interface", "local")


def test_cubic_loss_bound_is_its_own_response_function() -> None:
    """RFC 8312: CUBIC's average window grows as (RTT/p)^(3/4), above Reno's 1.22/sqrt(p) on
    long paths; on short ones it never falls below Reno's."""
    from tcpwizard.advice.window_law import mathis_mbps

    reno = mathis_mbps(1448, 100.0, 1e-4)
    cubic = mathis_mbps(1448, 100.0, 1e-4, "cubic")
    assert reno is not None and cubic is not None
    # 1.054 x (0.1 / 1e-4)^0.75 = 187 segments per RTT against Reno's 122.5.
    assert cubic / reno == pytest.approx(1.054 * 1000**0.75 / (1.5**0.5 * 100), rel=0.01)
    short = mathis_mbps(1448, 1.0, 1e-2, "cubic")
    assert short == mathis_mbps(1448, 1.0, 1e-2)


def test_a_window_held_sender_losing_segments_is_not_policed() -> None:
    """The same flat rate with spread losses, but the sender held by the receiver's window
    for most of the transfer (TCP_INFO): the window set the rate on a lossy path."""
    ev = spread("bbr")
    assert ev.transfer is not None
    m = dataclasses.replace(ev.transfer.modes[0], rwnd_limited=0.7)
    held = dataclasses.replace(ev, transfer=TransferResult((m,)))
    assert diagnose(held).verdict.limiting_factor != "policer"


def test_a_loss_based_sender_cut_once_in_its_ramp_is_no_policer() -> None:
    """Reno overflows the path once in slow start, halves and grows a segment per round
    trip since: a flat rate at 81 % of the line, no queue, no later loss. Its backoff
    (1/2) of the line explains that plateau; a policer at a fifth of the line does not."""
    n, rtt = 20, 125.0
    goodputs = [50.0, 150.0, 300.0, 400.0, 390.0] + [325.0] * (n - 5)
    rtts = [rtt, rtt + 20, rtt + 40, rtt + 30] + [rtt + 0.5] * (n - 4)
    retrans = [0, 0, 3000, 500] + [0] * (n - 4)
    t = transfer(goodputs, rtts, retrans, "reno")
    ev = Evidence(audit("reno"), audit("reno"), path(rtt, 417), t)
    assert diagnose(ev).verdict.limiting_factor != "policer"
    assert diagnose(policed(cc="reno")).verdict.limiting_factor == "policer"


def test_one_loss_episode_past_the_middle_of_a_long_path_is_the_ramp_not_a_bucket() -> None:
    """Reno on a 75 Mbit/s x 251 ms line (3 Reno flows beside it, slow to ramp there):
    slow start ends past the transfer's middle in one loss recovery (retransmissions a round
    trip apart), then 63 % of the line, flat. One episode at or above Reno's backoff of the
    line is the overshoot, wherever it falls; a bucket keeps dropping."""
    n, rtt = 20, 251.0
    goodputs = [0.5, 1.0, 2.0, 3.0, 6.0, 9.0, 17.0, 27.0, 40.0, 46.0] + [45.4] * (n - 10)
    rtts = [rtt] * 8 + [rtt + 20, rtt + 10] + [rtt + 4] * (n - 10)
    retrans = [0] * 10 + [120, 0, 800, 60] + [0] * (n - 14)
    t = transfer(goodputs, rtts, retrans, "reno")
    ev = Evidence(audit("reno"), audit("reno"), path(rtt, 74.6), t)
    assert diagnose(ev).verdict.limiting_factor != "policer"
    # Losses again a second later, as a bucket drops whenever the sender passes its rate.
    again = retrans[:16] + [200] + [0] * (n - 17)
    t = transfer(goodputs, rtts, again, "reno")
    ev = Evidence(audit("reno"), audit("reno"), path(rtt, 74.6), t)
    assert diagnose(ev).verdict.limiting_factor == "policer"


def test_each_loss_holds_a_held_window_a_round_trip() -> None:
    # Every window loses a segment: two round trips per window, half the law.
    assert lossy_window_share(0.5, 100 * MSS, MSS) == pytest.approx(0.5, abs=1e-6)
    assert lossy_window_share(0.0, 100 * MSS, MSS) == 1.0
    # 1.3 % of 254 segments: nearly every window loses one.
    assert 0.5 < lossy_window_share(0.013, 368_000, MSS) < 0.52
    # A rare loss costs little.
    assert lossy_window_share(1e-5, 10 * MSS, MSS) > 0.999
    assert backoff("reno") == 0.5 and backoff("cubic") == pytest.approx(0.7, abs=0.001)


def test_a_send_buffer_that_holds_a_lossy_flow_below_its_law_is_no_policer() -> None:
    """BBR with a 719 KB tcp_wmem at 1.3 % random loss over 145 ms moved 15 Mbit/s where
    the window law without loss gives 21: every window lost a segment and waited a round
    trip for it. The buffer explains the plateau; no policer is named."""
    n, rtt = 20, 145.0
    goodputs = [5.0, 12.0, 25.0, 20.0, 16.0] + [14.5] * (n - 5)
    rtts = [rtt + 1, rtt + 1, rtt + 0.5, rtt + 0.5] + [rtt + 0.4] * (n - 4)
    retrans = [0, 2, 10, 8, 6] + [4] * (n - 5)
    t = transfer(goodputs, rtts, retrans, "bbr")
    small = (("net.ipv4.tcp_wmem", "4096 16384 735807"), *TUNED[::2])
    ev = Evidence(HostAudit("h", "6.18", (), "bbr", small), audit(), path(rtt, 164), t)
    assert diagnose(ev).verdict.limiting_factor != "policer"


def test_a_send_buffer_on_a_very_lossy_path_is_still_the_buffer() -> None:
    """Reno with a 918 KB tcp_wmem over 211 ms (224 Mbit/s line) losing 14 % of its
    segments (its ACKs queued behind the other way's transfer) moved 16 Mbit/s, under the
    window law's 17-35: each window waited a round trip for its repair, so the law with
    that loss reaches down to half. The buffer, which holds it to a tenth of the line, is
    named; `congestion` at the sender read it before."""
    n, rtt = 20, 211.0
    goodputs = [0.5, 1.0, 2.0, 5.0, 9.0, 13.0, 18.0, 15.0, 20.0, 16.0] + [16.2] * (n - 10)
    rtts = [rtt + 2] * n
    retrans = [0, 0, 0, 10, 20, 30, 40, 40, 50, 50] + [60] * (n - 10)
    # TCP_INFO's send-buffer counter read 0 (it misses a sender also held by its cwnd).
    m = dataclasses.replace(transfer(goodputs, rtts, retrans, "reno").modes[0], sndbuf_limited=0.0)
    small = (("net.ipv4.tcp_wmem", "4096 16384 939677"), *TUNED[::2])
    sender = HostAudit("h", "6.18", (), "reno", small)
    ev = Evidence(sender, audit("reno"), path(rtt, 224), TransferResult((m,)))
    v = diagnose(ev).verdict
    assert (v.limiting_factor, v.host_to_fix) == ("sender-buffer", "local"), v


def test_losses_that_come_with_a_queue_are_a_full_buffer_not_a_bucket() -> None:
    """Reno through a 0.58-BDP drop-tail queue at 639 Mbit/s x 5.5 ms: a sawtooth whose
    median (68 % of the line) reads as a plateau, its RTT within the 1 ms timer floor of
    idle on the whole, but up by 1-2 ms at every loss: the buffer filled before it dropped.
    A policer drops with the RTT at idle (the same transfer with idle RTTs at its losses)."""
    idle = 5.5
    goodputs = [404.0, 485.0, 604.0, 617.0, 616.0, 617.0, 614.0, 496.0, 363.0, 406.0, 453.0,
                468.0, 496.0, 513.0, 556.0, 573.0, 600.0, 610.0, 616.0, 579.0, 388.0, 391.0,
                406.0, 436.0, 353.0, 296.0, 298.0, 312.0, 349.0, 360.0, 410.0, 424.0]  # fmt: skip
    retrans = [169] + [0] * 5 + [8] + [0] * 11 + [19] + [0] * 4 + [33] + [0] * 8
    rtts = [idle + 0.3] * len(goodputs)
    for i, x in enumerate(retrans):
        if x and i:
            rtts[i - 1], rtts[i] = idle + 1.4, idle + 2.2  # the queue full at the loss
    ev = Evidence(
        audit("reno"), audit("reno"), path(idle, 639), transfer(goodputs, rtts, retrans, "reno")
    )
    assert diagnose(ev).verdict.limiting_factor != "policer"
    flat = [idle + 0.3] * len(goodputs)
    ev = Evidence(
        audit("reno"), audit("reno"), path(idle, 639), transfer(goodputs, flat, retrans, "reno")
    )
    assert diagnose(ev).verdict.limiting_factor == "policer"


def test_a_queue_others_keep_standing_is_cross_traffic_not_congestion() -> None:
    """Reno beside four Reno flows at 108 Mbit/s x 3.7 ms (lab): 22 Mbit/s, losses at the
    loss bound, and a queue of 4.5 ms standing while it ran at a fifth of the line. Its
    own flow cannot keep a queue below the line rate: the others do. The available
    bandwidth read 61 % free (its streams ran out of time), so only the queue shows it.
    With the RTT at idle (random loss on a lossy link) it stays `congestion`."""
    idle, n = 5.2, 20
    goodputs = [15.0, 22.0, 25.0, 20.0, 24.0, 21.0, 23.0, 20.0, 22.0, 21.0] + [22.0] * (n - 10)
    retrans = [2, 4, 4, 5, 4, 4, 5, 4, 4, 4] * 2
    free = AvailBandwidth(65e6, 40e6, 80e6, 107e6, 2.0, 6, 2, 4_000)

    def ev(rtt_ms: float, cwnd: int = 19) -> Evidence:
        # Its window: 22 Mbit/s x 9.8 ms, 19 segments, well within the path's BDP.
        m = transfer(goodputs, [rtt_ms] * n, retrans, "reno").modes[0]
        t = clamped_cwnd(m, cwnd)
        e = Evidence(audit("reno"), audit("reno"), path(idle, 107), t)
        assert e.path is not None
        return dataclasses.replace(e, path=dataclasses.replace(e.path, available=free))

    v = diagnose(ev(9.8)).verdict
    assert (v.limiting_factor, v.host_to_fix) == ("cross-traffic", None), v
    assert any("others' traffic kept it standing" in e for e in v.evidence)
    assert diagnose(ev(idle + 0.2)).verdict.limiting_factor == "congestion"
    # Three Reno and BBR flows beside it at 4.4 ms kept 0.7 ms standing (matrix 187941889.17,
    # `congestion` before): more than any queue-free transfer on a short path stood above
    # idle (0.06-0.41 ms, measure/engine/loaded_rtt.py QUEUE_FREE_NOISE_MS), the floor the
    # policer's test of no queue reads too.
    assert diagnose(ev(idle + 0.75)).verdict.limiting_factor == "cross-traffic"
    assert diagnose(ev(idle + 0.4)).verdict.limiting_factor == "congestion"
    # A window of 100 segments (145 KB against a 70 KB BDP) keeps that queue itself.
    assert diagnose(ev(9.8, cwnd=100)).verdict.limiting_factor == "congestion"
    # Two segments in flight wait on the receiver's delayed ACK: their RTT shows no queue.
    assert diagnose(ev(9.8, cwnd=2)).verdict.limiting_factor == "congestion"


def test_a_rate_still_climbing_is_no_policers_plateau() -> None:
    """BBR over 309 ms (16 round trips in 5 s) still in its startup when the test ended:
    its second half far below the 748 Mbit/s line, a few losses at the idle RTT. A rate
    still rising is no plateau; it read `policer` before."""
    rtt, n = 309.0, 20
    goodputs = [0.1, 0.3, 0.5, 0.8, 1.2, 1.9, 2.9, 4.5, 6.2, 7.0,
                9.8, 13.0, 17.0, 22.0, 28.0, 35.0, 44.0, 55.0, 68.0, 83.0]  # fmt: skip
    retrans = [0] * 7 + [1, 0, 1, 3, 1, 1, 2, 1, 2, 1, 1, 2, 1]
    t = transfer(goodputs, [rtt + 0.5] * n, retrans, "bbr")
    ev = Evidence(audit(), audit(), path(rtt, 748), t)
    assert diagnose(ev).verdict.limiting_factor != "policer"


def clamped_cwnd(m: ModeResult, cwnd: int) -> TransferResult:
    """m with the sender's window held at `cwnd` segments and no send-buffer wait."""
    held = tuple(
        dataclasses.replace(x, tcp_info=dataclasses.replace(x.tcp_info, snd_cwnd=cwnd))
        for x in m.samples
        if x.tcp_info is not None
    )
    return TransferResult((dataclasses.replace(m, sndbuf_limited=0.0, samples=held),))


def _with_delivered(t: TransferResult) -> TransferResult:
    """The same transfer with the sender's delivered count in every sample."""
    m = t.modes[0]
    done, out = 0.0, []
    for s in m.samples:
        done += s.goodput_mbps * 1e6 / 8 * 0.25
        out.append(dataclasses.replace(s, delivered_bytes=round(done)))
    return TransferResult((dataclasses.replace(m, samples=tuple(out)),))


def test_the_loss_bound_reads_the_loss_after_the_ramps_burst() -> None:
    """Reno at 0.27 % random loss, 196 Mbit/s x 13.4 ms (matrix 31415926.9): slow start
    overshot (165 retransmits at once), then it held 25 Mbit/s with a few losses all along.
    Over the whole transfer 1.5 % were lost, a bound of 8.5 Mbit/s far below the plateau;
    after the burst 0.2 %, a bound of ~24: random loss holds it, no bucket. (`policer`.)"""
    rtt, n = 13.4, 40
    goodputs = [70.0, 113.0, 112.0, 51.0, 31.0] + [25.0] * (n - 5)
    retrans = [0, 165, 0, 0, 0] + [1, 0, 1, 0, 1, 0, 0, 1] * 4 + [1, 0, 1]
    t = _with_delivered(transfer(goodputs, [rtt + 0.3] * n, retrans, "reno"))
    ev = Evidence(audit("reno"), audit("reno"), path(rtt, 196), t)
    assert diagnose(ev).verdict.limiting_factor != "policer"
    # The same plateau losing a burst at every refill after it (2.6 %) is beyond random loss.
    heavy = [0, 165, 0, 0, 0] + [120, 0, 0, 0, 0, 0, 0, 0] * 4 + [120, 0, 0]
    t = _with_delivered(transfer(goodputs, [rtt + 0.3] * n, heavy, "reno"))
    ev = Evidence(audit("reno"), audit("reno"), path(rtt, 196), t)
    assert diagnose(ev).verdict.limiting_factor == "policer"


def test_losses_that_went_on_through_the_plateau_are_its_loss_not_the_ramps() -> None:
    """Reno policed at 37 of 157 Mbit/s over 162 ms (scenario matrix 20261127.36): the
    bucket's burst, then drops in nearly every interval for 2.8 s with no pause of two round
    trips, so the whole of it reads as one episode. Its losses went on through the plateau:
    the loss that held it is the second half's (about a tenth of what it delivered), not
    "none after the ramp"."""
    rtt, n = 162.0, 40
    goodputs = [20.0, 60.0, 120.0, 130.0, 70.0] + [35.0] * (n - 5)
    # Every interval loses (the real transfer's deltas, 0.1 s apart, gathered): the most
    # when the sender passes the rate again, a trickle between.
    drops = [900, 300, 300, 300, 300, 900, 500, 300, 300, 300, 550, 130, 300, 80, 10, 10]
    retrans = [0, 0, 0, 0, 150] + drops + [10, 80, 150, 480, 70, 70, 20, 10, 70] + [10] * 7
    retrans += [0, 0, 0]
    t = _with_delivered(transfer(goodputs, [rtt + 0.6] * n, retrans, "reno"))
    half = sum(retrans[21:]) * MSS / (19 * 35e6 / 8 * 0.25)
    assert settled_loss(t.modes[0], rtt) == pytest.approx(half, rel=0.01)
    ev = Evidence(audit("reno"), audit("reno"), path(rtt, 157), t)
    assert diagnose(ev).verdict.limiting_factor == "policer"
    # A long path's late ramp: one episode begun in the second half, none after it, is the
    # overshoot; its own losses do not count against the plateau.
    late = [0] * 24 + [20, 30, 20] + [0] * 13
    t = _with_delivered(transfer(goodputs, [rtt + 0.6] * n, late, "reno"))
    assert settled_loss(t.modes[0], rtt) == 0.0


def test_a_policer_caps_every_transfer_of_its_direction() -> None:
    """The policed BBR transfer, and DRS on the same path holding three times its plateau
    (BBR at 0.56 % random loss over 128 ms, matrix 31415926.15): no bucket passed that."""
    ev = policed()
    assert diagnose(ev).verdict.limiting_factor == "policer"
    assert ev.transfer is not None
    auto = ev.transfer.modes[0]
    faster = dataclasses.replace(
        auto,
        mode="drs",
        samples=tuple(dataclasses.replace(s, goodput_mbps=60.0) for s in auto.samples),
        throughput_mbps=60.0,
    )
    same = dataclasses.replace(auto, mode="drs")
    both = dataclasses.replace(ev, transfer=TransferResult((auto, faster)))
    assert diagnose(both).verdict.limiting_factor != "policer"
    capped = dataclasses.replace(ev, transfer=TransferResult((auto, same)))
    assert diagnose(capped).verdict.limiting_factor == "policer"


def test_a_slow_paced_flow_s_own_segment_spacing_is_no_queue() -> None:
    """BBR policed at 3 of 8.1 Mbit/s over 6.3 ms (matrix 31415926.5): its segments 4 ms
    apart, each RTT sample of a delayed-ACK pair waits for the next one, so the RTT under
    load stood 2.9 ms above idle with no queue at all. A policer, not a queue; the same
    excess on a fast flow (0.1 ms between segments at 60 Mbit/s) is a queue."""
    rtt, n = 6.3, 20
    goodputs = [7.5, 7.8, 7.0, 3.5, 2.6] + [3.0] * (n - 5)
    retrans = [0, 20, 30, 10, 5] + [0, 0, 8, 0, 0] * 3
    t = transfer(goodputs, [rtt + 2.9] * n, retrans, "bbr")
    ev = Evidence(audit(), audit(), with_follow_up(path(rtt, 8.1), t), t)
    assert diagnose(ev).verdict.limiting_factor == "policer"
    fast = transfer([g * 20 for g in goodputs], [rtt + 2.9] * n, retrans, "bbr")
    ev = Evidence(audit(), audit(), with_follow_up(path(rtt, 162), fast), fast)
    assert diagnose(ev).verdict.limiting_factor != "policer"


def test_the_loss_bound_of_a_bloated_flow_uses_the_rtt_it_ran_at() -> None:
    """Reno at the 5.1 Mbit/s line through a 4.5-BDP buffer (matrix 27182818.18): 100 ms
    under load against 21 ms idle, 3.7 % of its segments lost to the sawtooth. At the idle
    RTT the loss bound (3.5 Mbit/s) put it at its bound, `congestion` at 0.84 on the peer;
    at the RTT it ran at, 0.7 Mbit/s: it runs far above, as a full path does."""
    idle, n = 21.0, 20
    goodputs = [2.0, 4.0, 5.0] + [4.93] * (n - 3)
    rtts = [idle + 5, idle + 40] + [idle + 79] * (n - 2)
    retrans = [0, 0, 10] + [3] * (n - 3)
    t = transfer(goodputs, rtts, retrans, "reno")
    m = t.modes[0]
    t = TransferResult((dataclasses.replace(m, bytes=round(60 * MSS * 100 / 3.7)),))
    # The probe a hair below what the transfer delivered: the transfer's own rate is then
    # the capacity, and it speaks for the path only if nothing held it (no loss bound).
    ev = Evidence(audit("reno"), audit("reno"), path(idle, 5.0), t)
    v = diagnose(ev).verdict
    assert v.limiting_factor in ("bufferbloat", "path-capacity"), v
    assert v.host_to_fix != "local"


def test_a_slow_unpaced_flows_own_segment_spacing_is_no_others_queue() -> None:
    """Reno alone at 7 Mbit/s x 47.5 ms under 1 % random loss (matrix 20261128.24): 3.4
    Mbit/s with 14 segments in flight, well within the 28-segment BDP, and an RTT under
    load 4.8 ms above idle. A full segment takes 1.7 ms on a 7 Mbit/s line, and an unpaced
    sender's ACK-clocked pairs arrive back to back: its own samples carry two of those
    (3.4 ms) besides the RTT's noise, so no one else kept that queue. Congestion names it."""
    idle, n = 47.5, 20
    goodputs = [1.0, 2.0, 3.0, 3.4, 3.2, 3.6, 3.3, 3.5, 3.4, 3.4] * 2
    retrans = [0, 1, 0, 1, 0, 0, 1, 0, 1, 0] * 2
    m = transfer(goodputs, [idle + 4.8] * n, retrans, "reno").modes[0]
    t = clamped_cwnd(m, 14)
    ev = Evidence(audit("reno"), audit("reno"), path(idle, 7.0), t)
    v = diagnose(ev).verdict
    assert v.limiting_factor != "cross-traffic", v
    # Twice that above idle is more than the flow's own spacing: someone else's queue.
    t2 = transfer(goodputs, [idle + 12.0] * n, retrans, "reno")
    late = tuple(
        dataclasses.replace(x, tcp_info=dataclasses.replace(x.tcp_info, snd_cwnd=14))
        for x in t2.modes[0].samples
        if x.tcp_info is not None
    )
    t2 = TransferResult((dataclasses.replace(t2.modes[0], sndbuf_limited=0.0, samples=late),))
    v2 = diagnose(Evidence(audit("reno"), audit("reno"), path(idle, 7.0), t2)).verdict
    assert v2.limiting_factor == "cross-traffic", v2


def test_a_reno_window_regrowing_after_the_buckets_cuts_is_no_ramp() -> None:
    """Reno through a 3.7 Mbit/s bucket over 86 ms (27 segments a window): the line while
    the bucket lasts, then cut after cut, the last climb still under way when the test
    ends. It met the bucket three times, the last in the second half: the climb is
    congestion avoidance after a cut, not the first ramp (matrix 20261201.135)."""
    goodputs = [8.0, 12.0, 14.0, 3.0, 3.4, 4.4, 2.6, 3.0, 3.4, 3.8, 4.2, 4.6]
    goodputs += [2.4, 2.6, 2.8, 2.6, 2.8, 3.0, 3.6, 3.8, 4.0, 4.2, 4.4, 4.6]
    retrans = [0, 150, 300, 80, 0, 60, 0, 0, 0, 0, 0, 60, 0, 0, 30] + [0] * 9
    t = transfer(goodputs, [87.0] * len(goodputs), retrans, "reno")
    ev = Evidence(audit("reno"), audit("reno"), path(86.0, 15.3), t)
    assert still_ramping(t.modes[0])  # what the ramp test alone reads
    v = diagnose(ev).verdict
    assert (v.limiting_factor, v.host_to_fix) == ("policer", "path")


def test_reno_climbing_back_after_cuts_with_no_loss_before_the_end_is_policed() -> None:
    """Reno through a bucket at a fifth of the line (matrix 20261202.153, scaled): the full
    bucket's burst at the line rate, repeated loss episodes in the first half with no queue,
    then congestion avoidance climbing back a segment per round trip with no loss before
    the end. The climb is no first ramp: the limit was met several times before it."""
    n = 20
    goodputs = [90.0, 60.0, 12.0, 17.0, 8.0, 15.0, 9.0, 14.0, 8.0, 9.0]
    goodputs += [9.0 + 0.9 * i for i in range(n - len(goodputs))]
    rtts = [14.3] * n
    retrans = [0, 400, 0, 60, 0, 50, 0, 40, 0, 0] + [0] * (n - 10)
    t = transfer(goodputs, rtts, retrans, "reno")
    d = diagnose(Evidence(audit("reno"), audit("reno"), path(14.0, 100), t))
    assert (d.verdict.limiting_factor, d.verdict.host_to_fix) == ("policer", "path")


def test_bloat_beside_the_sharing_ranks_under_every_sharing_verdict() -> None:
    """The bloat others built stands beside the sharing: its confidence under the least
    `cross-traffic` is named with, whatever either rule's constants become."""
    assert bufferbloat.BESIDE_SHARING < CROSS_SHARED_CONFIDENCE
