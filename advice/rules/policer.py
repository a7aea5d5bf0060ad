"""`policer`: a token bucket on the path that drops what exceeds a contracted rate.

What sets it apart (Flach et al., "An Internet-Wide Analysis of Traffic Policing", SIGCOMM
2016): the transfer settles on a rate plateau well below the line rate the capacity probe saw
(the probe's short trains fit the bucket), loses segments there, yet its RTT stays at the idle
RTT — a policer has no queue, where a shaper or a full bottleneck buffer delays what it
cannot send at once. Random loss is told apart by the loss bound: random drops at the rate a
loss-based sender saw would hold it at the Mathis bound; a policer drops many segments per
event (its bucket empties, everything above the rate goes) and the sender runs far above it.

The policed rate is the plateau measured from delivered bytes (measure/engine/loaded_rtt.py).
The fix is on the sender (pace below the policed rate: losses stop, and with them the
retransmissions and the stalls) or with the network's operator (a higher contracted rate);
parallel streams only share the same bucket and lose more.

Why one module of this size: one rule; its tests (plateau, the bucket's burst, losses with a
queue, the sender's backoff) are each a law stated beside its code, and their order is the
rule.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tcpwizard.advice import idle_loss
from tcpwizard.advice.evidence import (
    CHRONO_SHARE,
    CROSS_FREE_SHARE,
    HEALTHY_SHARE,
    Candidate,
    Direction,
    Evidence,
    chrono,
    other_mode,
    probe_capacity,
    sender_cc,
)
from tcpwizard.advice.loss_episodes import (
    episodes,
    late_retransmits,
    loss_share,
    settled_loss,
    settled_losses,
    settled_mbps,
)
from tcpwizard.advice.model import Verdict, WizardGap
from tcpwizard.advice.path_jitter import queue_free_rtt_ms
from tcpwizard.advice.ramp import still_ramping
from tcpwizard.advice.rules import host_drops
from tcpwizard.advice.window_law import (
    LOSS_BASED,
    audited_window,
    backoff,
    lossy_window_share,
    mathis_mbps,
    sawtooth_utilisation,
    window_limit_mbps,
)
from tcpwizard.checks.model import Fix, HostAudit, HostRole
from tcpwizard.measure.engine.loaded_rtt import (
    QUEUE_FREE_NOISE_MS,
    LoadedRtt,
    LossPattern,
    delayed_ack_ms,
    loaded_rtt,
    loss_pattern,
    mss_of,
    plateau_mbps,
    window_segments,
)
from tcpwizard.measure.engine.rates import IP_TCP_HEADERS, ip_rate
from tcpwizard.measure.model import IdleLoss, ModeResult
from tcpwizard.measure.observe.capture import FlowDirection
from tcpwizard.measure.observe.conns import ConnObservation
from tcpwizard.measure.probes.dispersion import LOSSY, main_train_bytes
from tcpwizard.units import format_mbps

# Below this share of the line rate the probe saw, the plateau is not the line: TCP/IP
# headers cost 3.5 % and a healthy transfer reaches 85 % (advice/evidence.py HEALTHY_SHARE).
POLICED_SHARE = 0.85
# No standing queue: the median RTT under load within this share of the idle RTT. A loss-
# based sender through a drop-tail buffer of B bytes keeps on average half of it queued, so
# a buffer of 0.2 BDP (already too small for one flow to fill the path) shows as +10 %; less
# is the delay line's and the kernel's timer noise (the srtt's 1/8 smoothing of ~0.1 ms
# jitter), for which NOISE_MS is the floor on short paths: the RTT noise of queue-free
# flows, measured (measure/engine/loaded_rtt.py QUEUE_FREE_NOISE_MS), the same floor by which
# a queue counts as others' (advice/others_queue.py): one reading of one RTT for both.
NO_QUEUE_SHARE = 0.10
NOISE_MS = QUEUE_FREE_NOISE_MS
# A loss-based sender this far above the Mathis bound of its own loss rate lost its
# segments in bursts, not one by one (the congestion rule reads the same bound).
BOUND_LIFT = 3.0
# A policer on an idle path lets the probe's train pass whole: its bucket filled while
# nothing was sent (the probe's trains last ~40 ms, measure/probes/dispersion.py TRAIN_SPAN_S; a
# provider's bucket holds from tens of ms of its rate up). A train losing more than the
# probe's own "small bottleneck queue" share met a queue with no room instead.
TRAIN_LOST = LOSSY
# The deepest bucket a policer plausibly has, in seconds of its own rate: vendors size the
# normal burst at 1.5 s of the contracted rate for TCP traffic and the excess burst at twice
# that (Cisco's single-rate policer guidance, Bc = CIR x 1.5 s / 8); the lab's nftables
# policer holds 1 s plus its burst (lab/policer.py). A train that passed through a bucket
# deeper than this at a plateau's rate was not policed at that rate: random loss, seen
# by a sender whose window is a handful of segments, makes such plateaus too.
BUCKET_MAX_S = 3.0
# A flow sharing a FIFO with others' traffic delivers at most what they leave it, give or
# take its own queue's drain: its first half peaked at 0.93-1.64 x its plateau (IP layer) in
# the scenario matrix's UDP cross-traffic runs; a full bucket passes a flow at the line rate:
# 2.2-7.5 x the plateau in the policer runs whose probe train a small queue lost
# (docs/bench-matrix.md, "Run 9").
BUCKET_BURST = 2.0
# Linux BBR (v1) takes a sampling interval that lost over 50/256 (~20 %, lt_loss_thresh in
# tcp_bbr.c) of its segments for a policer's and paces at the rate it delivered then.
BBR_POLICED_LOSS = 50 / 256
# Pace this far below the policed rate: a bucket never empties when the sender stays
# under its rate, and 10 % covers the plateau's measurement error (within 10 % in the lab).
PACE_SHARE = 0.9


@dataclass(frozen=True)
class Policing:
    """The evidence of a policer on one transfer."""

    policed_mbps: float  # the plateau, IP layer
    line_mbps: float | None  # what the probe saw (None: no probe)
    rtt: LoadedRtt
    loss: float  # fraction of segments retransmitted after the ramp's overshoot (else overall)
    pattern: LossPattern | None
    bound_mbps: float | None  # Mathis bound at that loss (loss-based senders)
    model_based: bool = False  # the sender runs BBR
    loss_settled: bool = False  # `loss` counts only what came after the ramp's overshoot
    # The idle probes that ruled out random loss at `loss` (None: the loss bound did)
    idle: IdleLoss | None = None
    # Or another transfer of the same direction that did (advice/idle_loss.py)
    witness: ModeResult | None = None
    # The share random loss was ruled out at, where not `loss` (BBR's whole transfer)
    tested: float | None = None

    def lines(self) -> tuple[str, ...]:
        out = [
            f"rate plateau {format_mbps(self.policed_mbps)} (IP layer, from delivered bytes "
            "once up to speed)"
            + (
                f", {self.policed_mbps / self.line_mbps:.0%} of the {format_mbps(self.line_mbps)}"
                " line rate the capacity probe saw"
                if self.line_mbps
                else ""
            ),
            f"RTT under load {self.rtt.median_ms:.1f} ms median, {self.rtt.p90_ms:.1f} ms p90 "
            f"against {self.rtt.idle_ms:.1f} ms idle: no queue builds (a shaper or a full "
            "buffer would delay)",
            f"~{self.loss:.1%} of segments retransmitted"
            + (" after the ramp's overshoot" if self.loss_settled else ""),
        ]
        if self.pattern is not None and self.pattern.bursty:
            out.append(
                f"retransmissions in bursts: the busiest fifth of {self.pattern.intervals} "
                f"intervals holds {self.pattern.top_share:.0%} of them"
            )
        if self.model_based:
            out.append(
                "the sender runs BBR, which holds its measured rate through losses that come "
                "at a rate, not at random: a plateau this far below the line with no queue is "
                "a policer's rate"
            )
        p = self.tested if self.tested is not None else self.loss
        if self.tested is not None:
            out.append(
                f"~{p:.1%} lost over the whole transfer: BBR takes a share over "
                f"{BBR_POLICED_LOSS * 256:.0f}/256 for a "
                "policer's and paces at the rate it delivered then"
            )
        if self.idle is not None:
            out.append(
                f"{self.idle.sent} round-trip probes at idle lost {self.idle.lost}, where random "
                f"loss at {p:.1%} loses about {self.idle.sent * p:.0f} (odds "
                f"under {idle_loss.RANDOM_LOSS_ALPHA:.0%}): the segments were lost only above "
                "a rate"
            )
        elif self.witness is not None:
            w = self.witness
            sent = idle_loss.segments_sent(w)
            out.append(
                f"the {w.mode} transfer the same way lost at most {w.retransmits} of its {sent} "
                f"segments ({w.retransmits / sent:.1%}), where random loss at half the "
                f"{p:.1%} loses about {sent * p * idle_loss.WITNESS_SHARE:.0f}: "
                "most segments were lost only above a rate"
            )
        elif self.bound_mbps is not None:
            out.append(
                f"Mathis bound at that loss {format_mbps(self.bound_mbps)}: the sender runs far "
                "above it, so the losses came in bursts, not at random"
            )
        return tuple(out)


def model_based(cc: str) -> bool:
    """A sender that paces at a measured bandwidth (BBR) rather than backing off on loss."""
    return cc.startswith("bbr")


def segment_spacing_ms(
    m: ModeResult, plateau_ip_mbps: float, line_mbps: float | None, cc: str
) -> float:
    """What a flow's own RTT samples carry above the idle RTT with no queue at all: a
    receiver acknowledges every second segment (RFC 1122, RFC 5681), so the first of a pair
    waits for the next to arrive, one segment's spacing later, and a full segment is
    serialized at the bottleneck where the idle probe's small packet was not. A paced
    sender (BBR) spaces its segments at its own rate; one that is not sends them back to
    back at the line rate. (BBR policed at 3 of 8 Mbit/s over 6.3 ms: 4 ms between its
    segments, an RTT under load 2.9 ms above idle and no queue, read as a queue.)"""
    pace = plateau_ip_mbps if model_based(cc) else (line_mbps or plateau_ip_mbps)
    return spacing_ms(mss_of(m), pace, line_mbps)


def spacing_ms(mss: int, pace_mbps: float, line_mbps: float | None) -> float:
    """One full segment's spacing at `pace_mbps` plus its serialization at `line_mbps`
    (IP-layer rates; segment_spacing_ms says why)."""
    wire_bits = (mss + IP_TCP_HEADERS) * 8
    gap = wire_bits / (pace_mbps * 1e3) if pace_mbps > 0 else 0.0
    return gap + (wire_bits / (line_mbps * 1e3) if line_mbps else 0.0)


def no_queue_ms(idle_ms: float) -> float:
    return max(NOISE_MS, NO_QUEUE_SHARE * idle_ms)


def policing(
    m: ModeResult | None,
    idle_ms: float | None,
    line_mbps: float | None,
    cc: str,
    idle: IdleLoss | None = None,
    others: Sequence[ModeResult] = (),
) -> Policing | None:
    """The policer's evidence on one transfer `m`, or None when it does not hold. Without a
    probe (line_mbps None: a live connection, a capture) the plateau is judged against the
    transfer's own delivery-rate peaks, what the line carried while the bucket was full.
    `others`: the check's other transfers of the same direction, witnesses of the path's
    random loss beside the idle probes."""
    if m is None or m.error is not None or m.retransmits <= 0 or m.bytes <= 0:
        return None
    rwnd, _, _ = chrono(m)
    if (rwnd or 0.0) >= CHRONO_SHARE:
        # The receiver's window held the sender: it set the rate, and a flat rate with
        # losses below the line is that window on a lossy path (BBR on small buffers at
        # 0.2-1.9 % random loss in the scenario matrix, docs/bench-matrix.md), not a bucket.
        # (The send-buffer counter undercounts under pacing, so it proves nothing here.)
        return None
    rtt = loaded_rtt(m, idle_ms)
    plateau = plateau_mbps(m)
    if rtt is None or plateau is None or plateau <= 0:
        return None
    spacing = segment_spacing_ms(m, plateau, line_mbps, cc)
    # A window of a handful of segments waits on the receiver's delayed ACK now and then:
    # its samples carry that wait with no queue at all (Reno through a 1.9 Mbit/s bucket, 4
    # segments a window over 16 ms: 7.0 ms above idle, the samples' deviation 4.4 ms).
    waits = delayed_ack_ms(m, window_segments(m), rtt.queue_ms)
    allowed = no_queue_ms(rtt.idle_ms) + spacing + waits
    if rtt.queue_ms > allowed or _queue_at_losses(m, rtt.idle_ms, allowed, model_based(cc)):
        return None  # a queue: a shaper, a full bottleneck buffer, cross traffic
    if still_ramping(m) and not _regrowing(m, rtt.idle_ms, cc):
        # Still climbing at the end (BBR's startup over 309 ms, 16 round trips in 5 s):
        # no plateau yet, a bucket's or any other.
        return None
    line = line_mbps if line_mbps else _burst_peak_mbps(m)
    if line is None or plateau >= POLICED_SHARE * line:
        return None  # the plateau is the line's rate: a bottleneck, not a policer
    mss = mss_of(m)
    settled = settled_loss(m, rtt.idle_ms)
    loss = loss_share(m, rtt.idle_ms)
    bound = None
    ruled_out: IdleLoss | None = None
    witness: ModeResult | None = None
    tested: float | None = None
    if cc in LOSS_BASED:
        # The bound of the loss that held the plateau: what was lost after the ramp's
        # overshoot. Slow start's one burst overflows any queue and says nothing of the
        # rate after it (Reno at 0.27 % random loss, 196 Mbit/s x 13 ms: 165 of its 187
        # retransmits in that burst, 1.5 % overall, a bound of 8.5 Mbit/s "far below" the
        # 25.6 it held, read `policer`; the settled 0.2 % bounds it at 24).
        # Against the settled rate, as the congestion rule reads it: a steady-state law
        # (Reno at 0.38 % random loss over 222 ms ran 7-10 Mbit/s for a second before its
        # first cuts, 3.5 x the bound on average, and settled at 2.5: `policer`).
        bound = mathis_mbps(mss, rtt.idle_ms, loss, cc)
        near_bound = bound is None or settled_mbps(m) <= BOUND_LIFT * bound
        if near_bound and not _burst_episodes(m, rtt.idle_ms, loss):
            ruled_out, witness = _random_ruled_out(idle, loss, others)
            if ruled_out is None and witness is None:
                return None  # random loss explains the rate: the congestion rule speaks
    elif model_based(cc):
        # BBR keeps its rate through light random loss, not through any: at 1.7 % random
        # loss over 519 Mbit/s x 53 ms (2,300 segments a window) its recoveries overlapped
        # and it held 28-46 Mbit/s, flat, with no queue, read `policer` at 0.98 (scenario
        # matrix 20261229.165). Random loss would drop the idle probes too; a bucket passes
        # them (advice/idle_follow_up.py sends more where they could decide).
        ruled_out, witness = _random_ruled_out(idle, loss, others)
        whole = m.retransmits * mss_of(m) / m.bytes
        if ruled_out is None and witness is None and whole >= BBR_POLICED_LOSS:
            # BBR that lost the policed share overall learns the bucket's rate and then
            # paces under it, losing little more than the path's random share once settled:
            # what held it is what it lost before (BBR policed at 2.2 of 5.9 Mbit/s over
            # 115 ms beside 1.2 % random loss: 27-31 % lost overall, 0.3-1.6 % once settled,
            # 5 of 287 idle probes lost; read `congestion`, scenario matrix 20261301.38).
            ruled_out, witness = _random_ruled_out(idle, whole, others)
            tested = whole
        if ruled_out is None and witness is None:
            return None
    if not (_drained(m, plateau) or _late_losses(m)):
        # One burst in slow start and a flat rate with no loss after it is the ramp's
        # overshoot; a policer shows its bucket draining (a faster start) or keeps dropping.
        return None
    if cc in LOSS_BASED and plateau >= backoff(cc) * line and _loss_episodes(m, rtt.idle_ms) == 1:
        # One loss episode, then a flat rate no lower than the sender's backoff of the line:
        # the window that overflowed the path (at least the line's BDP), cut once and growing
        # a segment per round trip since. A bucket drops again whenever the sender passes its
        # rate; this one never did. (Reno at 81 % of a 417 Mbit/s x 125 ms line after one
        # slow-start burst, and at 63 % of a 75 Mbit/s x 251 ms line whose ramp ended past
        # the transfer's middle, read `policer`: docs/bench-matrix.md.)
        return None
    pattern = loss_pattern(m)
    bursty = pattern is not None and pattern.bursty
    # A loss-based sender: drops spread evenly over the intervals are a drop-tail queue's
    # sawtooth or random loss; a token bucket drops everything above its rate once it is
    # empty. BBR holds its rate at the bandwidth it measured through random loss (Linux
    # BBR reads an interval losing over 20 % as policed, lt_loss_thresh = 50/256), so
    # losses do not explain its plateau far below the line whatever their pattern; against
    # a bucket it overshoots every round until it learns the rate and its drops spread over
    # the intervals (100 Mbit/s x 80 ms lab, 20 Mbit/s policer: 7 of 12 intervals lossy,
    # the busiest fifth holding 35 %).
    if not bursty and not model_based(cc) and not _below_any_sawtooth(plateau, line, cc):
        return None
    return Policing(
        plateau,
        line_mbps,
        rtt,
        loss,
        pattern,
        bound,
        model_based(cc),
        settled is not None,
        ruled_out,
        witness,
        tested,
    )


def _random_ruled_out(
    idle: IdleLoss | None, loss: float, others: Sequence[ModeResult]
) -> tuple[IdleLoss | None, ModeResult | None]:
    """What ruled out random loss at `loss`: the idle probes, else another transfer of the
    same direction (advice/idle_loss.py), else neither (None, None). (BBR policed at 93 of
    280 Mbit/s over 3.2 ms beside 1.9 % random loss lost 10.9 %; 116 idle probes lost 5,
    odds 0.02 at that share, while the untuned upload lost 111 of its 5,987 segments: read
    `path-capacity`, scenario matrix 20261301.22.)"""
    if idle_loss.rules_out_random(idle, loss):
        return idle, None
    return None, idle_loss.segments_rule_out_random(others, loss)


def same_way(modes: Sequence[ModeResult], m: ModeResult | None) -> tuple[ModeResult, ...]:
    """The transfers of `m`'s direction other than `m` itself."""
    if m is None:
        return ()
    return tuple(x for x in modes if x is not m and x.direction == m.direction)


