"""Estimators and statistics on synthetic timestamps, plus the probe CLI's error paths."""

from __future__ import annotations

import json
import math
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import jsonschema
import pytest

from tcpwizard.measure.model import CapacityEstimate, PathEstimate, RttStats
from tcpwizard.measure.probes import dispersion
from tcpwizard.measure.probes.probe import bdp_bytes, probe
from tcpwizard.measure.stats import percentile, rtt_stats
from tcpwizard.output.measure_json import path_json
from tests.serve_helpers import running_server

WIRE = 1500


def test_rtt_stats_match_iputils_definitions() -> None:
    samples = [10.0, 12.0, 11.0, 15.0, 10.5]
    s = rtt_stats(samples, sent=6, method="udp-echo")
    assert s is not None
    mean = sum(samples) / 5
    assert s.min == 10.0 and s.max == 15.0
    assert s.mean == pytest.approx(mean)
    # iputils: mdev = sqrt(mean(x^2) - mean(x)^2), the population standard deviation
    assert s.mdev == pytest.approx(math.sqrt(sum(x * x for x in samples) / 5 - mean**2))
    assert s.p50 == 11.0
    assert s.p95 == pytest.approx(14.4)  # linear interpolation: 12 + 0.8 * (15 - 12)
    assert s.loss_pct == pytest.approx(100 / 6)
    assert s.jitter == pytest.approx((2 + 1 + 4 + 4.5) / 4)
    assert rtt_stats([], sent=5, method="x") is None


def test_percentile_edges() -> None:
    assert percentile([3.0], 95) == 3.0
    assert percentile([1.0, 2.0], 0) == 1.0
    assert percentile([1.0, 2.0], 100) == 2.0


def _train(
    rate_bps: float, n: int, start: int = 1000, lost: frozenset[int] = frozenset()
) -> list[tuple[int, int]]:
    gap = WIRE * 8 * 1e9 / rate_bps
    return [(i, round(start + i * gap)) for i in range(n) if i not in lost]


def test_train_scored_on_second_half_ignores_token_bucket_burst() -> None:
    # A token bucket lets the first 20 packets through at 1 Gbit/s, then 50 Mbit/s.
    fast = _train(1e9, 20)
    t_end = fast[-1][1]
    slow = [(20 + i, t_end + round((i + 1) * WIRE * 8 * 1e9 / 50e6)) for i in range(80)]
    score = dispersion.score_train(None, fast + slow, 100, WIRE)
    assert score.rate_bps == pytest.approx(50e6, rel=1e-6)
    assert score.head_bps is not None and score.head_bps > 500e6


def test_train_late_timestamp_then_catch_up_cancels() -> None:
    gap = WIRE * 8 * 1e9 / 50e6
    arrivals = [(i, round(i * gap)) for i in range(100)]
    # the receiver stamped packet 70 late by 1.5 gaps; 71 came right after it
    arrivals[70] = (70, arrivals[71][1] - 5000)
    score = dispersion.score_train(None, arrivals, 100, WIRE)
    assert score.rate_bps == pytest.approx(50e6, rel=1e-6)


def test_train_with_drop_tail_losses_survivors_back_to_back() -> None:
    # Every other packet dropped at a tiny queue: survivors leave at the bottleneck rate.
    gap = WIRE * 8 * 1e9 / 20e6
    arrivals = [(2 * i, round(i * gap)) for i in range(50)]
    score = dispersion.score_train(None, arrivals, 100, WIRE)
    assert score.rate_bps == pytest.approx(20e6, rel=1e-6)
    assert score.loss == pytest.approx(0.5)


def test_mini_trains_median_survives_a_disturbed_one_and_losses() -> None:
    service = WIRE * 8 * 1e9 / 100e6
    arrivals = []
    for k in range(10):
        start = k * 1_000_000
        stretch = 3.0 if k == 4 else 1.0  # one mini-train met competing packets
        arrivals += [(k * 6 + i, round(start + i * service * stretch)) for i in range(6)]
    arrivals = [a for a in arrivals if a[0] != 13]  # one incomplete mini-train is skipped
    score = dispersion.score_mini_trains(None, arrivals, 60, WIRE)
    assert score.rate_bps == pytest.approx(100e6, rel=1e-6)
    assert score.mini_trains == 9
    est = dispersion.combine(None, score)
    assert est is not None and est.method == "mini-trains"


def test_train_needs_four_arrivals() -> None:
    assert dispersion.score_train(None, _train(1e8, 3), 100, WIRE).rate_bps is None


