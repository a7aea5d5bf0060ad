"""Capacity estimation at high rates, on synthetic arrival times (no sockets): bursty
delivery, a sender slower than the path, the interface bound, squeezed pairs, train sizing."""

from __future__ import annotations

import random

import pytest

from tcpwizard.measure.probes import dispersion

WIRE = 1500


def _service_ns(rate_bps: float) -> float:
    return WIRE * 8 * 1e9 / rate_bps


def _batched(
    rate_bps: float, n: int, batch_ns: float, write_ns: float = 4000, seed: int = 1
) -> list[tuple[int, int]]:
    """A bottleneck at rate_bps whose output is released in batches: every batch_ns (with
    random extra stalls) all packets due so far are written back to back, write_ns apart,
    as a software bottleneck or interrupt coalescing delivers them."""
    rng = random.Random(seed)
    due = [i * _service_ns(rate_bps) for i in range(n)]
    out: list[tuple[int, int]] = []
    t = 0.0
    i = 0
    while i < n:
        t += batch_ns * (1 + 3 * rng.random() * (rng.random() < 0.2))
        w = t
        while i < n and due[i] <= t:
            out.append((i, round(w)))
            w += write_ns
            i += 1
    return out


def test_bursty_arrivals_are_scored_by_their_envelope_not_a_gap_in_a_burst() -> None:
    # 1 Gbit/s, released in batches every ~150 us (stalls up to 4x), written 4 us apart.
    arrivals = _batched(1e9, 3000, 150_000)
    tx = {i: round(i * _service_ns(3e9)) for i in range(3000)}  # the sender was faster
    score = dispersion.score_train(tx, arrivals, 3000, WIRE)
    assert score.bursty
    assert score.rate_bps == pytest.approx(1e9, rel=0.05)
    assert score.median_gap_bps is None  # a gap inside a burst is the receiver's cost
    est = dispersion.combine(None, score)
    assert est is not None and est.limited_by == "coalescing"
    assert est.mbps == pytest.approx(1000, rel=0.05)
    assert "lower envelope" in est.note


def test_envelope_rate_ignores_where_the_span_ends_fall_in_a_batch() -> None:
    arrivals = _batched(500e6, 2000, 400_000, seed=7)
    times = [t for _, t in arrivals]
    env = dispersion.envelope_rate(times, WIRE)
    assert env == pytest.approx(500e6, rel=0.03)


def test_a_rate_faster_than_the_sender_is_capped_and_called_sender_limited() -> None:
    # Arrivals compressed at the end of the train claim 2 Gbit/s; we sent at 600 Mbit/s.
    tx = {i: round(i * _service_ns(600e6)) for i in range(400)}
    arrivals = [(i, round(10_000_000 + i * _service_ns(2e9))) for i in range(400)]
    score = dispersion.score_train(tx, arrivals, 400, WIRE)
    assert score.capped_by == "sender"
    assert score.rate_bps == pytest.approx(600e6 * dispersion.SENDER_SLACK, rel=1e-3)
    assert score.capped_from_bps == pytest.approx(2e9, rel=1e-3)
    est = dispersion.combine(None, score)
    assert est is not None and est.limited_by == "sender" and est.confidence <= 0.4
    assert "at least" in est.note


def test_no_estimate_exceeds_the_interface_speed() -> None:
    arrivals = [(i, round(i * _service_ns(4e9))) for i in range(400)]
    score = dispersion.score_train(None, arrivals, 400, WIRE, link_bps=1e9)
    assert score.capped_by == "interface" and score.rate_bps == pytest.approx(1e9)


def test_pairs_faster_than_the_interface_are_dropped_and_the_disagreement_reported() -> None:
    score = dispersion.TrainScore(400, 400, 950e6, 950e6, 3e9, 0.0)
    est = dispersion.combine((2.8e9, 0.0), score, link_bps=1e9)
    assert est is not None and est.pairs_mbps is None and "not used" in est.note
    noisy = dispersion.combine((500e6, 0.0), score)
    assert noisy is not None and noisy.confidence <= 0.5 and "disagree" in noisy.note


def test_capprobe_skips_pairs_squeezed_after_the_bottleneck() -> None:
    tx, rx = {}, {}
    for i in range(8):
        tx[2 * i], tx[2 * i + 1] = i * 10**7, i * 10**7 + 30_000  # sent 30 us apart
        rx[2 * i] = tx[2 * i] + 5_000_000
        # pair 3 crossed the 100 Mbit/s bottleneck (120 us apart); the others were
        # delivered in one batch, 10 us apart, and have the smaller delay sums
        rx[2 * i + 1] = rx[2 * i] + (120_000 if i == 3 else 10_000)
        if i != 3:
            rx[2 * i] -= 100_000
            rx[2 * i + 1] -= 100_000
    got = dispersion.capprobe(tx, rx, 8, WIRE)
    assert got is not None and got[0] == pytest.approx(100e6, rel=1e-3)


def test_an_idle_bottleneck_makes_the_train_a_lower_bound() -> None:
    # The sender paced itself at 300 Mbit/s on a 1 Gbit/s path: no packet ever queued.
    tx = {i: round(i * _service_ns(300e6)) for i in range(600)}
    arrivals = [(i, t + 5_000_000) for i, t in tx.items()]
    score = dispersion.score_train(tx, arrivals, 600, WIRE)
    assert score.idle == pytest.approx(1.0)
    est = dispersion.combine(None, score)
    assert est is not None and est.limited_by == "sender"


