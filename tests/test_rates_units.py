"""Rates from delivered bytes over honest intervals (measure/engine/rates.py) and the physical
bounds every report obeys (advice/guard.py), with property tests over the guard."""

from __future__ import annotations

import dataclasses
import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tcpwizard.advice import guard
from tcpwizard.advice.model import Verdict, WizardGap
from tcpwizard.lab.ratecheck import over_line, rate_fields
from tcpwizard.measure.engine import loaded_rtt as loaded_rtt_mod
from tcpwizard.measure.engine import rates
from tcpwizard.measure.engine.loaded_rtt import plateau_mbps
from tcpwizard.measure.model import (
    CapacityEstimate,
    ModeResult,
    PathEstimate,
    TcpInfoSample,
    TransferResult,
    TransferSample,
)
from tcpwizard.measure.probes.dispersion import SENDER_SLACK
from tests.model_builders import peer_path, samples


def _series(counts: list[int], dt: float = 0.1, rtt_us: int = 36_000) -> list[TransferSample]:
    info = TcpInfoSample(rtt_us, 100, 10, 0, 0, 0, 0, 0, 1448)
    return [
        TransferSample(round(dt * (i + 1), 4), 0.0, 0, 0, tcp_info=info, delivered_bytes=c)
        for i, c in enumerate(counts)
    ]


def test_lumpy_counts_read_the_delivered_rate_not_their_lumps() -> None:
    # 150 Mbit/s delivered, counted in lumps: every other 100 ms interval sees almost
    # nothing, the next one twice as much (what 0.2, 222, 29, 212 ... looked like).
    per = 150e6 / 8 * 0.1
    counts, total = [], 0.0
    for i in range(40):
        total += per * (0.02 if i % 2 else 1.98)
        counts.append(round(total))
    lumpy = _series(counts, rtt_us=150_000)  # a 150 ms path: windows of 2 intervals
    steady = rates.steady_mbps(lumpy)
    assert steady is not None and 145 <= steady <= 155
    assert max(r for _, r in rates.sample_rates(lumpy)[2:]) <= 155


def _hole_at_the_half(counted_by_sender: bool) -> list[TransferSample]:
    """100 Mbit/s delivered for 5 s in 100 ms counts; the receiver's in-order count stands
    still for 0.3 s from the half (a loss recovery) and then jumps by all that arrived."""
    per = round(100e6 / 8 * 0.1)
    counts = [per * (i + 1) for i in range(50)]
    for i in (24, 25, 26):  # the half's first count (2.5 s) falls inside the hole
        counts[i] = counts[23]
    for i in range(5, 50):  # slow start's repair, long before the half: 0.6-0.7 s at half rate
        counts[i] -= per // 2 * min(2, i - 4)
    series = _series(counts)
    if counted_by_sender:
        return series
    return [dataclasses.replace(x, tcp_info=None) for x in series]


def test_a_receivers_hole_at_the_half_does_not_lift_the_steady_rate() -> None:
    steady = rates.steady_mbps(_hole_at_the_half(counted_by_sender=False))
    assert steady is not None and 99.0 <= steady <= 101.0


def test_a_senders_count_keeps_its_one_start() -> None:
    # The same series with the sender's TCP_INFO: its count has no holes, so the half's rate
    # is taken from its first count as before (here that start is low: 104 Mbit/s).
    steady = rates.steady_mbps(_hole_at_the_half(counted_by_sender=True))
    assert steady is not None and steady > 103.0


def test_a_receivers_count_beside_the_senders_tcp_info_is_read_as_the_receivers() -> None:
    # An iperf3 download: the server's TCP_INFO stands beside each sample, the bytes are
    # our receiving socket's in-order count. The counter's owner decides, not the TCP_INFO.
    series = [
        dataclasses.replace(x, delivered_by="receiver")
        for x in _hole_at_the_half(counted_by_sender=True)
    ]
    steady = rates.steady_mbps(series)
    assert steady is not None and 99.0 <= steady <= 101.0
    by_sender = [dataclasses.replace(x, delivered_by="sender") for x in series]
    assert (rates.steady_mbps(by_sender) or 0.0) > 103.0


