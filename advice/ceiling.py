"""A rate ceiling: a transfer whose delivered rate sat flat at its highest for round trips.

A window that keeps growing (slow start, congestion avoidance) raises the rate until
something stops it. When the rate then holds at one value for several round trips while
the window still grows, the excess only queues: that value is a bottleneck's rate. A flow
held by random loss never sits at a ceiling (it collapses at each loss and regrows without a
top), so a loss-based sender whose losses go on while it keeps returning to the same ceiling
is the sawtooth of a full path, not a window held down by loss. The ceiling is the path's
rate, measured from delivered bytes, and may stand in for a probe that could not send as
fast (a sender-limited probe on a multi-gigabit path).
"""

from __future__ import annotations

from tcpwizard.measure.model import ModeResult

# Samples within this share of the highest are at the ceiling: the sampler wakes up to ~2 ms
# late on a busy host, 2 % of the 100 ms interval a transfer is sampled at.
FLAT = 0.02
# The run at the ceiling must span this many round trips (and at least MIN_SAMPLES
# intervals): a window that still grows adds a segment per round trip, so a top held that
# long is a rate, not one window's moment.
MIN_RTTS = 2.0
MIN_SAMPLES = 3


def ceiling_mbps(m: ModeResult, rtt_ms: float) -> float | None:
    """The rate `m` sat at, flat within FLAT of its highest sample, for at least MIN_RTTS
    round trips and MIN_SAMPLES consecutive intervals; None when it never did."""
    samples = m.samples
    if len(samples) < MIN_SAMPLES or rtt_ms <= 0:
        return None
    top = max(s.goodput_mbps for s in samples)
    if top <= 0:
        return None
    run: list[float] = []  # times of the consecutive samples at the top
    prev_t = 0.0
    for s in samples:
        if s.goodput_mbps >= (1.0 - FLAT) * top:
            if not run:
                run.append(prev_t)  # the interval's start
            run.append(s.t_s)
            if len(run) - 1 >= MIN_SAMPLES and run[-1] - run[0] >= MIN_RTTS * rtt_ms / 1e3:
                return top
        else:
            run = []
        prev_t = s.t_s
    return None
