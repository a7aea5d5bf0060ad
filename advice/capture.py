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
The steps are the ladder both judges share (advice/ladder.py) over the capture's Observation
(advice/observation.py from_capture); this module words its verdicts.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from tcpwizard.advice import application, ladder
from tcpwizard.advice.conns import (
    DEFAULT_RATE_BPS,
    bbr_fix,
    buffer_fix,
    sack_words,
    scaling_fix,
)
from tcpwizard.advice.ladder import Finding, Judged, Words
from tcpwizard.advice.middlebox import capture_verdict, one_point_note
from tcpwizard.advice.model import Verdict
from tcpwizard.advice.observation import Observation, from_capture
from tcpwizard.advice.rules import policer
from tcpwizard.advice.snippets import setsockopt_fix
from tcpwizard.advice.window_law import UNSCALED_WINDOW, window_limit_mbps
from tcpwizard.checks.model import BdpTarget, Fix, HostRole
from tcpwizard.checks.window import recommended_buffer
from tcpwizard.measure.observe.capture import CaptureSummary, FlowDirection
from tcpwizard.units import format_bytes


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


def judge_direction(
    d: FlowDirection,
    is_local: Callable[[str], bool],
    sysctls: Mapping[str, str] | None = None,
    rate_bps: float = DEFAULT_RATE_BPS,
) -> CaptureDiagnosis:
    o = from_capture(d, is_local)
    ev = _evidence(d)
    rtt = d.rtt_min_ms or 0.0
    size = recommended_buffer(BdpTarget((rtt or 100.0) / 1e3, rate_bps, "measured"), None)

    def middlebox() -> Judged | None:
        found = capture_verdict(d, ev)
        return None if found is None else (found[0], (found[1],))

    verdict, fixes = ladder.judge(
        o,
        lambda f: _word(f, d, o, ev, sysctls, size),
        middlebox=middlebox,
        policer=lambda: policer.capture_verdict(d, ev, o.sender),
    )
    return CaptureDiagnosis(d, verdict, fixes, o.sender, o.receiver)


def _word(
    f: Finding,
    d: FlowDirection,
    o: Observation,
    ev: list[str],
    sysctls: Mapping[str, str] | None,
    size: int,
) -> Words:
    snd, rcv, rtt = o.sender, o.receiver, d.rtt_min_ms or 0.0

    def mine(host: HostRole) -> Mapping[str, str] | None:
        return sysctls if host == "local" else None

    if f.step == "reader":
        return _reader_words(d, o, ev), ev, ()
    if f.step == "window-scaling":
        missing = [
            who
            for who, syn in ((d.sender, d.sender_syn), (d.receiver, d.receiver_syn))
            if syn is not None and syn.wscale is None
        ]
        ev.append(f"no window scale option in the SYN of {' and '.join(missing)}")
        why = (
            "Without window scaling no window exceeds 64 KB (a middlebox that strips the "
            "option from SYNs has the same effect)."
        )
        return (
            "window scaling was not agreed in the handshake: the receive window stops at "
            f"64 KB, {_mbps(window_limit_mbps(UNSCALED_WINDOW, rtt)) if rtt else 'slow'} at "
            f"this RTT." + one_point_note(),
            ev,
            (scaling_fix(f.host or "both", why),),
        )
    if f.step == "receiver-window":
        why = (
            "The receive window, and so the rate per RTT, is bounded by the receiver's "
            "tcp_rmem max."
        )
        fixes = (
            buffer_fix("net.ipv4.tcp_rmem", size, rcv, mine(rcv), why),
            setsockopt_fix("SO_RCVBUF", size // 2, rcv),
        )
        ev.append(
            f"window law: {format_bytes(d.window_p50)} / {rtt:.1f} ms = {_mbps(o.window_mbps)}"
        )
        return (
            f"the receiver ({d.receiver}) does not offer a window as large as the path's "
            "bandwidth-delay product: the sender fills it and waits for window updates",
            ev,
            fixes,
        )
    if f.step == "no-sack":
        missing = [
            who
            for who, syn in ((d.sender, d.sender_syn), (d.receiver, d.receiver_syn))
            if syn is not None and not syn.sack
        ]
        ev.append(f"{d.retransmits} segments sent again")
        return sack_words(f, ev, f"no SACK-permitted in the SYN of {' and '.join(missing)}")
    if f.step == "congestion":
        bound = o.loss_bound_mbps or 0.0
        ev.append(f"Mathis bound at {o.loss:.2%} loss: {_mbps(bound)} for a loss-based sender")
        return (
            "losses that go on after slow start, with no queue building, hold the sender's "
            "congestion window down",
            ev,
            (bbr_fix(snd),),
        )
    if f.step == "queue":
        ev.append(
            "the RTT rose above its minimum once up to speed: the sender fills the "
            "bottleneck's queue"
        )
        return (
            "healthy: neither window held the transfer back; the path's bottleneck sets the rate",
            ev,
            (),
        )
    if f.step == "idle-sender":
        ev.append(f"nothing in flight with the window open {d.idle_share:.0%} of the time")
        return (
            f"the sending application ({d.sender}) does not supply data fast enough: TCP "
            "had nothing to send with the window open",
            ev,
            (),
        )
    if f.step == "queue-at-times":
        ev.append(
            f"the RTT's 90th percentile once up to speed, {d.rtt_p90_ms:.1f} ms, stands above "
            f"its {d.rtt_min_ms:.1f} ms minimum: a queue built at times, so the sender had more "
            "than the path's bandwidth-delay product in flight"
        )
        return (
            "healthy: the sender filled the path at times (a queue built) and neither window "
            "held it back; the path's bottleneck sets the rate",
            ev,
            (),
        )
    why = "Unacknowledged data stays in the send buffer: tcp_wmem max bounds the rate."
    fixes = (
        buffer_fix("net.ipv4.tcp_wmem", size, snd, mine(snd), why),
        setsockopt_fix("SO_SNDBUF", size // 2, snd),
    )
    ev.append(
        f"in flight stays at ~{format_bytes(d.inflight_p50)}, far below the window, with no "
        "queue and no ongoing loss"
    )
    return (
        f"the sender ({d.sender}) keeps too little data in flight for the path: its send "
        "buffer is smaller than the bandwidth-delay product",
        ev,
        fixes,
    )


def _reader_words(d: FlowDirection, o: Observation, ev: list[str]) -> str:
    """The receiving application not reading, as the capture saw it."""
    if o.reader_stall == "zero-window":
        return (
            f"the receiving application ({d.receiver}) does not read fast enough: its buffer "
            "fills, the window it offers closes to zero and the sender waits"
        )
    if o.reader_stall == "acks-held":
        ev.append(
            f"the receiver held back its ACKs for {d.held_ack_share:.0%} of the data (several "
            "segments that arrived over 10 ms or more under one ACK): a Linux receiver "
            "acknowledges every second segment at once only when its reader has made room"
        )
        return (
            f"the receiving application ({d.receiver}) does not read fast enough: its kernel "
            "holds back the ACKs until the reader makes room, and the sender waits for them"
        )
    ev.append(
        f"the window was full in {d.window_full_share:.0%} of the round trips, and "
        f"{d.edge_still_share:.0%} of the data was acknowledged without the receiver's "
        "right edge moving: it arrived and stayed unread"
    )
    return (
        f"the receiving application ({d.receiver}) does not read fast enough: the data "
        "it leaves unread holds its window shut, not the size of its buffer"
    )


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
