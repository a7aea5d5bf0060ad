"""`bufferbloat`: a bottleneck queue so deep that the transfer's own RTT under load is far
above the idle RTT — every interactive flow sharing that queue waits behind it.

A bulk transfer through a bloated drop-tail queue still fills the path, so throughput looks
healthy while latency is ruined: then latency is what hurts and `bufferbloat` is the verdict.
When something else holds the rate, the bloat is a finding beside that verdict.

The fix: an AQM at the bottleneck (fq_codel, cake: they keep the standing queue near 5 ms
whatever the buffer) or a smaller buffer. Where the bottleneck is this host's own link (its
interface no faster than the path), the queue is its qdisc and the command is given for it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from tcpwizard.advice.evidence import (
    HEALTHY_SHARE,
    Candidate,
    Direction,
    Evidence,
    directions,
    probe_capacity,
    sender_cc,
    shared_measured,
)
from tcpwizard.advice.path_jitter import queue_free_rtt_ms
from tcpwizard.advice.rules.policer import model_based
from tcpwizard.checks.model import Fix, HostRole
from tcpwizard.measure.engine.loaded_rtt import LoadedRtt, loaded_rtt, mss_of, plateau_mbps
from tcpwizard.measure.engine.rates import IP_TCP_HEADERS

# The standing queue, in bandwidth-delay products, above which the buffer is bloated. One
# BDP is the classic buffer (Villamizar & Song 1994): what a single loss-based flow needs to
# keep the link busy after halving its window. Through a buffer of B BDPs (B >= 1) a Reno
# window swings between (1 + B)/2 and 1 + B BDPs, so the queue between (B - 1)/2 and B, its
# median about (3B - 1)/4: 0.5 BDP for the classic buffer, never above 1. A median of 1.5
# BDPs needs B >= 2.3: more than any flow needs, kept only as delay (the lab's 8 BDP buffer
# shows ~5.7). The half-BDP margin over the classic buffer's worst case covers the smoothed
# RTT's lag.
BLOAT_BDPS = 1.5
# A queue others keep full (the path measured shared) reads as the buffer itself, not as
# one flow's sawtooth through it: that buffer is bloated where one loss-based flow's median
# queue would pass BLOAT_BDPS, (3B - 1)/4 >= BLOAT_BDPS, so B >= (4 BLOAT_BDPS + 1)/3 = 2.33
# BDPs (three Reno flows through a 1.6 BDP buffer at 307 ms held it full: 472 ms under load,
# read `bufferbloat`, scenario matrix 20261208.7).
SHARED_BLOAT_BDPS = (4 * BLOAT_BDPS + 1) / 3
# Below this much queueing delay no interactive use notices (a 100 Hz frame, 10 ms) and a
# short path's BDP multiple is only its timer noise.
BLOAT_MIN_MS = 10.0
# Our own interface no faster than this share above the path's capacity: its queue is the
# bottleneck's (headers and the probe's error: 10 %).
OWN_LINK_SHARE = 1.1
AQM_TARGET = "fq_codel"
# The bloat's two lines that agree (a standing queue of at least BLOAT_BDPS of the path's
# BDP, and a wait of at least BLOAT_MIN_MS): the rules' two-line band (advice/
# calibration.py TWO_LINES), whose worth the matrix calibrates.
BLOATED = 0.8
# A queue this transfer did not fill: it ran below the path's healthy share while others'
# traffic held the bottleneck (the path measured shared, or others' queue standing). The
# sharing holds the rate and the bloat is a finding beside it (the module's rule), so its
# confidence stays under the least the sharing is named with (cross_traffic.py
# CROSS_SHARED_CONFIDENCE, 0.5), where congestion's losses on a full share stand too
# (congestion.py FULL_SHARE_LOSS_CONFIDENCE): two Reno flows through a 4.3 BDP buffer at
# 2 Gbit/s x 158 ms left this transfer 7 Mbit/s and read `bufferbloat` at 0.8 (scenario
# matrix 20261228.20).
BESIDE_SHARING = 0.45


# Linux BBR (v1) holds its window at cwnd_gain 2 x the BDP plus a quantization budget:
# three TSO goals (each its pacing rate >> sk_pacing_shift 10, about 1 ms of it, at least 2
# segments above 1.2 Mbit/s, at most one 64 KB GSO packet) and 2 segments in ProbeBW's up
# phase (tcp_bbr.c bbr_quantization_budget). Its standing queue is up to 1 BDP plus that
# budget whatever the buffer: a queue within it shows the sender's design, not a bloated
# buffer (BBR at 7.9 Mbit/s x 2.5 ms: 10 ms of queue, 8 segments of budget over a BDP of
# less than 2, read `bufferbloat`).
BBR_CWND_GAIN = 2.0
BBR_TSO_GOALS = 3
BBR_PROBE_SEGMENTS = 2
BBR_MIN_TSO_SEGMENTS = 2
PACING_SHIFT_S = 1 / 1024
GSO_MAX_BYTES = 65536


def bbr_own_queue_ms(idle_ms: float, rate_mbps: float, mss: int) -> float:
    """The standing queue a BBR sender keeps by design at `rate_mbps` (IP layer)."""
    if rate_mbps <= 0:
        return 0.0
    goal = min(GSO_MAX_BYTES, rate_mbps * 1e6 / 8 * PACING_SHIFT_S)
    segments = BBR_TSO_GOALS * max(BBR_MIN_TSO_SEGMENTS, goal // mss) + BBR_PROBE_SEGMENTS
    wire_ms = (mss + IP_TCP_HEADERS) * 8 / (rate_mbps * 1e3)
    return (BBR_CWND_GAIN - 1) * idle_ms + segments * wire_ms


# Both ways at once (`check --quick` with serve): a direction's round trip holds its own
# data's queue and, under its ACKs, the other direction's. A healthy other way queues at most
# the classic buffer, one BDP (above), or, sent by BBR, its own design's queue.
CLASSIC_BUFFER_BDPS = 1.0


def ack_side_queue_ms(ev: Evidence, d: Direction, idle_ms: float) -> float:
    """The most queueing a healthy other direction put under this direction's ACKs: 0
    unless both directions ran at the same time."""
    if ev.transfer is None or not ev.transfer.at_once:
        return 0.0
    other = next((o for o in directions(ev) if o.name != d.name and o.current), None)
    if other is None or other.current is None:
        return 0.0
    plateau = plateau_mbps(other.current)
    if model_based(sender_cc(other)) and plateau is not None:
        return bbr_own_queue_ms(idle_ms, plateau, mss_of(other.current))
    return CLASSIC_BUFFER_BDPS * idle_ms


def _own_queue(ev: Evidence, d: Direction, rtt: LoadedRtt) -> LoadedRtt:
    """The RTT under load less what a healthy other direction queued under the ACKs."""
    extra = ack_side_queue_ms(ev, d, rtt.idle_ms)
    return dataclasses.replace(rtt, median_ms=max(rtt.idle_ms, rtt.median_ms - extra))


def _bbrs_own(d: Direction, rtt: LoadedRtt) -> bool:
    m = d.current
    if m is None or not model_based(sender_cc(d)):
        return False
    plateau = plateau_mbps(m)
    return plateau is not None and rtt.queue_ms <= bbr_own_queue_ms(rtt.idle_ms, plateau, mss_of(m))


def bloated(rtt: LoadedRtt | None, bdps: float = BLOAT_BDPS) -> bool:
    return rtt is not None and rtt.queue_bdps >= bdps and rtt.queue_ms >= BLOAT_MIN_MS


def _others_hold_the_rate(ev: Evidence, d: Direction) -> bool:
    """This transfer ran below the healthy share of the path while others' traffic shared
    its bottleneck: the queue is theirs, and so is the limit."""
    # Here, not at the top: the capacity view reads a rule module (host_drops), so it and
    # the helpers built on it load after this package.
    from tcpwizard.advice.capacity_view import capacity as _capacity
    from tcpwizard.advice.capacity_view import steady_mbps
    from tcpwizard.advice.others_queue import others_queue

    cur, cap = d.current, _capacity(ev, d)
    if cur is None or cap is None or steady_mbps(cur) >= HEALTHY_SHARE * cap:
        return False
    return shared_measured(ev, d) or others_queue(ev, d) is not None


def _rtt(ev: Evidence, d: Direction) -> LoadedRtt | None:
    # From the top of the path's own delay jitter, not its bottom (advice/path_jitter.py).
    idle = queue_free_rtt_ms(ev, d)
    return loaded_rtt(d.current, idle) if d.current is not None else None


def _queue_here(ev: Evidence, d: Direction) -> bool:
    """The sender is this host and its own interface is the bottleneck: its qdisc holds the
    queue."""
    if d.sender_role != "local" or d.sender is None or d.sender.interface is None:
        return False
    speed = d.sender.interface.speed_mbps
    cap = probe_capacity(ev, d)
    return bool(speed and cap and speed <= OWN_LINK_SHARE * cap.mbps)


def aqm_fixes(ev: Evidence, d: Direction, here: bool) -> tuple[Fix, ...]:
    if here and d.sender is not None and d.sender.interface is not None:
        iface = d.sender.interface.name
        return (
            Fix(
                id="bufferbloat-fq-codel",
                kind="other",
                host=d.sender_role,
                key=f"qdisc {iface}",
                value=AQM_TARGET,
                command=f"tc qdisc replace dev {iface} root {AQM_TARGET}",
                why="this host's own link is the bottleneck: an AQM on its qdisc keeps the "
                "standing queue near 5 ms without losing throughput",
                guideline="RFC 8290 (FQ-CoDel); RFC 7567 (AQM recommendations)",
                answers=("bufferbloat",),
            ),
        )
    cap = probe_capacity(ev, d)
    bw = f" bandwidth {cap.mbps * 0.95:.0f}mbit" if cap else ""
    return (
        Fix(
            id="bufferbloat-aqm-bottleneck",
            kind="other",
            host="path",
            key="qdisc at the bottleneck",
            value="cake",
            command=f"tc qdisc replace dev IF root cake{bw}  # on the bottleneck's router",
            why="the queue is in a device on the path: an AQM there (cake or fq_codel), or a "
            "buffer of about one bandwidth-delay product, ends the delay; shaping slightly "
            "below the link moves the queue to where the AQM runs",
            guideline="RFC 7567 (AQM recommendations); RFC 8290 (FQ-CoDel)",
            answers=("bufferbloat",),
        ),
    )


def _line(rtt: LoadedRtt) -> str:
    return (
        f"RTT under load {rtt.median_ms:.0f} ms median, {rtt.p90_ms:.0f} ms p90 against "
        f"{rtt.idle_ms:.1f} ms idle: a standing queue of {rtt.queue_bdps:.1f} bandwidth-delay "
        f"products; responsiveness {rtt.rpm:.0f} RPM (round trips per minute under load)"
    )


def _ack_side_line(rtt: LoadedRtt, own: LoadedRtt) -> tuple[str, ...]:
    if own.median_ms >= rtt.median_ms:
        return ()
    return (
        f"both directions ran at once: up to {rtt.median_ms - own.median_ms:.0f} ms of it is "
        "the other way's data ahead of the ACKs; the rest, "
        f"{own.queue_bdps:.1f} bandwidth-delay products, is this way's own queue",
    )


def rule(ev: Evidence, d: Direction) -> Candidate | None:
    rtt = _rtt(ev, d)
    if rtt is None:
        return None
    own = _own_queue(ev, d, rtt)
    if not bloated(own, SHARED_BLOAT_BDPS if shared_measured(ev, d) else BLOAT_BDPS):
        return None
    if _bbrs_own(d, own):
        return None
    here = _queue_here(ev, d)
    host: HostRole = d.sender_role if here else "path"
    where = "this host's own qdisc" if here else "a device on the path (the bottleneck)"
    return Candidate(
        d.name,
        "bufferbloat",
        BESIDE_SHARING if _others_hold_the_rate(ev, d) else BLOATED,
        host,
        f"{d.name}: the bottleneck's queue is bloated: under load every round trip waits "
        f"{rtt.queue_ms:.0f} ms in {where}, so interactive traffic beside a transfer crawls "
        "(responsiveness falls from "
        f"{60_000 / rtt.idle_ms:.0f} to {rtt.rpm:.0f} round trips per minute). An AQM "
        "(fq_codel, cake) at the bottleneck or a smaller buffer keeps the rate and ends the "
        "delay.",
        (_line(rtt), *_ack_side_line(rtt, own)),
        fixes=aqm_fixes(ev, d, here),
    )


def prefer(best: Candidate, candidates: Sequence[Candidate]) -> Candidate:
    """A transfer that reached the path's capacity through a bloated queue: latency is what
    hurts, so bufferbloat is the verdict."""
    if best.factor != "path-capacity":
        return best
    bloat = [c for c in candidates if c.factor == "bufferbloat"]
    return max(bloat, key=lambda c: c.confidence) if bloat else best


def beside(best: Candidate, candidates: Sequence[Candidate]) -> tuple[str, ...]:
    """Bufferbloat as a finding beside another verdict: its evidence, one line per way."""
    if best.factor == "bufferbloat":
        return ()
    return tuple(
        f"also, {c.direction}: bufferbloat — {c.evidence[0]}; fix: {c.fixes[0].command}"
        for c in candidates
        if c.factor == "bufferbloat" and c.fixes
    )