def test_capprobe_picks_min_delay_sum_pair() -> None:
    tx, rx = {}, {}
    for i in range(8):
        tx[2 * i] = i * 10**7
        tx[2 * i + 1] = i * 10**7 + 5_000  # 5 us apart: faster than the bottleneck
        queued = 0 if i == 5 else 300_000 + i * 1000  # only pair 5 met an empty queue
        # pairs that queued were compressed/expanded by cross traffic: wrong dispersion
        disp = 120_000 if i == 5 else 40_000 + i * 7000
        rx[2 * i] = tx[2 * i] + 1_000_000 + queued
        rx[2 * i + 1] = rx[2 * i] + disp
    rate, sender_share = dispersion.capprobe(tx, rx, 8, WIRE) or (0.0, 1.0)
    assert rate == pytest.approx(WIRE * 8 / 120e-6)  # 100 Mbit/s from the clean pair
    assert sender_share == 0


def test_combine_agreeing_pairs_and_train() -> None:
    score = dispersion.TrainScore(100, 100, 100e6, 101e6, 500e6, 0.0)
    est = dispersion.combine((103e6, 0.0), score)
    assert est is not None
    assert est.mbps == pytest.approx(100) and est.method == "capprobe-pairs+train"
    assert est.limited_by is None and est.confidence >= 0.9


def test_combine_flags_shaper_from_fast_head() -> None:
    # Token bucket: the head of the train passed at line rate, the rest at 50 Mbit/s.
    score = dispersion.TrainScore(100, 100, 50e6, 52e6, 900e6, 0.0, 900e6, head_bps=800e6)
    est = dispersion.combine((2000e6, 0.0), score)
    assert est is not None and est.limited_by == "shaper" and est.mbps == pytest.approx(50)
    assert "token-bucket" in est.note


def test_combine_cross_traffic_reports_median_gap_capacity() -> None:
    # Pairs and the median gap see 100 Mbit/s; competing packets stretched the average.
    score = dispersion.TrainScore(
        200, 200, 60e6, 61e6, 900e6, 0.0, 900e6, head_bps=62e6, median_gap_bps=99e6
    )
    est = dispersion.combine((101e6, 0.0), score)
    assert est is not None and est.limited_by == "cross-traffic"
    assert est.mbps == pytest.approx(99) and est.train_mbps == pytest.approx(60)


def test_combine_noisy_pairs_do_not_invent_a_shaper() -> None:
    score = dispersion.TrainScore(
        200, 200, 100e6, 100e6, 900e6, 0.0, 900e6, head_bps=101e6, median_gap_bps=100e6
    )
    est = dispersion.combine((560e6, 0.0), score)
    assert est is not None and est.limited_by is None and est.mbps == pytest.approx(100)
    assert "disagree" in est.note


def test_train_head_and_median_gap() -> None:
    gap = WIRE * 8 * 1e9 / 100e6
    arrivals = []
    t = 0.0
    for i in range(200):
        # every third gap is stretched by a competing packet: mean falls, median stays
        t += gap * (2 if i % 3 == 0 else 1)
        arrivals.append((i, round(t)))
    score = dispersion.score_train(None, arrivals, 200, WIRE)
    assert score.median_gap_bps == pytest.approx(100e6, rel=1e-3)
    assert score.rate_bps is not None and score.rate_bps < 80e6
    assert score.head_bps is not None and score.head_bps < 90e6


def test_combine_flags_sender_and_coalescing() -> None:
    sender = dispersion.combine(None, dispersion.TrainScore(100, 100, 990e6, 990e6, 1000e6, 0.0))
    assert sender is not None and sender.limited_by == "sender" and sender.confidence <= 0.4
    bursty = dispersion.combine(None, dispersion.TrainScore(100, 100, 300e6, 300e6, 900e6, 0.7))
    assert bursty is not None and bursty.limited_by == "coalescing"


def test_bdp_uses_min_rtt() -> None:
    r = RttStats(50.0, 55.0, 70.0, 56.0, 3.0, 80.0, 0.0, 1.0, 20, "udp-echo")
    cap = CapacityEstimate(100.0, "train", 0.9)
    assert bdp_bytes(cap, r) == 625_000  # 100 Mbit/s x 50 ms, the classic example
    assert bdp_bytes(None, r) is None


