"""The hops of a path: what TTL-limited probes saw, and what it means (pure functions).

Two kinds of loss look the same in one hop's numbers and mean opposite things:

* real loss: packets are lost on a link; every probe that must cross that link can be lost,
  so the loss starts at the hop after the link and carries on to every later hop and to the
  destination;
* ICMP rate limiting: a router answers only so many probes per second that expire *at it*
  (Linux: a burst of 6, then one per net.ipv4.icmp_ratelimit). Probes that pass through it
  are forwarded at full speed, so later hops show none of that loss.

So a hop's loss is split into the share later hops carry (real, the minimum over this and
every later hop's loss rate, pooled statistics below) and the excess (the hop's own ICMP rate
limit). Loss begins at the first hop from which every later hop's loss is consistent with one
pooled rate above zero. The RTT jump is the largest rise of the minimum RTT over the hops
before it, when it is a sizeable part of the end-to-end RTT.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from tcpwizard.measure.probes.syntrace_model import SynTrace

# A hop's loss above what later hops carry is ICMP rate limiting when it is at least this
# share and at least MIN_EXCESS_LOST probes.
RATE_LIMIT_EXCESS = 0.03
MIN_EXCESS_LOST = 3
# The RTT jump must be at least this share of the end-to-end minimum RTT and this many ms.
JUMP_SHARE = 0.25
JUMP_MIN_MS = 1.0
# Real loss is claimed from this many lost probes on (over the hops from where it begins).
MIN_LOST = 3
# Binomial test level: a hop's loss count below this probability under the pooled rate
# means its loss is lower than the pooled rate (so loss does not start before it).
CONSISTENT_P = 0.01


@dataclass(frozen=True)
class ProbeReply:
    """One answer to a probe: which probe, who answered, how, when."""

    seq: int
    kind: str  # "ttl" (time exceeded), "dest" (the target answered), "mtu", "unreach"
    address: str
    rtt_ms: float
    mtu: int | None = None  # for "mtu": the next-hop MTU the router reported


@dataclass(frozen=True)
class Hop:
    ttl: int
    address: str | None  # the most frequent answering address; None: no answer at all
    name: str | None
    other_addresses: tuple[str, ...]  # more than one router answered at this TTL (ECMP)
    sent: int
    received: int
    rtt_min_ms: float | None
    rtt_median_ms: float | None
    loss_pct: float
    real_loss_pct: float  # the part of the loss that later hops carry
    rate_limited: bool  # loss here that does not carry on: the router limits its ICMP
    destination: bool


@dataclass(frozen=True)
class MtuFinding:
    """The path MTU and where it is set."""

    local_mtu: int  # this host's interface toward the target
    path_mtu: int | None  # largest packet that reached the target (None: not measured)
    hop: int | None  # the hop (TTL) whose next link is narrower: the router that said so
    hop_address: str | None
    blackhole: bool  # large packets vanish and no "fragmentation needed" comes back
    blackhole_hop: int | None  # the last hop large packets reach (the silent router)
    blackhole_address: str | None
    probes: int
    note: str


@dataclass(frozen=True)
class PathHops:
    """`tcpwizard path HOST`."""

    host: str
    address: str
    family: int  # 4 or 6
    method: str  # icmp, udp, tcp
    port: int | None
    hops: tuple[Hop, ...]
    reached: bool
    rtt_jump_hop: int | None
    rtt_jump_ms: float | None
    loss_start_hop: int | None
    end_loss_pct: float  # the destination's (or last answering hop's) real loss
    rate_limited_hops: tuple[int, ...]
    mtu: MtuFinding | None
    probes_sent: int
    elapsed_s: float
    notes: tuple[str, ...]
    gateway: str | None = None  # this host's next hop toward the target (route fixes)
    dev: str | None = None
    # TCP SYNs with this host's options, and the options each router quoted back
    # (measure/probes/syntrace.py); None when not probed (not root, or turned off).
    syn: SynTrace | None = None


@dataclass(frozen=True)
class HopCounts:
    """The raw tally of one TTL, before the analysis."""

    ttl: int
    sent: int
    rtts: tuple[float, ...]
    addresses: tuple[str, ...]  # one per answer
    destination: bool
    span_s: float = 0.0  # from the first probe of this TTL to its last


def cadence_limited(c: HopCounts) -> bool:
    """Most probes unanswered, and the answers no more than a token bucket lets through
    (Linux: a burst of 6, then one a second): the hop answers at its own pace, whatever
    reaches it. The only sign there is at the target itself, which has no later hop."""
    got = len(c.rtts)
    return c.sent >= 12 and got >= 3 and got <= c.sent * 0.5 and got <= 8 + 2.0 * c.span_s


def binom_cdf(k: int, n: int, p: float) -> float:
    """P(X <= k) for X ~ Binomial(n, p)."""
    if p <= 0:
        return 1.0
    if p >= 1:
        return 1.0 if k >= n else 0.0
    total = 0.0
    log_p, log_q = math.log(p), math.log1p(-p)
    for i in range(0, min(k, n) + 1):
        log_c = math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1)
        total += math.exp(log_c + i * log_p + (n - i) * log_q)
    return min(1.0, total)


def _ll(pairs: list[tuple[int, int]]) -> tuple[float, float]:
    """(log-likelihood, rate) of (sent, lost) pairs under one maximum-likelihood rate."""
    sent = sum(s for s, _ in pairs)
    lost = sum(x for _, x in pairs)
    if sent == 0:
        return 0.0, 0.0
    p = lost / sent
    ll = 0.0
    for s, x in pairs:
        if x:
            ll += x * math.log(p)
        if s - x:
            ll += (s - x) * math.log1p(-p) if p < 1 else -math.inf
    return ll, p


def excess_hops(counts: list[tuple[int, int]]) -> set[int]:
    """Indices whose loss is clearly above what every later hop carries (pooled): that loss
    stays at the hop, so it is the router's ICMP rate limit, not loss on the path."""
    out: set[int] = set()
    for i, (s, x) in enumerate(counts[:-1]):
        later = counts[i + 1 :]
        ls = sum(a for a, _ in later)
        lx = sum(b for _, b in later)
        if s == 0 or ls == 0 or x == 0:
            continue
        p = lx / ls
        # Clearly more (by RATE_LIMIT_EXCESS) and unlikely under the later hops' rate.
        if x / s - p >= RATE_LIMIT_EXCESS and (
            p == 0 or 1.0 - binom_cdf(x - 1, s, p) < CONSISTENT_P
        ):
            out.add(i)
    return out


