"""`congestion`: packet loss holds the congestion window down (the loss bound of the
sender's congestion control at the loss measured), with parallel streams as a work-around.
"""

from __future__ import annotations

from tcpwizard.advice import idle_loss
from tcpwizard.advice.capacity_view import capacity as _capacity
from tcpwizard.advice.capacity_view import steady_mbps
from tcpwizard.advice.evidence import CROSS_FREE_SHARE, HEALTHY_SHARE, Evidence, sender_cc
from tcpwizard.advice.evidence import Candidate as _Candidate
from tcpwizard.advice.evidence import Direction as _Direction
from tcpwizard.advice.evidence import chrono as _chrono
from tcpwizard.advice.evidence import mss as _mss
from tcpwizard.advice.evidence import rtt_ms as _rtt_ms
from tcpwizard.advice.loss_episodes import LATE_LOSS_EVENTS, late_retransmits, settled_mbps
from tcpwizard.advice.others_queue import others_queue as _others_queue
from tcpwizard.advice.rules.policer import model_based
from tcpwizard.advice.sawtooth import healthy_share
from tcpwizard.advice.streams import streams_needed
from tcpwizard.advice.window_evidence import loss_fraction as _loss_fraction
from tcpwizard.advice.window_law import (
    LOSS_BASED,
    LOSS_BOUND_MARGIN,
    held_by_loss,
    mathis_mbps,
    timeout_floor_mbps,
)
from tcpwizard.measure.engine.loaded_rtt import flow_rtt_ms
from tcpwizard.units import format_mbps as _fmt


def rule(ev: Evidence, d: _Direction) -> _Candidate | None:
    cur, rtt = d.current, _rtt_ms(ev, d)
    loss = _loss_fraction(ev, d)
    if cur is None or rtt is None or not loss or cur.retransmits == 0:
        return None
    cc = sender_cc(d)
    flow_rtt = flow_rtt_ms(cur, rtt)
    bound = mathis_mbps(_mss(d), flow_rtt, loss, cc)
    # A model-based sender has no loss bound: Reno's is shown as the yardstick it is.
    whose = (
        f"Reno's loss bound at that loss (a {cc} sender has none)"
        if model_based(cc)
        else f"loss bound ({cc or 'reno'}) at that loss"
    )
    evidence = [
        f"{cur.retransmits} retransmissions (~{loss:.2%} of segments)",
        f"{whose}: {_fmt(bound)}; measured {_fmt(cur.throughput_mbps)}",
    ]
    confidence = ONE_LINE
    held = settled_mbps(cur)
    if bound is not None and held <= LOSS_BOUND_MARGIN * bound:
        if held_by_loss(held, _mss(d), flow_rtt, loss, cc):
            confidence = 0.85
        else:
            # Far under what that loss leaves even a sender that times out: the losses
            # allow more than it moved, so they did not set its rate (a 56 KB send buffer
            # at 1 Gbit/s x 2.7 ms lost one segment in 70,000 and moved 141 Mbit/s against
            # a bound of 920).
            confidence = FAR_BELOW_CONFIDENCE
            floor = timeout_floor_mbps(_mss(d), flow_rtt, loss) or 0.0
            evidence.append(
                f"throughput is far below what that loss allows (timeouts included: "
                f"{_fmt(floor)}): something else held the window"
            )
    elif bound is not None and held > 3 * bound:
        late = late_retransmits(cur, rtt)
        cap = _capacity(ev, d)
        low = cap is not None and steady_mbps(cur) < HEALTHY_SHARE * cap
        if late >= LATE_LOSS_EVENTS and cc in LOSS_BASED and low:
            # Losses go on after the ramp and the rate stays low: drop-tail overflows
            # that lose several packets per event (a shallow queue), not one burst.
            confidence = 0.7
            evidence.append(
                f"{late} of them after the first half, at {_fmt(steady_mbps(cur))} once up "
                "to speed: repeated loss events, not one burst"
            )
        else:
            # Far above the steady-state loss bound: the losses came in a burst
            # (slow-start overshoot into the queue), not as the rate that holds the
            # window down.
            confidence = 0.3
            evidence.append(
                "throughput is far above that bound: the losses were a burst"
                if not model_based(cc)
                else "throughput is far above that bound: the losses did not set the rate"
            )
    rwnd, sndbuf, _ = _chrono(cur)
    if max(rwnd or 0.0, sndbuf or 0.0) >= WINDOW_HELD_SHARE:
        # A sender the peer's window or its own send buffer held for most of the transfer
        # was not held by its congestion window then: its losses are no longer the limit,
        # however close the rate sits to their bound, and the window rules speak (BBR
        # through a 16 KB receive window at 2.7 % loss over 3.1 ms: the window law and
        # the loss bound both near 25 Mbit/s, receive-window limited 53 % of the time,
        # read `congestion` on this host).
        confidence = min(confidence, ONE_LINE)
        evidence.append(
            f"the sender was held by a window {max(rwnd or 0.0, sndbuf or 0.0):.0%} of the "
            "time (TCP_INFO), not by its congestion window"
        )
    if model_based(cc) and loss < BBR_LOSS_TOLERANCE:
        # A model-based sender paces at the bandwidth it measures and does not back off on
        # loss this low: the loss bound is no law for it, and its rate says nothing of the
        # losses. Something else held it (its windows, the path).
        confidence = min(confidence, BBR_LOSS_CONFIDENCE)
        evidence.append(
            f"the sender runs {cc}, which keeps its rate through loss below "
            f"{BBR_LOSS_TOLERANCE:.0%}: these losses do not hold it down"
        )
    full = _fills_free_share(ev, d) or _others_queue(ev, d) or _own_sawtooth(ev, d, cc)
    if full is not None:
        # Every TCP flow that fills what a bottleneck leaves it sees the loss its rate
        # implies (that is what the loss bound says); only the free share, or its window
        # shown filling the path and its queue, tells those losses from ones that hold it
        # below the path.
        confidence = min(confidence, FULL_SHARE_LOSS_CONFIDENCE)
        evidence.append(full)
    idle = idle_loss.of_path(ev.path)
    if idle is not None and idle.lost > 0 and not idle_loss.rules_out_random(idle, loss):
        # What a bucket or a full queue would have spared: the idle probes met the loss too.
        evidence.append(
            f"{idle.lost} of {idle.sent} round-trip probes at idle were lost too: the path "
            "drops packets whatever the rate (random loss, a faulty or noisy link)"
        )
    if cc:
        evidence.append(f"sender's congestion control: {cc}")
    streams = _streams_work_around(ev, d, bound, cc)
    if streams is not None:
        n, per = streams
        cap = _capacity(ev, d) or 0.0
        reach = (
            f"would reach the path: {n} x {_fmt(per)} >= capacity {_fmt(cap)}"
            if n * per >= cap
            else f"(the most worth opening) would reach ~{_fmt(n * per)} of {_fmt(cap)}"
        )
        evidence.append(f"{n} parallel streams {reach} (each stream gets about the bound)")
    advice = (
        " A loss-based algorithm halves its window on every loss; BBR with fq pacing keeps "
        "most of the rate on a lossy long path."
        if cc in LOSS_BASED
        else " The congestion controller already ignores random loss; look for a congested "
        "or faulty link."
    )
    if streams is not None:
        advice += (
            f" Work-around that needs no change on either host: {streams[0]} parallel "
            "streams (iperf3 -P, globus-url-copy -p, bbcp -s, rclone --multi-thread-streams)."
        )
    return _Candidate(
        d.name,
        "congestion",
        confidence,
        # A sender that paces at its measured bandwidth already does what a host can: the
        # losses are the path's to find (a congested or faulty link), not a host's to fix.
        "path" if model_based(cc) else d.sender_role,
        f"{d.name}: packet loss holds the congestion window down.{advice}",
        tuple(evidence),
        streams=streams,
    )