# Random loss at rate p hits a window of W segments p x W times a round trip, so a loss
# episode (one recovery, a round trip or two) holds about max(1, p x W) segments; a bucket
# that ran dry drops everything above its rate at once. An average this many times the
# random expectation, over at least MIN_EPISODES, is bursts (Poisson: a mean of 1 per
# episode averaged over 5 reaches 3 with odds under 1 in 1,000).
BURST_EPISODE_LIFT = 3.0
MIN_EPISODES = 5


def _burst_episodes(m: ModeResult, idle_ms: float, loss: float) -> bool:
    """The losses came a handful at a time, not one by one: segments per loss episode far
    above what random loss puts in one (Reno policed at 33.7 of 130 Mbit/s over 8.8 ms: 18
    segments an episode where random loss at its 1.8 % gives 1, its rate 2.8 x the loss
    bound, read `congestion` on both hosts)."""
    later = len(episodes(m, idle_ms)) - 1  # the ramp's overshoot is one burst anywhere
    rate, lost = settled_mbps(m), late_retransmits(m, idle_ms)
    if later < MIN_EPISODES or rate <= 0 or lost <= 0:
        return False
    window = rate * 1e6 / 8 * idle_ms / 1e3 / mss_of(m)
    expected = max(1.0, loss * window)
    return lost / later >= BURST_EPISODE_LIFT * expected