def test_path_json_has_the_contract_fields() -> None:
    r = RttStats(50.0, 55.0, 70.0, 56.0, 3.0, 80.0, 0.0, 1.0, 20, "udp-echo")
    est = PathEstimate(r, CapacityEstimate(100.0, "train", 0.9), 625_000, 1.2, "10.0.0.2", 5301)
    doc = path_json(est)
    assert set(doc["rtt_ms"]) >= {"min", "p50", "p95", "mean", "mdev", "max", "loss_pct"}
    assert doc["capacity_mbps"] == 100.0
    assert doc["capacity_method"] == "train"
    assert doc["bdp_bytes"] == 625_000
    json.dumps(doc, allow_nan=False)


def test_probe_over_loopback_with_serve() -> None:
    with running_server() as srv:
        est = probe("127.0.0.1", srv.port, budget_s=3.0)
    assert est.peer and est.rtt.method == "udp-echo"
    assert est.rtt.samples == 20 and est.rtt.loss_pct == 0
    assert 0 < est.rtt.min < 5  # loopback
    assert est.capacity is not None and est.capacity.mbps > 100
    # Loopback is faster than Python can send (and delivers in batches): it must say so
    # rather than claim a capacity.
    assert est.capacity.limited_by in ("sender", "coalescing")
    assert est.capacity.confidence <= 0.6
    assert est.duration_s < 3.0


def test_probe_peerless_falls_back_to_tcp_connect() -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    port = listener.getsockname()[1]
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    no_serve = closed.getsockname()[1]
    closed.close()
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                listener.accept()[0].close()
            except TimeoutError:
                continue

    t = threading.Thread(target=accept)
    t.start()
    try:
        est = probe("127.0.0.1", no_serve, tcp_port=port, budget_s=2.0)
    finally:
        stop.set()
        t.join()
        listener.close()
    assert not est.peer and est.rtt.method == "tcp-connect"
    assert any("no serve" in n for n in est.notes)
    if est.capacity is not None:
        assert est.capacity.confidence <= 0.35


def test_unresolvable_name_is_one_line_exit_3() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "tcpwizard", "probe", "no-such-host.invalid"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert out.returncode == 3
    assert out.stderr.strip().count("\n") == 0
    assert "cannot resolve host 'no-such-host.invalid'" in out.stderr


def test_probe_cli_json_over_loopback() -> None:
    with running_server() as srv:
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "tcpwizard",
                "probe",
                "127.0.0.1",
                "--port",
                str(srv.port),
                "--json",
            ],
            capture_output=True,
            text=True,
            timeout=30,
        )
    doc = json.loads(out.stdout)
    # A probe-only run is a full report (the same contract as `check --json`).
    jsonschema.validate(
        doc, json.loads((Path(__file__).parent.parent / "docs/report.schema.json").read_text())
    )
    assert out.returncode == doc["exit_code"] and out.returncode in (0, 1, 2), out.stderr
    assert doc["target"] == {"host": "127.0.0.1", "address": "127.0.0.1", "port": srv.port}
    assert doc["path"]["rtt_ms"]["loss_pct"] <= 10  # loopback; a busy CI box may drop one
    assert doc["transfer"] is None and doc["verdict"]["limiting_factor"]
    assert doc["path"]["peer"] is True
    assert out.stderr == ""  # no progress noise in JSON mode


def test_bench_summary_applies_the_criteria() -> None:
    from benchmarks import bench_probes as bp

    good = bp.Run(50.1, 100.0, 99.0, None, 0.7)
    off = bp.Run(50.1, 112.0, 99.0, None, 0.7)
    clean = bp.Row(bp.Case(0.050, 100e6), (good,) * 9 + (off,), 50.15)
    lossy = bp.Row(bp.Case(0.050, 50e6, "loss"), (bp.Run(50.2, 47.0, 52.0, None, 1.1),), 50.1)
    info = bp.Row(bp.Case(0.050, None), (bp.Run(50.1, 990.0, 1000.0, "coalescing", 0.5),), 50.1)
    s = bp.summarize([clean, lossy, info])
    assert (s.clean_runs, s.clean_up_ok, s.clean_down_ok) == (10, 9, 10)
    assert (s.other_runs, s.other_up_ok) == (1, 1)
    assert s.rtt_ok_vs_ping == s.rtt_runs == 12
    assert s.passed
    assert clean.passed is True and info.passed is None  # 9 of 10 runs is 90 %
    assert bp.Row(bp.Case(0.050, 100e6), (good,) * 4 + (off,), 50.15).passed is False
    table = bp.markdown([clean, lossy, info])
    assert "| 50 ms, max, clean |" in table and "info" in table
    slow = bp.Row(bp.Case(0.050, 100e6), (bp.Run(50.1, 100.0, 100.0, None, 3.5),), 50.1)
    assert not bp.summarize([slow]).passed