def loss_start(counts: list[tuple[int, int]]) -> tuple[int | None, float]:
    """(index where real loss begins, its rate) over (sent, lost) pairs of the answering
    hops in path order; (None, 0.0) when no hop lost anything but its own ICMP.

    Real loss only grows along the path, so the hops (less those whose loss stays at them)
    are fitted with a change point: one rate before it, a higher one from it on; the split
    with the highest likelihood wins over a single rate for the whole path only when it
    gains more than a parameter's worth (AIC).
    """
    skip = excess_hops(counts)
    idx = [i for i in range(len(counts)) if i not in skip]
    pairs = [counts[i] for i in idx]
    if not pairs or sum(x for _, x in pairs) == 0:
        return None, 0.0
    best_ll, best_p = _ll(pairs)
    best_k = 0
    for k in range(1, len(pairs)):
        ll0, p0 = _ll(pairs[:k])
        ll1, p1 = _ll(pairs[k:])
        if p1 > p0 and ll0 + ll1 - 1.0 > best_ll:
            best_ll, best_p, best_k = ll0 + ll1 - 1.0, p1, k
    if best_p <= 0 or sum(x for _, x in pairs[best_k:]) < MIN_LOST:
        return None, 0.0  # one or two lost probes tell nothing (more probes: --count)
    return idx[best_k], best_p


def analyse(
    counts: list[HopCounts], names: dict[str, str] | None = None
) -> tuple[tuple[Hop, ...], int | None, float | None, int | None, float, tuple[int, ...]]:
    """Hops, RTT jump (hop, ms), loss start hop, end loss %, rate-limited hops."""
    names = names or {}
    cadence = {c.ttl for c in counts if cadence_limited(c)}
    answering = [c for c in counts if c.rtts and c.ttl not in cadence]
    pairs = [(c.sent, c.sent - len(c.rtts)) for c in answering]
    start_i, pooled = loss_start(pairs)
    start_ttl = answering[start_i].ttl if start_i is not None else None
    hops: list[Hop] = []
    limited: list[int] = []
    for c in counts:
        lost = c.sent - len(c.rtts)
        loss = lost / c.sent if c.sent else 0.0
        real = pooled if start_ttl is not None and c.ttl >= start_ttl else 0.0
        real = min(real, loss)
        excess = loss - real
        is_limited = bool(c.rtts) and (
            (excess >= RATE_LIMIT_EXCESS and excess * c.sent >= MIN_EXCESS_LOST) or c.ttl in cadence
        )
        if is_limited:
            limited.append(c.ttl)
        address: str | None = None
        others: tuple[str, ...] = ()
        if c.addresses:
            freq: dict[str, int] = {}
            for a in c.addresses:
                freq[a] = freq.get(a, 0) + 1
            ranked = sorted(freq, key=lambda a: (-freq[a], a))
            address, others = ranked[0], tuple(ranked[1:])
        hops.append(
            Hop(
                ttl=c.ttl,
                address=address,
                name=names.get(address) if address else None,
                other_addresses=others,
                sent=c.sent,
                received=len(c.rtts),
                rtt_min_ms=min(c.rtts) if c.rtts else None,
                rtt_median_ms=statistics.median(c.rtts) if c.rtts else None,
                loss_pct=100.0 * loss,
                real_loss_pct=100.0 * real,
                rate_limited=is_limited,
                destination=c.destination,
            )
        )
    jump_hop, jump_ms = rtt_jump(hops)
    end = answering[-1] if answering else None
    end_loss = 100.0 * pooled if end is not None and start_ttl is not None else 0.0
    return tuple(hops), jump_hop, jump_ms, start_ttl, end_loss, tuple(limited)


def rtt_jump(hops: list[Hop]) -> tuple[int | None, float | None]:
    """The hop whose minimum RTT rises most above every hop before it."""
    mins = [(h.ttl, h.rtt_min_ms) for h in hops if h.rtt_min_ms is not None]
    if len(mins) < 1:
        return None, None
    end = mins[-1][1]
    best: tuple[int | None, float] = (None, 0.0)
    floor = 0.0
    for ttl, m in mins:
        assert m is not None
        rise = m - floor
        if rise > best[1]:
            best = (ttl, rise)
        floor = max(floor, m)
    jump_ttl, rise = best
    if jump_ttl is None or end is None or rise < max(JUMP_MIN_MS, JUMP_SHARE * end):
        return None, None
    return jump_ttl, rise