def _below_any_sawtooth(plateau_ip: float, line_mbps: float, cc: str) -> bool:
    """A plateau below the healthy share of what the sender's own sawtooth keeps busy
    through no queue at all (Reno 0.75 of the line, CUBIC 0.85): with losses far above the
    loss bound and no queue, neither random loss nor the path's own buffer overflowing
    holds it there, however evenly the losses spread (Reno through a 299 Mbit/s bucket on
    a 2.9 Gbit/s line: 43 % of its segments lost, in 28 of 53 intervals, at 9 % of the
    line; read `cross-traffic`)."""
    return plateau_ip < HEALTHY_SHARE * sawtooth_utilisation(0.0, backoff(cc)) * line_mbps


def wizard_gap(best: Candidate, dirs: Sequence[Direction]) -> WizardGap | None:
    """A policer's verdict: the transfer gets the plateau once the bucket is empty, and
    pacing gets the same without the losses — no host setting raises it."""
    if best.factor != "policer":
        return None
    d = next((d for d in dirs if d.name == best.direction and d.current is not None), None)
    rates = (
        [s.goodput_mbps for s in d.current.samples[len(d.current.samples) // 2 :]]
        if d and d.current
        else []
    )
    if len(rates) < 3:
        return None
    held = sorted(rates)[len(rates) // 2]
    return WizardGap(held, held, True)


def _first_half_peak_ip(m: ModeResult) -> float | None:
    """The highest goodput sample of the transfer's first half, at the IP layer."""
    first = [s.goodput_mbps for s in m.samples[: len(m.samples) // 2]]
    return ip_rate(max(first), mss_of(m)) if first else None


def _drained(m: ModeResult, plateau_ip: float) -> bool:
    """The first half ran well above the plateau: a full bucket let it pass at first."""
    peak = _first_half_peak_ip(m)
    return peak is not None and peak >= plateau_ip / POLICED_SHARE


def _burst_through_bucket(m: ModeResult | None) -> bool:
    """The transfer's first half peaked at BUCKET_BURST x its plateau or more (IP layer)."""
    plateau = plateau_mbps(m) if m is not None else None
    peak = _first_half_peak_ip(m) if m is not None else None
    return bool(plateau) and peak is not None and peak >= BUCKET_BURST * (plateau or 0.0)


def _loss_episodes(m: ModeResult, rtt_ms: float) -> int:
    return len(episodes(m, rtt_ms))


def _queue_at_losses(m: ModeResult, idle_ms: float, allowed_ms: float, paced: bool) -> bool:
    """The losses after the ramp came with a queue: a drop-tail buffer drops only once it
    is full, so the RTT stands above the idle one when it drops; a policer drops with the
    RTT at idle (Flach et al., SIGCOMM 2016). True when at least half the loss episodes
    after the first (slow start overshoots any buffer, a bucket's too) had an RTT, in the
    interval before or during them, more than `allowed_ms` above idle (no_queue_ms and the
    flow's own segment spacing); Reno's sawtooth through a 0.58-BDP
    queue at 5.4 ms: 1.14-1.49 x idle at its losses, the policer's Reno and BBR losses
    0.98-1.05 x (docs/bench-matrix.md).

    Random loss merges the episodes (a segment at a time, in nearly every interval): with a
    single episode, a paced sender's segments are counted instead, and most of them lost
    with a queue standing is a full buffer's overflow (BBR at 1.6 % random loss through a
    1-BDP queue over 166 ms: 3,300 of 4,800 segments lost at 1.2-2 x idle in two overflows,
    the rest one by one; read `policer`). Not an unpaced sender's: its window goes out in
    bursts at the host's link rate and queues at the line in front of the bucket (Reno
    through a 393 Mbit/s bucket on a 1.1 Gbit/s x 57 ms line: losses at +7 to +69 ms).

    The first episode, skipped, is the ramp's whole overshoot: every lossy interval up to
    the first without loss (`episodes(first_run=True)`). It outlasts one recovery: BBR
    paces at the bandwidth its startup measured until its filter forgets it (10 round
    trips), Reno recovers a window's worth of holes a round trip at a time, and a bucket
    behind the bottleneck drops through all of it while the queue the ramp built stands in
    front. On a path whose two round trips are shorter than an interval each lossy interval
    was an episode of its own (BBR policed at 20 on a 100 Mbit/s x 40 ms line: eight
    intervals of losses in a row at 1.1-2 x idle, then flat at 19 Mbit/s with the RTT at
    idle, read `congestion`; Reno through the same bucket: ten, then one loss at idle
    after two seconds, read `congestion` on the sender)."""
    later = episodes(m, idle_ms, first_run=True)[1:]
    if later or not paced:
        queued = sum(1 for e in later if e and max(e) - idle_ms > allowed_ms)
        return bool(later) and 2 * queued >= len(later)
    losses = settled_losses(m, idle_ms)
    queued = sum(n for n, rtt in losses if rtt - idle_ms > allowed_ms)
    return bool(losses) and 2 * queued >= sum(n for n, _ in losses)


def _regrowing(m: ModeResult, idle_ms: float, cc: str) -> bool:
    """A loss-based window climbing again after cuts: it met the limit more than once (two
    loss episodes or more), so the first ramp ended at the first and the climb at the end
    is congestion avoidance's one segment per round trip after a cut, not the first ramp —
    whether or not it met the limit again before the end (Reno through a 3.7 Mbit/s bucket
    over 86 ms, 27 segments a window: 4 episodes, the last climb read as slow start, matrix
    20261201.135; Reno through a 472 Mbit/s bucket over 13.7 ms, 373 segments a window: 16
    episodes in the first half, then a climb of 373 round trips with no loss before the end,
    read `path-capacity`, 20261202.153)."""
    return cc in LOSS_BASED and _loss_episodes(m, idle_ms) >= 2


def _late_losses(m: ModeResult) -> bool:
    counts = [s.tcp_info.total_retrans for s in m.samples if s.tcp_info is not None]
    return len(counts) >= 4 and counts[-1] > counts[len(counts) // 2]


def _burst_peak_mbps(m: ModeResult) -> float | None:
    """The highest delivery rate the sender's TCP_INFO saw (a train the full bucket let pass
    at the line rate), IP layer; None without TCP_INFO."""
    rates = [s.tcp_info.delivery_rate_bps / 1e6 for s in m.samples if s.tcp_info]
    if not rates or max(rates) <= 0:
        return None
    mss = mss_of(m)
    return ip_rate(max(rates), mss)


def pacing_fixes(
    policed_mbps: float, host: HostRole, sender: HostAudit | None, cc: str
) -> tuple[Fix, ...]:
    """Pace the sender below the policed rate: the fq qdisc's maxrate (every socket), the
    application's SO_MAX_PACING_RATE (one socket), BBR (it finds a policer's rate itself)."""
    rate_bits = round(policed_mbps * PACE_SHARE * 1e6)
    iface = sender.interface.name if sender and sender.interface else "IF"
    mbit = f"{rate_bits / 1e6:.0f}mbit" if rate_bits >= 10e6 else f"{rate_bits / 1e3:.0f}kbit"
    fixes = [
        Fix(
            id="policer-fq-maxrate",
            kind="other",
            host=host,
            key=f"qdisc {iface}",
            value=f"fq maxrate {mbit}",
            command=f"tc qdisc replace dev {iface} root fq maxrate {mbit}",
            why=(
                f"pace every flow below the policed {format_mbps(policed_mbps)}: a token bucket "
                "never drops what stays under its rate (needs a kernel with the fq qdisc, "
                "CONFIG_NET_SCH_FQ)"
            ),
            guideline="Flach et al., SIGCOMM 2016: pacing avoids policer losses",
            answers=("policer",),
        ),
        pacing_rate_fix(rate_bits // 8, host),
    ]
    if cc != "bbr":
        fixes.append(
            Fix(
                id="policer-bbr",
                kind="sysctl",
                host=host,
                key="net.ipv4.tcp_congestion_control",
                value="bbr",
                command="sysctl -w net.ipv4.tcp_congestion_control=bbr",
                why="BBR measures the delivery rate and detects a policer's (its long-term "
                "bandwidth sampling), then paces at it instead of losing a window per refill",
                guideline="Cardwell et al., 'BBR: Congestion-Based Congestion Control', 2016",
                answers=("policer",),
            )
        )
    return tuple(fixes)


def pacing_rate_fix(bytes_per_s: int, host: HostRole) -> Fix:
    """SO_MAX_PACING_RATE in the application (advice/snippets.py prints the code)."""
    from tcpwizard.advice.snippets import pacing_rate_command

    return Fix(
        id="setsockopt-so_max_pacing_rate",
        kind="setsockopt",
        host=host,
        key="setsockopt:SO_MAX_PACING_RATE",
        value=str(bytes_per_s),
        command=pacing_rate_command(bytes_per_s),
        why="an application can pace its own socket below the policed rate (bytes per second)",
        guideline="socket(7): SO_MAX_PACING_RATE",
        answers=("policer",),
    )


def _windows_explain(ev: Evidence, d: Direction, found: Policing) -> bool:
    """The hosts' own windows hold the sender at the plateau: the window law (rate = window
    / RTT, at the RTT under load) with the largest send window the sender's audit allows and
    the largest receive window the receiver's does, reaches no more than the plateau over
    POLICED_SHARE. A flow its window holds runs near that rate whatever drops its packets
    (BBR with a small send buffer at random loss: `policer` 3 times in the scenario matrix,
    docs/bench-matrix.md); the window rules speak for it."""
    window = audited_window(d.sender, d.receiver)
    if window is None or d.current is None:
        return False
    mss = mss_of(d.current)
    loss = found.loss
    bdp = ev.path.bdp_bytes if ev.path else None
    cur = d.current
    if bdp and window < bdp and cur.bytes > 0:
        # A window below the path's BDP cannot overflow the bottleneck's queue: none of its
        # losses is a ramp's overshoot, all of them held it (BBR with a 249 KB send window
        # over 382 ms at 0.45 % loss: 4.5 Mbit/s of the law's 5.2, `policer` at 0.98 in the
        # scenario matrix, 20261207.12, when only the losses after the ramp were counted).
        loss = max(loss, cur.retransmits * mss / cur.bytes)
    # A window-held flow on a lossy path keeps less than the law: each loss holds the
    # window a round trip (BBR with a 719 KB tcp_wmem at 1.3 % loss moved 15 Mbit/s where
    # the law gives 21: `policer` in the scenario matrix, docs/bench-matrix.md).
    allowed = window_limit_mbps(window, found.rtt.median_ms) * lossy_window_share(loss, window, mss)
    return ip_rate(allowed, mss) * POLICED_SHARE <= found.policed_mbps


def _passed_by_another(d: Direction, found: Policing) -> bool:
    """A bucket caps every flow through it: once its burst is spent, no transfer of the
    same direction holds more than its rate. Another mode of the check whose settled rate
    (the second half's plateau) stood above the policed one by more than a plateau's own
    spread (1 / POLICED_SHARE) went through no such bucket. (BBR at 0.56 % random loss over
    128 ms held 40 Mbit/s with autotuning, 123 with DRS on the same path: `policer`, in
    the scenario matrix.)"""
    other = other_mode(d)
    plateau = plateau_mbps(other) if other is not None else None
    if other is None or plateau is None or plateau * POLICED_SHARE <= found.policed_mbps:
        return False
    # A transfer the bucket could have paid for is no witness: it starts full (the path
    # was idle before), so over a span of t seconds it passes the policed rate x t plus
    # its depth, up to BUCKET_MAX_S of that rate (BBR policed at 2.8 Mbit/s over 86 ms: a
    # 0.9 s untuned upload at 4.6 Mbit/s fitted in the bucket, and ruled the policer out).
    sent_ip = ip_rate(other.throughput_mbps, mss_of(other)) * other.seconds
    return sent_ip > found.policed_mbps * (other.seconds + BUCKET_MAX_S)


def _every_stream_queued(ev: Evidence, d: Direction) -> bool:
    """Every periodic stream of the available-bandwidth probe that way met a growing
    queue, the slowest at half the capacity: others' traffic keeps the bottleneck's queue
    standing. A bucket drops what exceeds its rate and delays nothing, so on a path it alone
    holds a stream above the rate loses packets (no slope) and one below passes flat. (The
    scenario matrix, docs/bench-matrix-two-seeds.md: policed paths 0-6 of 10 streams loaded,
    the delay line's noise on a 2-core host, and 8 of 9 once at 620 Mbit/s x 2.3 ms where
    the delay line itself queues; TCP flows beside BBR taking the path: 9 of 9 and 6 of 6,
    read `policer` before: the idle RTT was measured through their queue. Hence every
    stream, never most.)"""
    av = ev.path.available_for(d.name) if ev.path else None
    return av is not None and av.streams > 0 and av.loaded == av.streams


def _others_queue_the_way_back(ev: Evidence, d: Direction) -> bool:
    """Half the idle echoes or more stood above their minimum by more than a queue-free
    flow's noise, and the transfer is a download: a queue came and went on the path while
    they ran, and nothing rules out that others' flows keep it on the way back. The idle
    RTT was then measured through it, so "no queue under load" says nothing of a bucket,
    unless the available-bandwidth streams sent that way found it mostly free.
    (Two BBR flows of others on the way back of a 100 Mbit/s x 50 ms lab line kept the
    echoes at 94-100 ms, their median 4 ms above the minimum; the download, its share of 24
    Mbit/s at 100 ms "with no queue", read `policer` 0.98.) The median, not the top: a late
    echo or two is the host's timer (an 8 Mbit/s bucket at 20 ms: the 95th percentile 2 ms
    above the minimum, the median 0.04 ms); a bucket alone on the way back leaves the
    median at the minimum (0.17 ms above it at 40 ms)."""
    path = ev.path
    if d.name != "down" or path is None or not path.peer or path.rtt.samples < 2:
        return False
    av = path.available_for(d.name)
    if av is not None and av.free_share > CROSS_FREE_SHARE and not av.emptied_bucket:
        return False  # the streams sent back found that way free: the queue was not there
    # A bucket read by the streams is no vouching: a bucket alone keeps the echoes' median
    # at their minimum, so the queue that spread them says others' flows, whose sawtooth
    # drops in bursts can pass for a bucket's (two TCP flows of others on the way back, 2
    # of 10 causes-bench runs: the stream sent again lost 23 and 26 % after passing whole).
    return path.rtt.p50 - path.rtt.min > NOISE_MS


def _mostly_free(ev: Evidence, d: Direction) -> bool:
    av = ev.path.available_for(d.name) if ev.path else None
    return av is not None and av.free_share > CROSS_FREE_SHARE


def bucket_s(line_mbps: float, train_loss: float, policed_mbps: float) -> float:
    """Seconds of the policed rate a bucket must hold to have let the probe's main train
    pass as it did: what passed, less what the rate itself carried while it ran."""
    if policed_mbps <= 0 or line_mbps <= 0:
        return 0.0
    sent = main_train_bytes(line_mbps * 1e6)
    span_s = sent * 8 / (line_mbps * 1e6)
    passed = (1.0 - train_loss) * sent
    needed = max(0.0, passed - policed_mbps * 1e6 / 8 * span_s)
    return needed / (policed_mbps * 1e6 / 8)


def rule(ev: Evidence, d: Direction) -> Candidate | None:
    probe = probe_capacity(ev, d)
    cc = sender_cc(d)
    if probe is None:
        return None
    if (
        (probe.train_loss or 0.0) > TRAIN_LOST
        and not _mostly_free(ev, d)
        and not _burst_through_bucket(d.current)
    ):
        # The probe's long train found no room: the bottleneck's queue was already full
        # (others' flows keep it standing) or tiny. Others' queue: the idle RTT was measured
        # through it and cannot show that the transfer built none. Unless the available
        # bandwidth shows the path mostly free, or the transfer itself first ran far above
        # its plateau (what others leave a flow does not let it): then the queue is only
        # small (an unpaced train overflows a few dozen packets), and a bucket may still
        # stand behind it (it also takes the available-bandwidth streams' excess).
        return None
    if _every_stream_queued(ev, d):
        return None  # others' queue: the cross-traffic rule speaks
    if _others_queue_the_way_back(ev, d):
        return None
    # Imported here: no_sack reads the capacity view, which imports this package.
    from tcpwizard.advice.rules.no_sack import sack_off_roles

    if sack_off_roles(ev, d):
        # Without SACK the retransmissions are not the path's losses one for one (NewReno
        # resends what SACK would have spared; BBR v1 at 0.2 % random loss with SACK off at
        # one end retransmitted 22 % of its segments, advice/rules/no_sack.py): tested
        # against the idle probes, random loss looked ruled out and the policer was named
        # (SACK off at 0.5 % random loss, BBR, 100 Mbit/s x 50 ms: 2 of 3 lab tries).
        return None
    others = same_way(ev.transfer.modes if ev.transfer else (), d.current)
    # The queue is read from the top of the path's own delay jitter (advice/path_jitter.py).
    idle_ms = queue_free_rtt_ms(ev, d)
    found = policing(d.current, idle_ms, probe.mbps, cc, idle_loss.of_path(ev.path), others)
    if found is None or _windows_explain(ev, d, found) or _passed_by_another(d, found):
        return None
    # Imported here: advice/sawtooth.py reads the capacity view, which imports this package.
    from tcpwizard.advice.sawtooth import own_overflow

    overflow = own_overflow(ev, d)
    if overflow is not None and found.policed_mbps >= (
        HEALTHY_SHARE * overflow.utilisation * probe.mbps
    ):
        # Its own sawtooth through the path's shallow queue keeps the line that busy
        # (advice/sawtooth.py): Reno at 84 % of a 1.6 Gbit/s probe, its window's peaks at
        # 1.27 BDP over a 0.27-BDP queue, which keeps 89 % of it busy (read `policer`).
        return None
    if bucket_s(probe.mbps, probe.train_loss or 0.0, found.policed_mbps) > BUCKET_MAX_S:
        return None
    if host_drops.rule(ev, d) is not None:
        # Drops counted inside a host explain the bursty losses directly (a full transmit
        # ring drops bursts too, with no queue on the path): that verdict, not a policer.
        return None
    host: HostRole = "path"
    return Candidate(
        d.name,
        "policer",
        # Above the congestion rule's 0.85: when this evidence holds, the losses are the
        # policer's, not a congested queue's.
        0.9,
        host,
        f"{d.name}: a policer on the path drops what exceeds about "
        f"{format_mbps(found.policed_mbps)} (a token bucket: no queue, losses in bursts); the "
        f"line itself carries {format_mbps(probe.mbps)}. No buffer or sysctl on either host "
        "raises a policed rate: pace the sender just below it (losses stop, the rate holds "
        "steady at the plateau), or ask the network's operator for a higher rate. Never open "
        "parallel streams: they share the same bucket and only lose more.",
        found.lines(),
        fixes=pacing_fixes(found.policed_mbps, d.sender_role, d.sender, cc),
    )


# ---------------------------------------------------------------- captures and live sockets


def capture_verdict(
    d: FlowDirection, ev: list[str], sender: HostRole
) -> tuple[Verdict, tuple[Fix, ...]] | None:
    """`check --pcap`: a captured flow that settled on a plateau below the line rate it
    showed in a burst (while the bucket was full), lost segments far above the Mathis bound
    of its loss rate, and kept its RTT at the minimum."""
    rtt_min, rtt_mid = d.rtt_min_ms, d.rtt_p50_ms
    if not d.retransmitted_bytes or not d.bytes or rtt_min is None or rtt_mid is None:
        return None
    plateau, peak = d.steady_mbps, d.peak_mbps
    if plateau <= 0 or peak <= 0 or plateau >= POLICED_SHARE * peak:
        return None
    if d.late_loss_episodes < 1:
        # Losses only in the first half are slow start overshooting a queue (healthy 100
        # Mbit/s x 50 ms lab captures: 4-5 episodes, none late); a policer drops whenever
        # the sender's rate passes its tokens again, to the end.
        return None
    # The capture does not say whether the sender paced: its segments are spaced at least
    # at the line rate the burst showed.
    peak_ip = ip_rate(peak, d.mss)
    if rtt_mid - rtt_min > no_queue_ms(rtt_min) + spacing_ms(d.mss, peak_ip, peak_ip):
        return None
    loss = d.retransmitted_bytes / d.bytes
    bound = mathis_mbps(d.mss, rtt_min, loss)
    if bound is None or plateau <= BOUND_LIFT * bound:
        return None
    policed = ip_rate(plateau, d.mss)
    lines = [
        *ev,
        f"rate plateau {format_mbps(policed)} (IP layer, second half) against a burst of "
        f"{format_mbps(ip_rate(peak, d.mss))} while the bucket was full",
        f"RTT {rtt_mid:.1f} ms median under load (p90 "
        f"{(d.rtt_p90_ms or rtt_mid):.1f} ms) against {rtt_min:.1f} ms minimum: no queue",
        f"{loss:.1%} of the data retransmitted; Mathis bound at that loss "
        f"{format_mbps(bound)}: the losses came in bursts",
    ]
    verdict = Verdict(
        "policer",
        0.8,
        "path",
        f"a policer on the path drops what exceeds about {format_mbps(policed)} (no queue, "
        "losses in bursts): pace the sender just below that rate or ask the network's "
        "operator for more; parallel streams share the same bucket",
        tuple(lines),
        WizardGap(d.steady_mbps or d.rate_mbps, None, False),
    )
    return verdict, pacing_fixes(policed, sender, None, "")


def conns_verdict(obs: ConnObservation) -> tuple[Verdict, tuple[Fix, ...]] | None:
    """`conns`: a sending connection, busy and held by neither window, that loses segments
    far above the Mathis bound of its loss rate while its RTT stays at its minimum: a
    policer's bucket (no queue) dropping bursts. Without a probe the line rate is unknown;
    the highest delivery rate sampled is shown beside the rate."""
    if not obs.sending or obs.retransmits <= 0 or obs.segs_out <= 0 or obs.busy < 0.6:
        return None
    if obs.rwnd_limited >= 0.2 or obs.sndbuf_limited >= 0.2 or obs.min_rtt_ms <= 0:
        return None
    mss = obs.snd_mss or 1448
    line_ip = ip_rate(max(obs.delivery_rate_max_mbps, obs.delivery_rate_mbps), mss)
    pace = ip_rate(obs.send_mbps, mss) if model_based(obs.congestion_control) else line_ip
    allowed = no_queue_ms(obs.min_rtt_ms) + spacing_ms(mss, pace, line_ip)
    if obs.rtt_ms - obs.min_rtt_ms > allowed:
        return None
    loss = obs.retransmits / obs.segs_out
    bound = mathis_mbps(mss, obs.min_rtt_ms, loss, obs.congestion_control)
    if bound is None or obs.send_mbps <= BOUND_LIFT * bound:
        return None
    policed = ip_rate(obs.send_mbps, mss)
    peak = max(obs.delivery_rate_max_mbps, obs.delivery_rate_mbps)
    lines = (
        f"sent {obs.send_mbps:.1f} Mbit/s (~{format_mbps(policed)} at the IP layer); highest "
        f"delivery rate sampled {format_mbps(peak)}",
        f"RTT {obs.rtt_ms:.1f} ms against {obs.min_rtt_ms:.1f} ms minimum: no queue builds",
        f"{obs.retransmits} of {obs.segs_out} segments retransmitted ({loss:.1%}); Mathis "
        f"bound at that loss {format_mbps(bound)}: the losses come in bursts",
    )
    verdict = Verdict(
        "policer",
        0.7,
        "path",
        f"a policer on the path likely drops what exceeds about {format_mbps(policed)}: losses "
        "in bursts with no queue (a full buffer would delay). Pace the sender just below that "
        "rate, or ask the network's operator; parallel streams share the same bucket",
        lines,
        WizardGap(obs.send_mbps, None, False),
    )
    return verdict, pacing_fixes(policed, "local", None, obs.congestion_control)
