"""A loss-based sender's sawtooth through a queue shallower than the BDP: its own overflow
is the path's buffer (`path-capacity`, no host fix), told from random loss that holds its
window below the BDP (`congestion`). Synthetic transfers built from the window law; the
scenario matrix runs both on real paths (docs/bench-matrix-two-seeds.md)."""

from __future__ import annotations

import pytest

from tcpwizard.advice.diagnose import Evidence, diagnose
from tcpwizard.advice.evidence import HEALTHY_SHARE
from tcpwizard.advice.window_law import backoff, sawtooth_utilisation
from tcpwizard.checks.model import HostAudit
from tcpwizard.measure.model import ModeResult, TcpInfoSample, TransferResult
from tests.model_builders import path, samples

TUNED = (
    ("net.ipv4.tcp_rmem", "4096 131072 33554432"),
    ("net.ipv4.tcp_wmem", "4096 16384 33554432"),
    ("net.ipv4.tcp_window_scaling", "1"),
)
MSS = 1448
WIRE = MSS + 52
LINE, IDLE = 80.0, 10.0  # Mbit/s at the IP layer, ms
BDP_SEGMENTS = LINE * 1e6 / 8 * IDLE / 1e3 / WIRE  # ~67


def _audit(cc: str) -> HostAudit:
    return HostAudit("h", "6.18", (), cc, TUNED)


def _sawtooth(peak_bdps: float, beta: float, cc: str = "reno", lost_per_cycle: int = 3) -> Evidence:
    """A window cycling from beta x peak to peak (BDPs) one segment per round trip, sampled
    every 0.1 s over 3 s: below one BDP it sends its window per round trip, above it the line
    is full and the excess stands in the queue."""
    dt, n = 0.1, 30
    low, top = beta * peak_bdps * BDP_SEGMENTS, peak_bdps * BDP_SEGMENTS
    cwnd, total, infos, goodputs = low, 0, [], []
    for _ in range(n):
        rtt = IDLE * max(1.0, cwnd / BDP_SEGMENTS)
        goodputs.append(LINE * MSS / WIRE * min(1.0, cwnd / BDP_SEGMENTS))
        infos.append(TcpInfoSample(round(rtt * 1e3), 100, round(cwnd), total, 0, 0, 0, 0, MSS))
        cwnd += dt * 1e3 / rtt  # one segment per round trip
        if cwnd >= top:
            cwnd, total = low, total + lost_per_cycle
    return _evidence(goodputs, infos, total, cc)


def _random_loss(window_bdps: float, cc: str = "reno") -> Evidence:
    """A window random loss holds at window_bdps of the BDP: no queue, a loss every few
    samples, the rate its window gives."""
    n, infos, goodputs, total = 30, [], [], 0
    for i in range(n):
        cwnd = window_bdps * BDP_SEGMENTS * (0.75 + 0.25 * (i % 4) / 3)
        total += 2 if i % 4 == 3 else 0
        goodputs.append(LINE * MSS / WIRE * cwnd / BDP_SEGMENTS)
        infos.append(
            TcpInfoSample(round((IDLE + 0.1) * 1e3), 100, round(cwnd), total, 0, 0, 0, 0, MSS)
        )
    return _evidence(goodputs, infos, total, cc)


def _evidence(goodputs: list[float], infos: list[TcpInfoSample], total: int, cc: str) -> Evidence:
    dt = 0.1
    mbps = sum(goodputs) / len(goodputs)
    m = ModeResult(
        "autotune", "up", 1, round(mbps * 1e6 / 8 * dt * len(goodputs)), dt * len(goodputs),
        mbps, 4_000_000, max(total, 1), samples(goodputs, infos, dt=dt), 0.0, 0.0, 1.0, cc,
    )  # fmt: skip
    return Evidence(_audit(cc), _audit(cc), path(IDLE, LINE), TransferResult((m,)))


def test_reno_utilisation_through_no_queue_is_three_quarters() -> None:
    """The classic result: Reno through no buffer keeps the line 3/4 busy (window W/2..W,
    W = 1 BDP); one BDP of buffer keeps it full."""
    assert sawtooth_utilisation(0.0, 0.5) == pytest.approx(0.75)
    assert sawtooth_utilisation(1.0, 0.5) == 1.0
    assert sawtooth_utilisation(0.35, 0.5) == pytest.approx(0.922, abs=0.001)


def test_a_gentler_decrease_keeps_the_line_busier() -> None:
    """CUBIC keeps 0.7 of its window: through 0.43 BDP it never drops below the BDP."""
    assert backoff("cubic") == pytest.approx(0.7, abs=0.001)
    assert backoff("htcp") == 0.5  # adaptive: its least
    assert sawtooth_utilisation(0.2, backoff("cubic")) > sawtooth_utilisation(0.2, 0.5)
    assert sawtooth_utilisation(0.43, backoff("cubic")) == 1.0


@pytest.mark.parametrize("queue_bdps", [0.2, 0.25])
def test_a_reno_sawtooth_through_a_shallow_queue_is_the_path(queue_bdps: float) -> None:
    """Its losses come at the full queue and its rate sits below the plain healthy share:
    the path's buffer, named with no host fix."""
    ev = _sawtooth(1.0 + queue_bdps, 0.5)
    d = diagnose(ev)
    v = d.verdict
    assert (v.limiting_factor, v.host_to_fix) == ("path-capacity", None)
    assert any("overflowing under its own window" in e for e in v.evidence)
    assert "shallower than the path's BDP" in v.explanation
    assert not [f for f in d.fixes if f.host in ("local", "peer")]


def test_the_sawtooth_shows_below_the_plain_healthy_share() -> None:
    """The builder's premise: without the law such a transfer would fall under the share."""
    ev = _sawtooth(1.25, 0.5)
    m = ev.transfer.modes[0] if ev.transfer else None
    assert m is not None and m.throughput_mbps / LINE < HEALTHY_SHARE


@pytest.mark.parametrize("window_bdps", [0.3, 0.6])
def test_random_loss_holding_the_window_below_the_bdp_stays_congestion(
    window_bdps: float,
) -> None:
    """A window loss holds below the BDP fills neither the line nor a queue: congestion."""
    v = diagnose(_random_loss(window_bdps)).verdict
    assert (v.limiting_factor, v.host_to_fix) == ("congestion", "local")


def test_a_model_based_sender_gets_no_sawtooth_allowance() -> None:
    """BBR does not halve on loss: the law is not its own, its rate is judged plainly."""
    v = diagnose(_sawtooth(1.3, 0.5, cc="bbr")).verdict
    assert v.limiting_factor != "path-capacity" or not any(
        "overflowing under its own window" in e for e in v.evidence
    )