def _counts_at(mbps: list[float], dt: float = 0.1) -> list[int]:
    out, total = [], 0.0
    for r in mbps:
        total += r * 1e6 / 8 * dt
        out.append(round(total))
    return out


# The shape of a BBR download at 5 Gbit/s x 50 ms (lab): the line reached at 0.8 s, the
# startup queue's overflow repaired at 1.1-1.2 s, after the first half, the line again.
RAMP = [1.0, 6.0, 13.0, 82.0, 326.0, 807.0, 2643.0, 4791.0]
REPAIRED = [*RAMP, 4827.0, 4827.0, 3398.0, 3174.0, 4587.0, 4628.0, 4795.0, 4792.0]


def test_the_settled_rate_begins_after_slow_starts_repair() -> None:
    series = _series(_counts_at(REPAIRED), rtt_us=50_000)
    steady = rates.steady_mbps(series)
    # From 1.3 s, the end of the first round trip back at the rate: (4628 + 4795 + 4792) / 3.
    assert steady is not None and abs(steady - 4738.3) < 0.1
    assert rates.settled_from_s(series) == 1.3


def test_a_count_left_behind_by_the_repair_does_not_lift_the_rate_past_the_pipe() -> None:
    # The same download, but 9 MB delivered before 1.3 s was counted only after it: from
    # 1.3 s the span reads far above the line. The settled rate stops at the best round trip
    # before the collapse, the rate that filled the pipe.
    counts = _counts_at(REPAIRED)
    lump = 9_000_000
    counts = [c - lump if i == 12 else c for i, c in enumerate(counts)]
    series = _series(counts, rtt_us=50_000)
    steady = rates.steady_mbps(series)
    assert steady is not None and steady <= 4827.0 + 1e-6


def test_later_collapses_stay_in_the_settled_rate() -> None:
    # A sawtooth after the first repair is the sender's steady state: the rate over the
    # second half keeps its dips.
    saw = [*RAMP, 4800.0, 3000.0, 4800.0, 4800.0, 3000.0, 4800.0, 3000.0, 4800.0,
           3000.0, 4800.0, 4800.0, 3000.0, 4800.0, 3000.0, 4800.0, 4800.0]  # fmt: skip
    # Samples 1/8 s apart: times exact in binary, every window one interval.
    series = _series(_counts_at(saw, dt=0.125), dt=0.125, rtt_us=50_000)
    half = len(saw) // 2
    steady = rates.steady_mbps(series)
    assert steady is not None and abs(steady - sum(saw[half:]) / (len(saw) - half)) < 1.0


def test_a_first_collapse_long_after_the_pipe_filled_is_the_steady_state() -> None:
    # 100 Mbit/s x 50 ms, both ways at once: the pipe full at 0.6 s and no collapse then;
    # the first one 12 round trips later is BBR's own through a one-BDP queue, and the half
    # keeps it with the rest of the swings.
    swings = [4.0, 15.0, 37.0, 63.0, 94.0, 97.0, 95.0, 96.0, 93.0, 96.0, 95.0, 94.0, 72.0,
              100.0, 98.0, 55.0, 53.0, 90.0, 95.0, 96.0]  # fmt: skip
    series = _series(_counts_at(swings), rtt_us=50_000)
    half = len(swings) // 2
    steady = rates.steady_mbps(series)
    assert steady is not None and abs(steady - sum(swings[half:]) / (len(swings) - half)) < 1.0
    assert rates.settled_from_s(series) == half * 0.1
    # The same collapse right after the pipe filled is slow start's overshoot: cut.
    early = [4.0, 15.0, 37.0, 63.0, 94.0, 97.0, 95.0, 60.0, 55.0, *[95.0] * 11]
    assert (rates.settled_from_s(_series(_counts_at(early), rtt_us=50_000)) or 0.0) > 1.0


def test_a_repair_at_the_very_end_leaves_the_half() -> None:
    # Back for fewer than MIN_STEADY_RATES samples: too little to be the settled part.
    late = [*RAMP, 4800.0, 4800.0, 4800.0, 4800.0, 4800.0, 2000.0, 4800.0, 4800.0]
    series = _series(_counts_at(late), rtt_us=50_000)
    half = len(late) // 2
    steady = rates.steady_mbps(series)
    assert steady is not None and abs(steady - sum(late[half:]) / (len(late) - half)) < 1.0