def test_trains_last_tens_of_milliseconds_at_high_rates_within_the_segment_limit() -> None:
    n = dispersion.train_len(1e9, WIRE)
    assert dispersion.train_len(100e6, WIRE) == round(dispersion.TRAIN_SPAN_S * 100e6 / (WIRE * 8))
    assert n * WIRE * 8 / 1e9 == pytest.approx(dispersion.TRAIN_SPAN_S, rel=0.01)
    assert dispersion.train_len(10e9, WIRE) == dispersion.SEGMENT * dispersion.MAX_SEGMENTS
    assert dispersion.train_len(10e6, WIRE) <= dispersion.TRAIN_LEN  # slow paths stay short
    assert dispersion.segments(2500) == [1024, 1024, 452]
    assert sum(dispersion.segments(dispersion.train_len(1e9, WIRE))) == n


def test_mini_trains_squeezed_after_the_bottleneck_are_not_used() -> None:
    service = _service_ns(100e6)
    arrivals, tx = [], {}
    for k in range(10):
        start = k * 1_000_000
        for i in range(6):
            tx[k * 6 + i] = start + i * 20_000
            # half the mini-trains arrive 5 us apart: closer than they were sent
            gap = 5_000 if k % 2 else service
            arrivals.append((k * 6 + i, round(start + 3_000_000 + i * gap)))
    score = dispersion.score_mini_trains(tx, arrivals, 60, WIRE)
    assert score.rate_bps == pytest.approx(100e6, rel=1e-3) and score.mini_trains == 5


def test_bench_probes_judges_gigabit_rows_by_ten_percent_and_never_one_and_a_half() -> None:
    from benchmarks import bench_probes as bp

    case = bp.Case(0.020, 1e9, "gigabit")
    good = bp.Run(20.1, 960.0, 930.0, "coalescing", 1.0)
    low = bp.Run(20.1, 700.0, 930.0, "coalescing", 1.0)  # CPU-starved: out of 10 %
    wild = bp.Run(20.1, 1600.0, 930.0, None, 1.0)  # a false claim
    assert bp.Row(case, (good,) * 20, 20.1).passed is True
    assert bp.Row(case, (good,) * 19 + (low,), 20.1).passed is True  # 95 %
    assert bp.Row(case, (good,) * 18 + (low,) * 2, 20.1).passed is False
    assert bp.Row(case, (good,) * 19 + (wild,), 20.1).over() == 1
    rows = [bp.Row(case, (good,) * 19 + (wild,), 20.1, (1.0, 2.0))]
    s = bp.summarize(rows)
    assert (s.gigabit_runs, s.gigabit_over, s.clean_runs, s.other_runs) == (20, 1, 0, 0)
    assert not s.passed
    table = bp.markdown(rows)
    assert "1600 (1.60)" in table and "1.0 / 2.0" in table
    assert [c.rate_bps for c in bp.matrix(False, ("gigabit",))] == [200e6, 500e6, 1e9]
    multi = bp.matrix(False, ("multigigabit",))
    assert [(c.rate_bps, c.scenario) for c in multi] == [
        (2e9, "multigigabit"),
        (5e9, "multigigabit"),
    ]
    fast = bp.Case(0.050, 5e9, "multigigabit")
    assert bp.Row(fast, (bp.Run(50.2, 4700.0, 5200.0, None, 1.0),) * 20, 50.2).passed is True
    assert bp.Row(fast, (bp.Run(50.2, 4400.0, 5000.0, None, 1.0),) * 20, 50.2).passed is False
    assert (
        bp.summarize(
            [bp.Row(fast, (bp.Run(50.2, 4700.0, 5200.0, None, 1.0),) * 20, 50.2)]
        ).gigabit_runs
        == 20
    )


def test_a_catch_up_burst_in_the_second_half_does_not_raise_the_rate() -> None:
    # 1 Gbit/s; the receiver stalled 6 ms in the first half, then took the backlog at
    # 3 Gbit/s well into the second: that half alone would claim twice the path.
    arrivals, t = [], 0.0
    for i in range(1000):
        if i == 400:
            t += 6_000_000
        t += _service_ns(3e9) if 400 <= i < 900 else _service_ns(1e9)
        arrivals.append((i, round(t)))
    second = [t for _, t in arrivals[499:]]
    assert (len(second) - 1) * WIRE * 8e9 / (second[-1] - second[0]) > 2e9
    score = dispersion.score_train(None, arrivals, 1000, WIRE)
    assert not score.bursty
    assert score.rate_bps is not None and 0.8e9 < score.rate_bps < 1.05e9


def test_a_bursty_train_too_short_for_its_own_estimate_asks_for_a_longer_one() -> None:
    short = dispersion.score_train(None, _batched(1e9, 300, 150_000), 300, WIRE)
    assert short.bursty and short.span_s < dispersion.MIN_SPAN_S
    assert dispersion.too_short(short, 300, WIRE)
    long = dispersion.score_train(None, _batched(1e9, 3000, 150_000), 3000, WIRE)
    assert not dispersion.too_short(long, 3000, WIRE)
