"""The verdict for a captured transfer (`check --pcap`), in the vocabulary of `check`.

Read the way a wizard reads Wireshark's stream graphs, from the busiest flow direction:
* the receiver's window closing to zero for a while: its application does not read;
* sends into a full window: the receiver's window is the limit — `window-scaling` when the
  handshake did not agree to scaling and the window stops at 64 KB, else `receiver-window`;
* losses that go on after the first half at the Mathis bound: `congestion` at the sender;
* the RTT rising well above its minimum once up to speed: the sender fills the bottleneck's
  queue, so the path is the limit (`path-capacity`);
* the sender idle with the window open: its `application`;
* otherwise the sender keeps a flat amount in flight far below the offered window without
  losses or a queue: its send buffer (`sender-buffer`).
Which host is "local": the side whose address belongs to this machine; any other is "peer".
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from tcpwizard.advice import application
from tcpwizard.advice.conns import DEFAULT_RATE_BPS, bbr_fix, buffer_fix
from tcpwizard.advice.middlebox import capture_verdict, one_point_note
from tcpwizard.advice.model import LimitingFactor, Verdict
from tcpwizard.advice.rules import policer
from tcpwizard.advice.snippets import setsockopt_fix
from tcpwizard.advice.window_law import (
    LOSS_BOUND_MARGIN,
    QUEUE_RTT,
    UNSCALED_WINDOW,
    WINDOW_FULL_ROUNDS,
    mathis_mbps,
    window_limit_mbps,
)
from tcpwizard.checks.base import sysctl_fix
from tcpwizard.checks.model import BdpTarget, Fix, HostRole
from tcpwizard.checks.window import recommended_buffer
from tcpwizard.measure.observe.capture import CaptureSummary, FlowDirection
from tcpwizard.units import format_bytes

ZERO_SHARE = 0.05  # of the transfer's time with a zero window: the reader is the limit
IDLE_SHARE = 0.3  # of the time with nothing in flight and the window open
# Loss episodes in the second half that make losses ongoing: one may still be the ramp's
# overshoot on a long path (advice/loss_episodes.py), a second is not.
LATE_EPISODES = 2
# Of the bytes acknowledged, the share acknowledged while the receiver's right edge stood
# still. A reader that keeps up frees what arrives before the next ACK leaves, so the edge
# moves with nearly every ACK (healthy 100 Mbit/s x 50 ms lab captures, taken at the sender
# and at the receiver: 0.00); a reader that runs now and then leaves the edge still between
# its reads (all of it in between). Half is the midpoint of the two: most of the data then
# waited for the reader. Not yet measured across the reader bench.
STILL_SHARE = 0.5
# Of the bytes acknowledged, the share under ACKs the receiver held back
# (measure/observe/capture.py HELD_SPAN_S): healthy lab captures 0.00, a reader under a CPU quota
# 0.88-0.94; half is the midpoint, most of the data then waited for the reader.
HELD_SHARE = 0.5


@dataclass(frozen=True)
class CaptureDiagnosis:
    direction: FlowDirection
    verdict: Verdict
    fixes: tuple[Fix, ...]
    sender_role: HostRole
    receiver_role: HostRole


@dataclass(frozen=True)
class CaptureReport:
    summary: CaptureSummary
    diagnosis: CaptureDiagnosis | None  # None: no flow moved enough data to judge
    others: tuple[CaptureDiagnosis, ...] = ()  # the next busiest directions
    notes: tuple[str, ...] = ()


def _mbps(x: float) -> str:
    return f"{x:.1f} Mbit/s"


def _evidence(d: FlowDirection) -> list[str]:
    ev = [
        f"{d.sender}:{d.sender_port} sent {format_bytes(d.bytes)} to {d.receiver}:"
        f"{d.receiver_port} in {d.seconds:.1f} s: {_mbps(d.rate_mbps)} "
        f"({_mbps(d.steady_mbps)} once up to speed)",
    ]
    if d.rtt_min_ms is not None:
        ev.append(
            f"RTT min {d.rtt_min_ms:.1f} ms, median {d.rtt_p50_ms or 0:.1f} ms in the second "
            f"half ({d.rtt_samples} samples from data to ACK)"
        )
    ev.append(
        f"window offered up to {format_bytes(d.max_window)} (median {format_bytes(d.window_p50)});"
        f" in flight median {format_bytes(d.inflight_p50)}, max {format_bytes(d.inflight_max)};"
        f" the window was full in {d.window_full_share:.0%} of the round trips"
    )
    if d.handshake and d.sender_syn and d.receiver_syn:
        s, r = d.sender_syn, d.receiver_syn
        ev.append(
            f"SYN options: sender wscale {s.wscale}, SACK {'on' if s.sack else 'off'}; "
            f"receiver wscale {r.wscale}, SACK {'on' if r.sack else 'off'}"
        )
    else:
        ev.append("no handshake in the capture: window scale unknown, windows read unscaled")
    if d.retransmits:
        ev.append(
            f"{d.retransmits} retransmissions ({d.retransmitted_bytes / max(1, d.bytes):.2%} of "
            f"the bytes) in {d.loss_episodes} loss episodes, {d.late_loss_episodes} in the "
            "second half"
        )
    if d.zero_windows:
        ev.append(f"zero window {d.zero_windows} times, {d.zero_window_s:.2f} s in all")
    return ev


def _verdict(
    factor: LimitingFactor,
    confidence: float,
    host: HostRole | None,
    explanation: str,
    ev: list[str],
    d: FlowDirection,
    tuned: float | None = None,
) -> Verdict:
    """A capture's verdict: the flow's settled rate is the current side of the gap."""
    current = d.steady_mbps or d.rate_mbps
    return Verdict.observed(factor, confidence, host, explanation, ev, current, tuned)


def judge_direction(
    d: FlowDirection,
    is_local: Callable[[str], bool],
    sysctls: Mapping[str, str] | None = None,
    rate_bps: float = DEFAULT_RATE_BPS,
) -> CaptureDiagnosis:
    snd: HostRole = "local" if is_local(d.sender) else "peer"
    rcv: HostRole = "local" if is_local(d.receiver) else "peer"
    ev = _evidence(d)
    rtt = d.rtt_min_ms or 0.0
    size = recommended_buffer(BdpTarget((rtt or 100.0) / 1e3, rate_bps, "measured"), None)

    def mine(host: HostRole) -> Mapping[str, str] | None:
        return sysctls if host == "local" else None

    span = max(d.seconds, 1e-9)
    if d.zero_windows and d.zero_window_s / span >= ZERO_SHARE:
        v = _verdict(
            "application",
            0.75,
            rcv,
            f"the receiving application ({d.receiver}) does not read fast enough: its buffer "
            "fills, the window it offers closes to zero and the sender waits",
            ev,
            d,
        )
        return CaptureDiagnosis(d, v, (), snd, rcv)
    if (mb := capture_verdict(d, ev)) is not None:
        return CaptureDiagnosis(d, mb[0], (mb[1],), snd, rcv)
    if d.held_ack_share >= HELD_SHARE:
        ev.append(
            f"the receiver held back its ACKs for {d.held_ack_share:.0%} of the data (several "
            "segments that arrived over 10 ms or more under one ACK): a Linux receiver "
            "acknowledges every second segment at once only when its reader has made room"
        )
        v = _verdict(
            "application",
            0.7,
            rcv,
            f"the receiving application ({d.receiver}) does not read fast enough: its kernel "
            "holds back the ACKs until the reader makes room, and the sender waits for them",
            ev,
            d,
        )
        return CaptureDiagnosis(d, v, (), snd, rcv)
    if d.window_full_share >= WINDOW_FULL_ROUNDS and d.edge_still_share >= STILL_SHARE:
        ev.append(
            f"the window was full in {d.window_full_share:.0%} of the round trips, and "
            f"{d.edge_still_share:.0%} of the data was acknowledged without the receiver's "
            "right edge moving: it arrived and stayed unread"
        )
        v = _verdict(
            "application",
            0.7,
            rcv,
            f"the receiving application ({d.receiver}) does not read fast enough: the data "
            "it leaves unread holds its window shut, not the size of its buffer",
            ev,
            d,
        )
        return CaptureDiagnosis(d, v, (), snd, rcv)
    if d.window_full_share >= WINDOW_FULL_ROUNDS:
        unscaled = d.max_window <= UNSCALED_WINDOW
        if unscaled and d.scaling is False:
            assert d.sender_syn is not None and d.receiver_syn is not None
            missing = [
                who
                for who, syn, role in (
                    (d.sender, d.sender_syn, snd),
                    (d.receiver, d.receiver_syn, rcv),
                )
                if syn.wscale is None
            ]
            host: HostRole = (
                "both" if len(missing) == 2 else (rcv if d.receiver_syn.wscale is None else snd)
            )
            ev.append(f"no window scale option in the SYN of {' and '.join(missing)}")
            fix = sysctl_fix(
                "tcp_window_scaling",
                "net.ipv4.tcp_window_scaling",
                "1",
                "Without window scaling no window exceeds 64 KB (a middlebox that strips the "
                "option from SYNs has the same effect).",
                "RFC 7323",
            )
            v = _verdict(
                "window-scaling",
                0.9,
                host,
                "window scaling was not agreed in the handshake: the receive window stops at "
                f"64 KB, {_mbps(window_limit_mbps(UNSCALED_WINDOW, rtt)) if rtt else 'slow'} at "
                f"this RTT." + one_point_note(),
                ev,
                d,
            )
            return CaptureDiagnosis(
                d, v, (dataclasses.replace(fix, host=host, answers=("window-scaling",)),), snd, rcv
            )
        why = (
            "The receive window, and so the rate per RTT, is bounded by the receiver's "
            "tcp_rmem max."
        )
        fixes = (
            buffer_fix("net.ipv4.tcp_rmem", size, rcv, mine(rcv), why),
            setsockopt_fix("SO_RCVBUF", size // 2, rcv),
        )
        limit = window_limit_mbps(d.window_p50, rtt) if rtt else 0.0
        ev.append(f"window law: {format_bytes(d.window_p50)} / {rtt:.1f} ms = {_mbps(limit)}")
        v = _verdict(
            "receiver-window",
            0.8,
            rcv,
            f"the receiver ({d.receiver}) does not offer a window as large as the path's "
            "bandwidth-delay product: the sender fills it and waits for window updates",
            ev,
            d,
        )
        return CaptureDiagnosis(d, v, fixes, snd, rcv)
    if (policed := policer.capture_verdict(d, ev, snd)) is not None:
        return CaptureDiagnosis(d, *policed, snd, rcv)
    loss = d.retransmitted_bytes / d.bytes if d.bytes else 0.0
    bound = mathis_mbps(d.mss, d.rtt_p50_ms or rtt, loss) if rtt and loss else None
    queued = (
        d.rtt_min_ms is not None
        and d.rtt_p50_ms is not None
        and d.rtt_p50_ms >= QUEUE_RTT * d.rtt_min_ms
    )
    if d.late_loss_episodes >= LATE_EPISODES and bound is not None and not queued:
        ev.append(f"Mathis bound at {loss:.2%} loss: {_mbps(bound)} for a loss-based sender")
        v = _verdict(
            "congestion",
            0.65 if d.steady_mbps <= LOSS_BOUND_MARGIN * bound else 0.45,
            snd,
            "losses that go on after slow start, with no queue building, hold the sender's "
            "congestion window down",
            ev,
            d,
        )
        return CaptureDiagnosis(d, v, (bbr_fix(snd),), snd, rcv)
    if queued:
        ev.append(
            "the RTT rose above its minimum once up to speed: the sender fills the "
            "bottleneck's queue"
        )
        v = _verdict(
            "path-capacity",
            0.75,
            None,
            "healthy: neither window held the transfer back; the path's bottleneck sets the rate",
            ev,
            d,
        )
        return CaptureDiagnosis(d, v, (), snd, rcv)
    if d.idle_share >= IDLE_SHARE:
        ev.append(f"nothing in flight with the window open {d.idle_share:.0%} of the time")
        v = _verdict(
            "application",
            0.65,
            snd,
            f"the sending application ({d.sender}) does not supply data fast enough: TCP "
            "had nothing to send with the window open",
            ev,
            d,
        )
        return CaptureDiagnosis(d, v, (), snd, rcv)
    if _queue_at_times(d):
        ev.append(
            f"the RTT's 90th percentile once up to speed, {d.rtt_p90_ms:.1f} ms, stands above "
            f"its {d.rtt_min_ms:.1f} ms minimum: a queue built at times, so the sender had more "
            "than the path's bandwidth-delay product in flight"
        )
        v = _verdict(
            "path-capacity",
            0.6,
            None,
            "healthy: the sender filled the path at times (a queue built) and neither window "
            "held it back; the path's bottleneck sets the rate",
            ev,
            d,
        )
        return CaptureDiagnosis(d, v, (), snd, rcv)
    why = "Unacknowledged data stays in the send buffer: tcp_wmem max bounds the rate."
    fixes = (
        buffer_fix("net.ipv4.tcp_wmem", size, snd, mine(snd), why),
        setsockopt_fix("SO_SNDBUF", size // 2, snd),
    )
    ev.append(
        f"in flight stays at ~{format_bytes(d.inflight_p50)}, far below the window, with no "
        "queue and no ongoing loss"
    )
    v = _verdict(
        "sender-buffer",
        0.65,
        snd,
        f"the sender ({d.sender}) keeps too little data in flight for the path: its send "
        "buffer is smaller than the bandwidth-delay product",
        ev,
        d,
    )
    return CaptureDiagnosis(d, v, fixes, snd, rcv)


def _queue_at_times(d: FlowDirection) -> bool:
    """A queue built during the second half: the RTT's 90th percentile past the delay line's
    and timers' noise (advice/rules/policer.py no_queue_ms). A sender held by its send
    buffer keeps less than the bandwidth-delay product in flight, so no queue ever builds;
    healthy 100 Mbit/s x 50 ms lab captures show +10 ms at the p90 with the median at +2-6 %."""
    if d.rtt_min_ms is None or d.rtt_p90_ms is None:
        return False
    return d.rtt_p90_ms - d.rtt_min_ms > policer.no_queue_ms(d.rtt_min_ms)


def judge_capture(
    summary: CaptureSummary,
    is_local: Callable[[str], bool],
    sysctls: Mapping[str, str] | None = None,
    rate_bps: float = DEFAULT_RATE_BPS,
    others: int = 4,
) -> CaptureReport:
    diags = [
        application.refine_capture(judge_direction(d, is_local, sysctls, rate_bps))
        for d in summary.directions
    ]
    notes: list[str] = []
    if summary.skipped:
        notes.append(f"{summary.skipped} packets were not IP/TCP (or too short) and were skipped")
    if not diags:
        notes.append("no TCP flow in the capture moved enough data (64 KB) to judge")
        return CaptureReport(summary, None, (), tuple(notes))
    return CaptureReport(summary, diags[0], tuple(diags[1 : 1 + others]), tuple(notes))
