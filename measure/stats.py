"""Summary statistics of RTT samples, defined as the tools people compare against do."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

from tcpwizard.measure.model import RttStats

# The odds below which a count of losses is taken as not random at a given loss rate: one
# in a hundred. Where it decides (advice/idle_loss.py, measure/probes/availbw.py), a path
# with random loss at exactly the rate tested is misread once in a hundred tests, and only
# where the other evidence of that reading held too.
SIGNIFICANCE = 0.01


def binomial_at_most(n: int, k: int, p: float) -> float:
    """P(X <= k) for X ~ Binomial(n, p); each term in logarithms, so that thousands of
    trials (a stream of 2,000 packets) neither overflow a float nor lose it to underflow."""
    if k < 0:
        return 0.0
    if p <= 0.0 or k >= n:
        return 1.0
    if p >= 1.0:
        return 0.0
    log_p, log_q = math.log(p), math.log1p(-p)
    head = math.lgamma(n + 1)
    total = math.fsum(
        math.exp(head - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * log_p + (n - i) * log_q)
        for i in range(k + 1)
    )
    return min(1.0, total)


def binomial_at_least(n: int, k: int, p: float) -> float:
    """P(X >= k) for X ~ Binomial(n, p)."""
    return max(0.0, 1.0 - binomial_at_most(n, k - 1, p))


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default), q in 0..100."""
    if not sorted_values:
        raise ValueError("no values")
    if len(sorted_values) == 1:
        return float(sorted_values[0])
    pos = (len(sorted_values) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    frac = pos - lo
    return float(sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * frac)


def rtt_stats(samples_ms: Sequence[float], sent: int, method: str) -> RttStats | None:
    """None when nothing came back. mdev is the population standard deviation (iputils
    ping: sqrt(mean(x^2) - mean(x)^2)); jitter is the mean absolute difference of
    consecutive samples in send order (RFC 3550's D without its smoothing)."""
    if not samples_ms or sent <= 0:
        return None
    n = len(samples_ms)
    ordered = sorted(samples_ms)
    mean = sum(samples_ms) / n
    mdev = math.sqrt(max(0.0, sum(x * x for x in samples_ms) / n - mean * mean))
    diffs = [abs(b - a) for a, b in itertools.pairwise(samples_ms)]
    jitter = sum(diffs) / len(diffs) if diffs else 0.0
    loss = max(0.0, 100.0 * (sent - n) / sent)
    return RttStats(
        min=ordered[0],
        p50=percentile(ordered, 50),
        p95=percentile(ordered, 95),
        mean=mean,
        mdev=mdev,
        max=ordered[-1],
        loss_pct=loss,
        jitter=jitter,
        samples=n,
        method=method,
    )