def test_kernel_transmit_timestamps_on_loopback() -> None:
    from tcpwizard.measure.wire import udp

    rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    rx.bind(("127.0.0.1", 0))
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    tx.connect(rx.getsockname())
    try:
        if not udp.set_tx_timestamps(tx, True):
            pytest.skip("no SO_TIMESTAMPING")
        before = time.time_ns()
        for _ in range(3):
            tx.send(b"x" * 40)
        deadline = time.monotonic() + 2
        stamps: list[tuple[int, int]] = []
        while len(stamps) < 3 and time.monotonic() < deadline:
            stamps += udp.drain_tx_timestamps(tx)
        assert [i for i, _ in stamps] == [0, 1, 2]  # OPT_ID counts our datagrams
        assert all(before <= ns <= time.time_ns() for _, ns in stamps)
    finally:
        tx.close()
        rx.close()


def test_syn_packet_checksum_and_parse() -> None:
    from tcpwizard.measure.probes.rtt import icmp_checksum
    from tcpwizard.measure.probes.synpairs import parse_answer, syn_packet

    pkt = syn_packet(socket.AF_INET, "10.0.0.1", "10.0.0.2", 40001, 22, 12345, bytes(100))
    pseudo = socket.inet_aton("10.0.0.1") + socket.inet_aton("10.0.0.2")
    pseudo += bytes([0, 6]) + len(pkt).to_bytes(2, "big")
    assert icmp_checksum(pseudo + pkt) == 0  # a valid checksum sums to all ones
    assert parse_answer(pkt, socket.AF_INET6) == (40001, 22, 0x02)


def _shaped_train(
    rate: float, pauses: dict[int, float], bucket: int
) -> tuple[dict[int, int], list[tuple[int, int]]]:
    """A token-bucket shaper fed 200 back-to-back packets: on its schedule, except that at
    each index in `pauses` its timer fires that many ns late and the bucket refunds at most
    `bucket` packets of the lost time (they leave 10 us apart)."""
    svc = WIRE * 8 * 1e9 / rate
    tx = {i: i * 20_000 for i in range(200)}
    arrivals, t, owe = [], 1_000_000.0, 0
    for i in range(200):
        if i in pauses:
            t += pauses[i]
            owe = min(bucket, int(pauses[i] // svc))
        if owe:
            t += 10_000 - svc  # a refunded packet: line rate, not the bucket's
            owe -= 1
        t += svc
        arrivals.append((i, round(t)))
    return tx, arrivals


def test_shaper_pauses_are_left_out_of_the_rate() -> None:
    # Two late timers of 5 and 9 ms; a 10-packet bucket gives back 2.4 ms of each.
    tx, arrivals = _shaped_train(50e6, {130: 5e6, 170: 9e6}, bucket=10)
    score = dispersion.score_train(tx, arrivals, 200, WIRE)
    assert score.pauses == 2 and score.paused_s == pytest.approx(0.014, rel=0.05)
    assert score.rate_bps == pytest.approx(50e6, rel=0.02)
    est = dispersion.combine(None, score)
    assert est is not None and "stood still 2 time(s)" in est.note
    # The span rate would have charged the path for them:
    span_rate = dispersion._span_rate([t for _, t in arrivals[99:]], WIRE)
    assert span_rate is not None and span_rate < 0.9 * 50e6


def test_a_pause_the_bucket_refunds_costs_nothing() -> None:
    tx, arrivals = _shaped_train(50e6, {150: 1.2e6}, bucket=10)
    score = dispersion.score_train(tx, arrivals, 200, WIRE)
    assert score.pauses == 1
    assert score.rate_bps == pytest.approx(50e6, rel=0.02)


def test_frequent_stretched_gaps_are_not_pauses() -> None:
    # Competing traffic: every fifth gap five times as long, our packets queued throughout.
    gap = WIRE * 8 * 1e9 / 100e6
    tx = {i: i * 10_000 for i in range(200)}
    t, arrivals = 5e6, []
    for i in range(200):
        t += gap * (5 if i % 5 == 0 else 1)
        arrivals.append((i, round(t)))
    score = dispersion.score_train(tx, arrivals, 200, WIRE)
    assert score.pauses == 0
    assert score.rate_bps is not None and score.rate_bps < 70e6