def test_a_policed_burst_that_never_comes_back_keeps_the_half() -> None:
    # A bucket's burst at the line, then the policed rate: no recovery, nothing cut.
    policed = [*RAMP, 4800.0, 4800.0, *[1500.0] * 10]
    series = _series(_counts_at(policed), rtt_us=50_000)
    half = len(policed) // 2
    steady = rates.steady_mbps(series)
    assert steady is not None and abs(steady - sum(policed[half:]) / (len(policed) - half)) < 1.0
    assert rates.settled_from_s(series) == half * 0.1


def test_windows_are_at_least_a_round_trip_and_the_sampling_interval() -> None:
    assert rates.window_s(0.036, 0.1) == 0.1
    assert rates.window_s(0.3, 0.1) == 0.3
    assert rates.window_s(None, 0.1) == 0.1
    counts = [rates.Count(0.0, 0), rates.Count(0.1, 100), rates.Count(0.2, 200),
              rates.Count(0.3, 300)]  # fmt: skip
    # At 0.3 s with a 0.2 s window the rate is from 0.1 s: 200 bytes in 0.2 s.
    assert rates.window_rates(counts, 0.2)[-1] == (0.3, 200 * 8 / 0.2 / 1e6)


def test_samples_without_counts_integrate_their_rates() -> None:
    steady = rates.steady_mbps(samples([80.0] * 20))
    assert steady is not None and abs(steady - 80.0) < 1e-6


def test_too_few_samples_have_no_steady_rate() -> None:
    assert rates.steady_mbps(_series([100, 200])) is None


def test_live_rate_uses_a_round_trip_once_known() -> None:
    live = rates.LiveRate()
    live.add(0.1, 1_000_000, 0.3)
    live.add(0.2, 1_000_000)
    r = live.add(0.3, 3_000_000)  # one lump: over 0.3 s, not 0.1 s
    assert abs(r - 3_000_000 * 8 / 0.3 / 1e6) < 1e-6


def test_rate_fields_walks_every_mbps_key() -> None:
    doc = {"a_mbps": 5, "x": [{"b_mbps": 200.5}, {"c": {"d_mbps": None, "e_mbps": 1}}]}
    assert rate_fields(doc) == [("a_mbps", 5.0), ("x[0].b_mbps", 200.5), ("x[1].c.e_mbps", 1.0)]
    assert over_line(doc, 100.0) == ["x[0].b_mbps = 200.5"]


# --------------------------------------------------------------------------- the guard

rate = st.floats(min_value=0.0, max_value=1e5, allow_nan=False)
line = st.floats(min_value=1.0, max_value=1e5, allow_nan=False)
mtu = st.integers(min_value=576, max_value=9000)


def _mode(mbps: float, goodputs: list[float]) -> ModeResult:
    return ModeResult("autotune", "up", 1, 10_000, 1.0, mbps, 0, 0, samples(goodputs))


def _path(cap: float, pairs: float, down: float) -> PathEstimate:
    up = CapacityEstimate(cap, "train", 0.9, pairs, cap)
    return peer_path(up, CapacityEstimate(down, "train (down)", 0.8), bdp_bytes=1000)


@given(rate, st.lists(rate, max_size=8), line, mtu)
def test_no_goodput_above_the_line_times_the_payload_share(
    mbps: float, goodputs: list[float], line_mbps: float, mtu_bytes: int
) -> None:
    b = guard.Bounds(line_mbps, None, mtu_bytes)
    t = guard.guard_transfer(TransferResult((_mode(mbps, goodputs),)), b)
    assert t is not None
    limit = line_mbps * guard.payload_share(mtu_bytes)
    m = t.modes[0]
    assert m.throughput_mbps <= limit
    assert all(s.goodput_mbps <= limit for s in m.samples)
    # Within the bound a rate is left as measured.
    assert m.throughput_mbps == min(mbps, limit)