# Losses seen, but not shown to hold the rate (not at their bound, or a window held the
# sender): one line of evidence, the rules' one-line band (advice/calibration.py keeps them
# apart as "(one line)").
ONE_LINE = 0.55
# Losses shown not to hold the rate (far under the least they allow): below WEAK
# (advice/diagnose.py), as the burst far above the bound is (0.3 there).
FAR_BELOW_CONFIDENCE = 0.3
# A window that held the sender for more than half the transfer binds more than the
# congestion window, which could have bound only the rest of the time.
WINDOW_HELD_SHARE = 0.5
# BBR reacts to loss only above a threshold: v1 (Linux's `bbr`) treats a round losing over
# 20 % as policed (lt_loss_thresh = 50/256) and ignores less; BBRv2/v3 bound their inflight
# when a round loses over 2 % (bbr_loss_thresh). The lower of the two.
BBR_LOSS_TOLERANCE = 0.02
# Below WEAK (advice/diagnose.py): such losses name the congestion only when nothing else
# explains the rate.
BBR_LOSS_CONFIDENCE = 0.3
# Below CROSS_SHARED_CONFIDENCE (advice/rules/cross_traffic.py): losses that a full share of
# a shared path explains do not outrank the sharing itself; below the one-line band, so
# a sawtooth through the path's own queue (advice/sawtooth.py) leaves the path's rule the
# verdict.
FULL_SHARE_LOSS_CONFIDENCE = 0.45


def _fills_free_share(ev: Evidence, d: _Direction) -> str | None:
    """Evidence that this transfer filled what others left free of a shared path (the
    available bandwidth that way): it reached the healthy share of the low end of what was
    free, so its losses are those of a full bottleneck."""
    av = ev.path.available_for(d.name) if ev.path else None
    cur = d.current
    if av is None or cur is None or not av.loaded:
        return None
    if av.free_share > CROSS_FREE_SHARE:
        return None
    rate = steady_mbps(cur)
    low = av.low_bps / 1e6
    if rate < HEALTHY_SHARE * low:
        return None
    return (
        f"{_fmt(rate)} once up to speed fills the {_fmt(low)}-{_fmt(av.high_bps / 1e6)} "
        "others left free: the losses are those of a full share"
    )


def _own_sawtooth(ev: Evidence, d: _Direction, cc: str) -> str | None:
    """Evidence that this transfer's losses are its own window overflowing the path's
    queue at the rate such a sawtooth keeps (advice/sawtooth.py)."""
    healthy, over = healthy_share(ev, d)
    cap, cur = _capacity(ev, d), d.current
    if over is None or cap is None or cur is None or steady_mbps(cur) < healthy * cap:
        return None
    return over.note(cc)


def _streams_work_around(
    ev: Evidence, d: _Direction, bound: float | None, cc: str
) -> tuple[int, float] | None:
    """(N, rate per stream) when loss holds a loss-based stream down and buffers are not
    what limits it: N streams, each getting the Mathis bound (or what one got, if less),
    add up to the capacity."""
    cur, cap = d.current, _capacity(ev, d)
    if cur is None or bound is None or cap is None or cc not in LOSS_BASED:
        return None
    if steady_mbps(cur) >= healthy_share(ev, d)[0] * cap:
        return None
    rwnd, sndbuf, _busy = _chrono(cur)
    if (rwnd or 0) > 0.2 or (sndbuf or 0) > 0.2:
        return None  # a window limit: streams would only hide the buffer problem
    per = min(bound, cur.throughput_mbps)  # the lower: rather a stream too many
    n = streams_needed(cap, per)
    return None if n is None else (n, per)