def test_a_drain_slowed_by_its_last_flights_losses_is_not_the_steady_rate() -> None:
    # 80 Mbit/s for 1.6 s; the writer stops at 1.55 s and the last flight's losses slow the
    # drain to 20 Mbit/s for 0.2 s: the settled part ends before it.
    per = round(80e6 / 8 * 0.1)
    counts = [per * (i + 1) for i in range(16)] + [16 * per + per // 4 * k for k in (1, 2)]
    m = ModeResult("autotune", "up", 1, counts[-1], 1.8, 70.0, 0, 0, tuple(_series(counts)))
    assert (rates.mode_steady_mbps(m) or 0.0) < 70.0
    stopped = dataclasses.replace(m, write_s=1.55)
    assert rates.drain_end(stopped.samples, stopped.write_s) == pytest.approx(1.6)
    assert rates.mode_steady_mbps(stopped) == pytest.approx(80.0, rel=1e-3)
    # A stop between two counts keeps the count interpolated there.
    cut = rates.until(rates.counts_of(m.samples), 1.65)
    assert cut[-1] == rates.Count(1.65, 16 * per + per // 8)


def test_a_drain_at_the_paths_rate_stays_in_the_steady_rate() -> None:
    # What the send buffer held goes out at the path's rate after the writer stopped: the
    # settled part keeps it (a 5 Gbit/s lab line's last 0.2 s at 4.8 Gbit/s).
    per = round(80e6 / 8 * 0.1)
    counts = [per * (i + 1) for i in range(18)]
    m = ModeResult("autotune", "up", 1, counts[-1], 1.8, 80.0, 0, 0, tuple(_series(counts)))
    stopped = dataclasses.replace(m, write_s=1.55)
    assert rates.drain_end(stopped.samples, stopped.write_s) is None
    assert rates.mode_steady_mbps(stopped) == rates.mode_steady_mbps(m)


def test_a_half_that_began_on_a_late_count_is_held_to_the_line() -> None:
    # 96.5 Mbit/s of payload (a 100 Mbit/s line) for 1.8 s in 100 ms counts; the half's first
    # count read 20 ms of deliveries late: its bytes over its seconds pass the line by 2 %.
    per = round(100e6 * guard.payload_share(1500) / 8 * 0.1)
    counts = [per * (i + 1) for i in range(18)]
    counts[8] -= per // 5
    m = ModeResult("autotune", "up", 1, counts[-1], 1.8, 80.0, 0, 0, tuple(_series(counts)))
    assert (rates.steady_mbps(m.samples) or 0.0) > 100 * guard.payload_share(1500) * 1.01
    t = guard.guard_transfer(TransferResult((m,)), guard.Bounds(100.0))
    assert t is not None
    held = t.modes[0]
    assert held.rate_bound_mbps == pytest.approx(100 * guard.payload_share(1500))
    assert rates.mode_steady_mbps(held) == held.rate_bound_mbps
    assert (plateau_mbps(held) or 0.0) == pytest.approx(100.0, rel=1e-3)
    assert any(n.startswith("settled ") for n in held.notes)
    # Without a known line the figure stays as measured.
    assert rates.mode_steady_mbps(m) == rates.steady_mbps(m.samples)


@given(st.lists(st.integers(0, 2_000_000), min_size=4, max_size=30), line)
def test_no_settled_rate_above_the_line_after_the_guard(steps: list[int], line_mbps: float) -> None:
    counts = list(itertools.accumulate(steps))
    m = ModeResult("autotune", "up", 1, counts[-1], 1.0, 1.0, 0, 0, tuple(_series(counts)))
    t = guard.guard_transfer(TransferResult((m,)), guard.Bounds(line_mbps))
    assert t is not None
    steady = rates.mode_steady_mbps(t.modes[0])
    assert steady is None or steady <= line_mbps * guard.payload_share(1500)


@given(rate, rate, rate, line, st.one_of(st.none(), st.integers(1, 100_000)), rate)
def test_no_capacity_above_the_line_or_an_unrefuted_interface_speed(
    cap: float, pairs: float, down: float, line_mbps: float, nic: int | None, delivered: float
) -> None:
    b = guard.Bounds(line_mbps, nic, 1500)
    t = TransferResult((_mode(delivered, []),))
    p = guard.guard_path(_path(cap, pairs, down), b, t)
    assert p is not None and p.capacity is not None and p.capacity_down is not None
    limit = line_mbps
    if nic is not None and nic >= delivered * 1500 / 1448:
        limit = min(limit, nic)
    for c in (p.capacity, p.capacity_down):
        assert c.mbps <= limit
        assert (c.pairs_mbps or 0) <= limit
    # Beyond the probe's timestamp noise above the bound the probe was fooled; within it,
    # it measured the line. A method's reading the estimate did not take costs nothing.
    if cap > limit * SENDER_SLACK:
        assert p.capacity.confidence <= 0.5 and "above" in p.capacity.note
    else:
        assert p.capacity.confidence == 0.9 and "above" not in p.capacity.note
    if cap <= limit:
        assert p.capacity.mbps == cap


@given(st.one_of(st.none(), rate), st.one_of(st.none(), rate), line)
def test_the_wizard_gap_obeys_the_line(
    current: float | None, tuned: float | None, line_mbps: float
) -> None:
    v = Verdict("path-capacity", 0.9, None, "", (), WizardGap(current, tuned, True))
    g = guard.guard_verdict(v, guard.Bounds(line_mbps)).wizard_gap
    for x in (g.current_mbps, g.tuned_mbps):
        assert x is None or x <= line_mbps * guard.payload_share(1500)


def test_without_known_bounds_nothing_changes() -> None:
    t = TransferResult((_mode(5000.0, [6000.0]),))
    assert guard.guard_transfer(t, guard.Bounds()) is t
    p = _path(9000.0, 9500.0, 100.0)
    assert guard.guard_path(p, guard.Bounds(), t) is p


def test_line_rate_from_the_environment() -> None:
    assert guard.line_rate_from_env({guard.LINE_RATE_ENV: "100"}) == 100.0
    for bad in ("", "x", "-1", "nan", "inf"):
        assert guard.line_rate_from_env({guard.LINE_RATE_ENV: bad}) is None
    assert guard.line_rate_from_env({}) is None


def test_a_transfer_faster_than_the_nic_refutes_its_speed() -> None:
    # A virtual device's nominal 10 Mbit/s says nothing once 90 Mbit/s were delivered.
    b = guard.Bounds(None, 10, 1500)
    p = guard.guard_path(_path(95.0, 95.0, 95.0), b, TransferResult((_mode(90.0, []),)))
    assert p is not None and p.capacity is not None and p.capacity.mbps == 95.0
    q = guard.guard_path(_path(95.0, 95.0, 95.0), b, None)
    assert q is not None and q.capacity is not None and q.capacity.mbps == 10.0
    assert dataclasses.replace(b, interface_mbps=None).capacity_max() is None


def _rtt_samples(srtt_ms: float, rttvar_ms: float, cwnd: int, n: int = 8) -> ModeResult:
    info = TcpInfoSample(
        rtt_us=round(srtt_ms * 1e3), rttvar_us=round(rttvar_ms * 1e3), snd_cwnd=cwnd,
        total_retrans=0, delivery_rate_bps=0, busy_time_us=0, rwnd_limited_us=0,
        sndbuf_limited_us=0, snd_mss=1448,
    )  # fmt: skip
    samples = tuple(TransferSample(0.1 * i, 1.0, 0, 0, tcp_info=info) for i in range(n))
    return ModeResult("autotune", "up", 1, 1, 1.0, 1.0, 0, 0, samples)


def test_delayed_acks_are_allowed_only_when_the_samples_rose_now_and_then() -> None:
    """A 4-segment window waits on a delayed ACK about once in two samples: up to 40 / 5
    ms on the mean, allowed where the samples' mean deviation is at least half the excess;
    a queue that stands raises every sample alike (small deviation): nothing allowed."""
    now_and_then = _rtt_samples(37.0, 7.0, 4)
    assert loaded_rtt_mod.delayed_ack_ms(now_and_then, 4, 7.0) == pytest.approx(8.0)
    standing = _rtt_samples(37.0, 1.0, 4)
    assert loaded_rtt_mod.delayed_ack_ms(standing, 4, 7.0) == 0.0
    assert loaded_rtt_mod.window_segments(now_and_then) == 4
