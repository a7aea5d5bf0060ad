"""From evidence to one verdict.

The order of reasoning follows how a wizard works a slow path: first rule out a healthy path
(the network itself is the limit), then read what the sender's kernel says held it back
(TCP_INFO chrono counters: rwnd-limited, sndbuf-limited, busy — NDT's heuristics did the same
with web100), cross-check against the window law (window / RTT) and the Mathis bound, and only
then fall back on predictions from the configuration alone. Each rule returns a candidate with
a confidence; the most confident one is the verdict.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tcpwizard.advice import calibration
from tcpwizard.advice.capacity_view import LATE_LOSS_EVENTS, reached_mbps, steady_mbps
from tcpwizard.advice.capacity_view import below_path as _below_path
from tcpwizard.advice.capacity_view import capacity as _capacity
from tcpwizard.advice.capacity_view import capacity_sure as _capacity_sure
from tcpwizard.advice.capacity_view import capacity_view as _capacity_view
from tcpwizard.advice.capacity_view import late_retransmits as _late_retransmits
from tcpwizard.advice.capacity_view import own_rate_only as _own_rate_only
from tcpwizard.advice.capacity_view import receiver_saw_path as _receiver_saw_path
from tcpwizard.advice.evidence import CHRONO_SHARE, CROSS_FREE_SHARE
from tcpwizard.advice.evidence import HEALTHY_SHARE as HEALTHY_SHARE
from tcpwizard.advice.evidence import Candidate as _Candidate
from tcpwizard.advice.evidence import Direction as _Direction
from tcpwizard.advice.evidence import Evidence as Evidence  # re-exported: the engine's input
from tcpwizard.advice.evidence import audit_of as _audit_of
from tcpwizard.advice.evidence import chrono as _chrono
from tcpwizard.advice.evidence import directions as _directions
from tcpwizard.advice.evidence import mss as _mss
from tcpwizard.advice.evidence import rtt_ms as _rtt_ms
from tcpwizard.advice.middlebox import device_fix, syn_tampering, window_scaling_stripped
from tcpwizard.advice.model import ConfidenceBasis, LimitingFactor, Verdict, WizardGap
from tcpwizard.advice.others_queue import others_queue as _others_queue
from tcpwizard.advice.ramp import still_ramping as _still_ramping
from tcpwizard.advice.rules import CAUSE_RULES, bufferbloat, policer
from tcpwizard.advice.streams import streams_fix, streams_needed
from tcpwizard.advice.window_evidence import at_bound as _at_bound
from tcpwizard.advice.window_evidence import buffer_candidate as _buffer_candidate
from tcpwizard.advice.window_evidence import loss_fraction as _loss_fraction
from tcpwizard.advice.window_evidence import lossy as _lossy
from tcpwizard.advice.window_law import (
    LOSS_BASED,
    SEND_OVERSHOOT_BYTES,
    UNSCALED_WINDOW,
    mathis_mbps,
    max_receive_window,
    max_send_window,
    scaling_enabled,
    window_limit_mbps,
)
from tcpwizard.checks.model import Fix, HostAudit, HostRole
from tcpwizard.units import format_mbps as _fmt

WEAK = 0.4  # a limit named with less confidence loses to "the hosts allow the capacity"
# A window counter whose buffer allows the path: below WEAK, so any named cause wins.
BUFFER_ALLOWS_PATH = 0.35
PATH_GAP = {"bufferbloat": "path-capacity"}


@dataclass(frozen=True)
class Diagnosis:
    verdict: Verdict
    fixes: tuple[Fix, ...]  # only those that answer the limiting factor, for the right host


def _rule_healthy(ev: Evidence, d: _Direction) -> _Candidate | None:
    cap, cur = _capacity(ev, d), d.current
    if cap is None or cur is None or cap <= 0 or _own_rate_only(ev, d):
        return None
    if policer.rule(ev, d) is not None:
        # A policed transfer's rate (its bucket's burst averaged in) is no proof of the
        # path's capacity: it must not overrule a weak probe and call the path healthy.
        return None
    share = reached_mbps(cur) / cap
    if share < HEALTHY_SHARE:
        return None
    evidence = [
        f"{cur.mode} moved {_fmt(cur.throughput_mbps)} ({_fmt(reached_mbps(cur))} once up to "
        f"speed) of {_fmt(cap)} capacity"
    ]
    if share > 1.1:
        evidence.append("the capacity probe was the slower one (sender-limited): a lower bound")
    if note := _capacity_view(ev, d)[1]:
        evidence.append(note)
    return _Candidate(
        d.name,
        "path-capacity",
        min(0.95, 0.6 + min(share, 1.0) * _capacity_sure(ev, d) / 3),
        None,
        f"{d.name}: the transfer reached {min(share, 1.0):.0%} of the path's capacity; the "
        "network itself is the limit and the hosts are tuned well enough for it.",
        tuple(evidence),
        decisive=True,
    )


def _scaling_off(ev: Evidence, role: HostRole, audit: HostAudit | None) -> bool:
    """Window scaling is off on that host: from its audit, or for an unaudited far end
    from the handshake (it did not agree to the option this host offered)."""
    if audit is not None:
        return scaling_enabled(audit) is False
    if window_scaling_stripped(ev.peer_handshake, ev.peer):
        return False  # the handshake shows the path took it out, not the far end
    return role == "peer" and ev.peer_handshake is not None and ev.peer_handshake.peer_scaling_off


def _capacity_trusted(ev: Evidence, d: _Direction) -> bool:
    """Whether the capacity may rule a limit out: measured by a transfer, or probed with
    a far end that reflects probes. A peerless guess alone (it read 2-470 Mbit/s on an
    80 Mbit/s lab path) never excuses a limit that the settings show."""
    if d.current is not None or ev.path is None or ev.path.peer:
        return True
    cap = ev.path.capacity
    return cap is not None and cap.confidence >= 0.5


def _rule_window_scaling(ev: Evidence, d: _Direction) -> _Candidate | None:
    off = [
        role
        for role, audit in ((d.sender_role, d.sender), (d.receiver_role, d.receiver))
        if _scaling_off(ev, role, audit)
    ]
    if not off:
        return None
    host: HostRole = off[0] if len(off) == 1 else "both"
    rtt = _rtt_ms(ev, d)
    evidence = [
        f"net.ipv4.tcp_window_scaling = 0 on {role}"
        if _audit_of(ev, role) is not None
        else f"the {role} host did not agree to window scaling in the TCP handshake"
        for role in off
    ]
    confidence = 0.7
    if rtt:
        ceiling = window_limit_mbps(UNSCALED_WINDOW, rtt)
        evidence.append(f"64 KB / {rtt:.1f} ms = {_fmt(ceiling)} at most")
        cap = _capacity(ev, d)
        if cap is not None and ceiling >= HEALTHY_SHARE * cap and _capacity_trusted(ev, d):
            return None  # short path: 64 KB is enough, not the limit here
        if d.current and d.current.throughput_mbps <= 1.3 * ceiling:
            evidence.append(f"measured {_fmt(d.current.throughput_mbps)}, at that ceiling")
            confidence = 0.95
    return _Candidate(
        d.name,
        "window-scaling",
        confidence,
        host,
        f"{d.name}: TCP window scaling (RFC 7323) is off on the {host} host, so the window "
        "cannot exceed 64 KB whatever the buffers are; turn it on at both ends.",
        tuple(evidence),
    )


def _rule_receiver_window(ev: Evidence, d: _Direction) -> _Candidate | None:
    rwnd, _, _ = _chrono(d.current)
    rtt, cur = _rtt_ms(ev, d), d.current
    evidence: list[str] = []
    confidence = 0.0
    if not _below_path(ev, d) or window_scaling_stripped(ev.peer_handshake, ev.peer):
        return None  # no receive buffer opens a window the path keeps unscaled
    if rwnd is not None and rwnd >= CHRONO_SHARE:
        evidence.append(f"sender was receive-window limited {rwnd:.0%} of the time (TCP_INFO)")
        confidence = 0.6 + 0.35 * min(1.0, rwnd)
    window = max_receive_window(d.receiver) if d.receiver else None
    if window and rtt and cur:
        limit = window_limit_mbps(window, rtt)
        cap = _capacity(ev, d)
        if (
            cap is not None
            and limit >= HEALTHY_SHARE * cap
            and confidence > 0
            and cur.rcv_autotuning
        ):
            # The receiver's own buffer allows the path (window law): the window the sender
            # waited for was held below that size by data left unread (a receiver starved
            # of CPU, advice/rules/host_cpu.py) or autotuning still growing it. A larger
            # tcp_rmem changes neither, so the buffer is named only if nothing else is.
            # (An application that set SO_RCVBUF stops autotuning: tcp_rmem is then no
            # ceiling of its buffer, and its own size is what the window law reads.)
            # A window-law bound above the path is shown as that: no figure of a report
            # exceeds what the line carries (advice/guard.py).
            allows = _fmt(limit) if limit <= cap else f"more than the {_fmt(cap)} capacity"
            evidence.append(
                f"but the receiver's buffer allows ~{window / 1e6:.2f} MB / {rtt:.1f} ms = "
                f"{allows}: the window was held below its size, not by it"
            )
            confidence = min(confidence, BUFFER_ALLOWS_PATH)
        if cap is not None and limit < HEALTHY_SHARE * cap:
            evidence.append(
                f"receiver's largest window ~{window / 1e6:.2f} MB / {rtt:.1f} ms = {_fmt(limit)}"
                f" < capacity {_fmt(cap)}"
            )
            confidence = max(confidence, 0.55)
            if _at_bound(cur, _lossy(ev, d, limit, window), limit):
                confidence = max(confidence, 0.75)
    return _buffer_candidate(
        ev,
        d,
        "receiver-window",
        confidence,
        d.receiver_role,
        f"{d.name}: the receiver ({d.receiver_role}) does not offer a window as large as the "
        "path's bandwidth-delay product, so the sender idles waiting for window updates.",
        evidence,
    )


def _rule_sender_buffer(ev: Evidence, d: _Direction) -> _Candidate | None:
    _, snd, _ = _chrono(d.current)
    cur, rtt = d.current, _rtt_ms(ev, d)
    evidence: list[str] = []
    confidence = 0.0
    if not _below_path(ev, d):
        return None  # at the path's rate a full send buffer held nothing back
    if snd is not None and snd >= CHRONO_SHARE:
        evidence.append(f"sender was send-buffer limited {snd:.0%} of the time (TCP_INFO)")
        confidence = 0.6 + 0.35 * min(1.0, snd)
    inflight = max_send_window(d.sender) if d.sender else None
    cap = _capacity(ev, d)
    if inflight and rtt and cap:
        limit = window_limit_mbps(inflight, rtt)
        if limit >= HEALTHY_SHARE * cap and cur is not None and cur.mode == "autotune":
            # The autotuned buffer allows the path: a fast sender fills its buffer whatever
            # else holds it back, so the time counter alone does not name the buffer.
            return None
        if limit < HEALTHY_SHARE * cap:
            # Up to one GSO skb rides beyond the buffer: the bound is a range.
            high = window_limit_mbps(inflight + SEND_OVERSHOOT_BYTES, rtt)
            top = _fmt(high) if high <= cap else f"the path's {_fmt(cap)}"  # no rate above it
            evidence.append(
                f"sender's tcp_wmem max keeps ~{inflight / 1e6:.2f}-"
                f"{(inflight + SEND_OVERSHOOT_BYTES) / 1e6:.2f} MB in flight: "
                f"~{_fmt(limit)} to {top}"
            )
            confidence = max(confidence, 0.5)
            # The measured rate sits at that bound: the buffer, not the network, set it
            # (TCP_INFO's sndbuf_limited undercounts with pacing congestion control, and
            # misses a sender that is also cwnd-limited now and then).
            if cur is not None and _at_bound(cur, _lossy(ev, d, limit, inflight), high):
                confidence = max(confidence, 0.75)
    return _buffer_candidate(
        ev,
        d,
        "sender-buffer",
        confidence,
        d.sender_role,
        f"{d.name}: the sender ({d.sender_role}) cannot keep a bandwidth-delay product of "
        "data in flight: its send buffer is too small.",
        evidence,
    )


def _rule_congestion(ev: Evidence, d: _Direction) -> _Candidate | None:
    cur, rtt = d.current, _rtt_ms(ev, d)
    loss = _loss_fraction(ev, d)
    if cur is None or rtt is None or not loss or cur.retransmits == 0:
        return None
    cc = cur.congestion_control or (d.sender.congestion_control if d.sender else "")
    bound = mathis_mbps(_mss(d), rtt, loss, cc)
    evidence = [
        f"{cur.retransmits} retransmissions (~{loss:.2%} of segments)",
        f"loss bound ({cc or 'reno'}) at that loss: {_fmt(bound)}; measured "
        f"{_fmt(cur.throughput_mbps)}",
    ]
    confidence = 0.55
    if bound is not None and cur.throughput_mbps <= 1.5 * bound:
        confidence = 0.85
    elif bound is not None and cur.throughput_mbps > 3 * bound:
        late = _late_retransmits(cur)
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
            evidence.append("throughput is far above that bound: the losses were a burst")
    if cc.startswith("bbr") and loss < BBR_LOSS_TOLERANCE:
        # A model-based sender paces at the bandwidth it measures and does not back off on
        # loss this low: the loss bound is no law for it, and its rate says nothing of the
        # losses. Something else held it (its windows, the path).
        confidence = min(confidence, BBR_LOSS_CONFIDENCE)
        evidence.append(
            f"the sender runs {cc}, which keeps its rate through loss below "
            f"{BBR_LOSS_TOLERANCE:.0%}: these losses do not hold it down"
        )
    if (full := _fills_free_share(ev, d) or _others_queue(ev, d)) is not None:
        # Every TCP flow that fills what a bottleneck leaves it sees the loss its rate
        # implies (that is what the loss bound says); only the free share tells those
        # losses from ones that hold it below the path.
        confidence = min(confidence, FULL_SHARE_LOSS_CONFIDENCE)
        evidence.append(full)
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
        d.sender_role,
        f"{d.name}: packet loss holds the congestion window down.{advice}",
        tuple(evidence),
        streams=streams,
    )


# BBR reacts to loss only above a threshold: v1 (Linux's `bbr`) treats a round losing over
# 20 % as policed (lt_loss_thresh = 50/256) and ignores less; BBRv2/v3 bound their inflight
# when a round loses over 2 % (bbr_loss_thresh). The lower of the two.
BBR_LOSS_TOLERANCE = 0.02
# Below WEAK: such losses name the congestion only when nothing else explains the rate.
BBR_LOSS_CONFIDENCE = 0.3
# Below CROSS_SHARED_CONFIDENCE: losses that a full share of a shared path explains do not
# outrank the sharing itself.
FULL_SHARE_LOSS_CONFIDENCE = 0.45


def _fills_free_share(ev: Evidence, d: _Direction) -> str | None:
    """Evidence that this transfer filled what others left free of a shared path (the
    available bandwidth, measured upload only): it reached the healthy share of the low
    end of what was free, so its losses are those of a full bottleneck."""
    av = ev.path.available if ev.path else None
    cur = d.current
    if av is None or d.name != "up" or cur is None or not av.loaded:
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


def _streams_work_around(
    ev: Evidence, d: _Direction, bound: float | None, cc: str
) -> tuple[int, float] | None:
    """(N, rate per stream) when loss holds a loss-based stream down and buffers are not
    what limits it: N streams, each getting the Mathis bound (or what one got, if less),
    add up to the capacity."""
    cur, cap = d.current, _capacity(ev, d)
    if cur is None or bound is None or cap is None or cc not in LOSS_BASED:
        return None
    if steady_mbps(cur) >= HEALTHY_SHARE * cap:
        return None
    rwnd, sndbuf, _busy = _chrono(cur)
    if (rwnd or 0) > 0.2 or (sndbuf or 0) > 0.2:
        return None  # a window limit: streams would only hide the buffer problem
    per = min(bound, cur.throughput_mbps)  # the lower: rather a stream too many
    n = streams_needed(cap, per)
    return None if n is None else (n, per)


def _rule_cached_metrics(ev: Evidence, d: _Direction) -> _Candidate | None:
    if d.sender is None:
        return None
    stale = [
        f
        for f in d.sender.findings
        if "metrics" in f.id and f.severity in ("warn", "crit") and "ssthresh" in f.observed
    ]
    if not stale or d.current is None:
        return None
    rwnd, snd, _ = _chrono(d.current)
    if (rwnd or 0) >= CHRONO_SHARE or (snd or 0) >= CHRONO_SHARE:
        return None
    return _Candidate(
        d.name,
        "cached-metrics",
        0.7,
        d.sender_role,
        f"{d.name}: the sender reuses a slow-start threshold cached from an earlier, worse "
        "connection, so it leaves slow start far below the bandwidth-delay product and grows "
        "one segment per RTT.",
        (stale[0].observed, f"{d.current.mode} moved {_fmt(d.current.throughput_mbps)}"),
    )


def _rule_application(ev: Evidence, d: _Direction) -> _Candidate | None:
    rwnd, snd, busy = _chrono(d.current)
    # A transfer that moved data was busy for some of its time on every kernel that counts
    # busy time (4.10+); 0 is a kernel without the chrono fields, not an idle application.
    if busy is None or busy <= 0 or busy >= 0.6 or d.current is None:
        return None
    if (rwnd or 0) >= CHRONO_SHARE or (snd or 0) >= CHRONO_SHARE:
        return None
    return _Candidate(
        d.name,
        "application",
        0.6,
        d.sender_role,
        f"{d.name}: the sender had data in flight only {busy:.0%} of the time: the application,"
        " CPU or disk did not keep TCP busy.",
        (f"tcpi_busy_time share {busy:.0%}",),
    )


def _rule_interface(ev: Evidence, d: _Direction) -> _Candidate | None:
    for role, audit in ((d.sender_role, d.sender), (d.receiver_role, d.receiver)):
        if audit is None:
            continue
        bad = [
            f
            for f in audit.findings
            if f.id.startswith(("interface", "nic", "link")) and f.severity == "crit"
        ]
        if bad:
            return _Candidate(
                d.name,
                "interface",
                0.65,
                role,
                f"{d.name}: the {role} host's network interface limits the transfer.",
                tuple(f.message for f in bad),
            )
    return None


def _rule_predicted(ev: Evidence, d: _Direction) -> _Candidate | None:
    """No transfer (the far end runs no serve): judge this host's own limits against the
    measured path, in both roles, with the confidence a prediction deserves."""
    if d.current is not None or ev.path is None or ev.path.capacity is None:
        return None
    rtt, cap = ev.path.rtt.min, ev.path.capacity.mbps
    if rtt <= 0 or cap <= 0:
        return None
    hs = ev.peer_handshake
    unscaled = window_limit_mbps(UNSCALED_WINDOW, rtt)
    if (
        ev.peer is None
        and hs is not None
        and hs.peer_scaling_off
        and unscaled < HEALTHY_SHARE * cap
    ):
        return _Candidate(
            d.name,
            "window-scaling",
            0.6,
            "peer",
            "predicted: the far end did not agree to TCP window scaling in the handshake (it "
            "is off there, or a middlebox strips the option), so no window above 64 KB in "
            "either direction.",
            (
                f"handshake on port {hs.port}: no window scale option from the far end",
                f"64 KB / {rtt:.1f} ms = {_fmt(unscaled)} < capacity {_fmt(cap)}",
            ),
        )
    if (
        scaling_enabled(ev.local) is False
        and window_limit_mbps(UNSCALED_WINDOW, rtt) < HEALTHY_SHARE * cap
    ):
        return _Candidate(
            d.name,
            "window-scaling",
            0.6,
            "local",
            "window scaling is off on this host: no window above 64 KB in either direction.",
            (f"64 KB / {rtt:.1f} ms = {_fmt(window_limit_mbps(UNSCALED_WINDOW, rtt))}",),
        )
    limits: list[tuple[float, LimitingFactor, str]] = []
    rwin = max_receive_window(ev.local)
    if rwin:
        limits.append((window_limit_mbps(rwin, rtt), "receiver-window", "receive"))
    swin = max_send_window(ev.local)
    if swin:
        limits.append((window_limit_mbps(swin, rtt), "sender-buffer", "send"))
    if not limits:
        return None
    limit, factor, verb = min(limits)
    if limit >= HEALTHY_SHARE * cap:
        return _Candidate(
            d.name,
            "path-capacity",
            0.5,
            None,
            "this host's buffers allow the measured capacity in both directions (predicted:"
            " no test transfer without serve on the far end).",
            (f"slowest: {verb} {_fmt(limit)} at {rtt:.3g} ms vs capacity {_fmt(cap)}",),
        )
    return _Candidate(
        d.name,
        factor,
        0.55,
        "local",
        f"predicted: this host can {verb} at most {_fmt(limit)} on this path "
        f"({rtt:.1f} ms), below its capacity of {_fmt(cap)}.",
        (
            f"window law: largest {verb} window / min RTT = {_fmt(limit)}",
            f"capacity {_fmt(cap)} ({ev.path.capacity.method})",
        ),
    )


def _rule_hosts_allow(ev: Evidence, d: _Direction) -> _Candidate | None:
    """Nothing held the sender back and both hosts' windows allow the capacity: a short test
    that ended before the rate was reached is not a fault of the hosts."""
    cur, rtt, cap = d.current, _rtt_ms(ev, d), _capacity(ev, d)
    if cur is None or rtt is None or cap is None or d.sender is None or d.receiver is None:
        return None
    rwnd, snd, busy = _chrono(cur)
    if (rwnd or 0) >= CHRONO_SHARE or (snd or 0) >= CHRONO_SHARE or (busy or 1.0) < 0.6:
        return None
    windows = [max_receive_window(d.receiver), max_send_window(d.sender)]
    if any(w is None or window_limit_mbps(w, rtt) < HEALTHY_SHARE * cap for w in windows):
        return None
    if any(f.id == "cached_metrics" and f.severity in ("warn", "crit") for f in d.sender.findings):
        return None
    if not _still_ramping(cur):
        return None  # the rate had settled below the capacity: not a short test's ramp
    return _Candidate(
        d.name,
        "path-capacity",
        0.45,
        None,
        f"{d.name}: nothing held the sender back and both hosts' windows allow the path's "
        "capacity; the test ended while TCP was still ramping up (a longer run shows the rate).",
        (
            f"{cur.mode} moved {_fmt(cur.throughput_mbps)} in {cur.seconds:.1f} s of "
            f"{_fmt(cap)} capacity",
            f"receive- and send-window limited less than {CHRONO_SHARE:.0%} of the time",
        ),
    )


def _rule_seen_from_receiver(ev: Evidence, d: _Direction) -> _Candidate | None:
    """A download whose sender reports nothing (a web server, `check URL`): our receiving
    socket's TCP_INFO says whether the window we offered was filled every RTT (then the
    receiver-window rule speaks) or the sender kept far less in flight than that window
    allowed: its send buffer, or losses (segments out of order) holding its window down."""
    cur = d.current
    view = cur.receiver_view if cur is not None else None
    if cur is None or view is None or d.sender is not None or view.max_rcv_wnd <= 0:
        return None
    rtt = _rtt_ms(ev, d) or view.rcv_rtt_us / 1e3
    if not rtt or not _below_path(ev, d):
        return None
    offered = window_limit_mbps(view.max_rcv_wnd, rtt)
    if _receiver_saw_path(cur, rtt, steady_mbps(cur)):
        # The download filled the bottleneck's queue: whatever a peerless probe guessed
        # above it, the network set this rate.
        return _Candidate(
            d.name,
            "path-capacity",
            0.65,
            None,
            f"{d.name}: the download filled the path's bottleneck (its queue raised the RTT "
            "our receiver saw): the network itself is the limit.",
            (
                f"{cur.mode} moved {_fmt(steady_mbps(cur))} once up to speed; the receiver's "
                f"RTT {view.rcv_rtt_us / 1e3:.1f} ms (90th percentile "
                f"{view.rcv_rtt_high_us / 1e3:.1f} ms) against {rtt:.1f} ms minimum",
                "the capacity probe toward a web server is peerless (a guess)",
            ),
        )
    if steady_mbps(cur) >= RECEIVER_FILLED * offered:
        return None  # our window was filled each RTT: the receiver-window rule speaks
    evidence = [
        f"{cur.mode} moved {_fmt(cur.throughput_mbps)} ({_fmt(steady_mbps(cur))} once up to "
        f"speed); the window we offered, {view.max_rcv_wnd / 1e6:.2f} MB / {rtt:.1f} ms, "
        f"allowed {_fmt(offered)} (TCP_INFO of our receiving socket)",
    ]
    if view.ooo_packets > 0:
        evidence.append(f"{view.ooo_packets} segments arrived out of order: losses on the way")
        return _Candidate(
            d.name,
            "congestion",
            0.55,
            d.sender_role,
            f"{d.name}: the sender keeps far less in flight than our window allows and "
            "segments are lost on the way: losses hold its congestion window down.",
            tuple(evidence),
        )
    evidence.append("no segment arrived out of order: nothing was lost")
    return _Candidate(
        d.name,
        "sender-buffer",
        0.6,
        d.sender_role,
        f"{d.name}: the sender ({d.sender_role}) keeps far less data in flight than our "
        "window allows, without losses: its send buffer (tcp_wmem) is too small for the "
        "path (or the server application supplies data slower).",
        tuple(evidence),
    )


RECEIVER_FILLED = 0.6  # of the window we offered, arriving per RTT: the window was the limit


WINDOW_FACTORS = ("receiver-window", "sender-buffer", "window-scaling")
CROSS_TAKES_FREE = 1.3  # the transfer got no more than this times what is free
# Below the congestion and window rules (0.55-0.9 when their evidence holds), above WEAK:
# sharing explains the gap unless the transfer's own evidence names a limit of its own.
CROSS_SHARED_CONFIDENCE = 0.5
# Others' standing queue, not measured as a share: below the measured share's 0.8, above
# what congestion keeps when that queue explains its losses (FULL_SHARE_LOSS_CONFIDENCE).
CROSS_QUEUE_CONFIDENCE = 0.7


def _rule_cross_traffic(ev: Evidence, d: _Direction) -> _Candidate | None:
    """The capacity is there, but other traffic takes a share of it (the available
    bandwidth, measured upload only, was mostly taken before this transfer). Unresponsive
    traffic leaves the transfer about what is free; TCP flows yield part of their share
    (they split a bottleneck), so a transfer faster than what was free still shares it."""
    av = ev.path.available if ev.path else None
    cur, cap = d.current, _capacity(ev, d)
    if cur is None or cap is None:
        return None
    if av is None or d.name != "up" or not av.loaded or av.free_share > CROSS_FREE_SHARE:
        # No measured share taken (or none measured): a queue others kept standing while
        # this transfer ran below the path says the same.
        queue = _others_queue(ev, d)
        if queue is None:
            return None
        return _Candidate(
            d.name,
            "cross-traffic",
            CROSS_QUEUE_CONFIDENCE,
            None,
            f"{d.name}: the path is shared: others' traffic keeps a queue standing at the "
            "bottleneck, and this transfer gets a share of what is left. No setting on "
            "either host changes that: move the data when the path is quieter, over a less "
            "loaded path, or ask the network's operators for a reserved or prioritised "
            "path; parallel streams take a larger share only at the others' expense.",
            (queue,),
        )
    free = av.estimate_bps / 1e6
    rate = steady_mbps(cur)
    if av.free_share > CROSS_FREE_SHARE or rate >= HEALTHY_SHARE * cap:
        return None
    taken = max(0.0, av.capacity_bps / 1e6 - free)
    # A short transfer's last samples can run above what is free while it overdrives the
    # queue (unresponsive traffic loses its share of the drops too); its average cannot.
    leftover = min(rate, cur.throughput_mbps) <= CROSS_TAKES_FREE * free
    queue = _others_queue(ev, d)
    if leftover:
        confidence = 0.8 if rate >= 0.6 * free else 0.55
        got = "this transfer gets about what is left"
        found = f"transfer {_fmt(rate)} once up to speed, about what is free"
    else:
        # It took more than was free: the others gave way, as TCP flows do, and what they
        # kept is what it lacks; any limit of its own (a window, losses) is named with
        # more confidence by its own rule.
        confidence = CROSS_SHARED_CONFIDENCE
        got = "this transfer gets a share of it, as TCP flows sharing a bottleneck do"
        found = (
            f"transfer {_fmt(rate)} once up to speed: more than was free, so the others "
            f"gave way in part and kept about {_fmt(max(0.0, cap - rate))}"
        )
    if queue:  # the queue others kept shows the sharing too
        confidence = max(confidence, CROSS_QUEUE_CONFIDENCE)
    return _Candidate(
        d.name,
        "cross-traffic",
        confidence,
        None,
        f"{d.name}: the path is shared: its capacity is there, but other traffic took about "
        f"{_fmt(taken)} of it before this transfer and {got}. No setting on either host "
        "changes that: move the data when the path is quieter (nights, weekends), over "
        "a less loaded path, or ask the network's operators for a reserved or prioritised "
        "path; parallel streams take a larger share only at the others' expense.",
        (
            f"available bandwidth {_fmt(free)} ({_fmt(av.low_bps / 1e6)}-"
            f"{_fmt(av.high_bps / 1e6)}) of capacity {_fmt(av.capacity_bps / 1e6)}: "
            f"{av.free_share:.0%} free ({av.loaded} of {av.streams} periodic streams built "
            f"a queue, {av.elapsed_s:.1f} s)",
            found,
            *((queue,) if queue else ()),
        ),
    )


RULES: tuple[Callable[[Evidence, _Direction], _Candidate | None], ...] = (
    _rule_healthy,
    _rule_cross_traffic,
    _rule_window_scaling,
    _rule_receiver_window,
    _rule_sender_buffer,
    _rule_cached_metrics,
    _rule_congestion,
    _rule_interface,
    _rule_application,
    _rule_predicted,
    _rule_hosts_allow,
    _rule_seen_from_receiver,
    *CAUSE_RULES,
)


def _gap(
    ev: Evidence, dirs: Sequence[_Direction], factor: str, direction: str | None = None
) -> WizardGap:
    """Current vs tuned throughput of the verdict's direction (the slowest one if the
    verdict has none)."""
    named = [d for d in dirs if d.current and d.name == direction]
    worst = (
        named[0]
        if named
        else min(
            (d for d in dirs if d.current),
            key=lambda d: d.current.throughput_mbps if d.current else 0.0,
            default=None,
        )
    )
    if worst is None or worst.current is None:
        return _predicted_gap(ev, factor)
    if factor == "path-capacity":
        # Healthy: the rates once up to speed (a short test's ramp is not a gap).
        now = steady_mbps(worst.current)
        tuned = steady_mbps(worst.best) if worst.best else now
        if worst.best is None or tuned <= now:
            return WizardGap(now, now, True, worst.current.mode)
        return WizardGap(now, tuned, True, worst.best.mode)
    current = worst.current.throughput_mbps
    cap = _capacity(ev, worst)
    # The tuned side: what the best tuned mode held once up to speed. Each mode's test ends
    # when its own rate settles (measure/engine/steady.py), so a mode that settles sooner (DRS,
    # sized from the BDP) carries more of the common slow start in its whole-run average.
    held = [
        (steady_mbps(m), m)
        for m in (ev.transfer.modes if ev.transfer else ())
        if m.error is None and m.direction == worst.name and m.mode != "untuned"
    ]
    if held:
        rate, mode = max(held, key=lambda t: t[0])
        if rate > 1.1 * current:
            return WizardGap(current, rate, True, mode.mode)
    return WizardGap(current, cap, False)


def _predicted_gap(ev: Evidence, factor: str) -> WizardGap:
    if ev.path is None or ev.path.capacity is None or ev.path.rtt.min <= 0:
        return WizardGap()
    rtt, cap = ev.path.rtt.min, ev.path.capacity.mbps
    window = {
        "receiver-window": max_receive_window(ev.local),
        "sender-buffer": max_send_window(ev.local),
        "window-scaling": UNSCALED_WINDOW,
    }.get(factor)
    if window is None:
        return WizardGap()
    return WizardGap(min(cap, window_limit_mbps(window, rtt)), cap, False)


def _fixes_for(ev: Evidence, factor: str, host: HostRole | None) -> tuple[Fix, ...]:
    """The fixes for the named host that declare they answer this factor."""
    if host is None:
        return ()
    pools: list[tuple[Fix, ...]] = []
    if host in ("local", "both"):
        pools.append(ev.local_fixes)
    if host in ("peer", "both"):
        pools.append(ev.peer_fixes)
    chosen: list[Fix] = []
    for pool in pools:
        chosen.extend(f for f in pool if factor in f.answers and f not in chosen)
    if any(f.kind == "route" for f in chosen):
        # A route clamp caps every socket, whatever buffer the application asks for.
        chosen = [f for f in chosen if f.kind != "setsockopt"]
    return tuple(chosen)


def _audit_only(ev: Evidence) -> Diagnosis:
    worst = [f for f in ev.local.findings if f.severity == "crit"] or [
        f for f in ev.local.findings if f.severity == "warn"
    ]
    evidence = tuple(f.message for f in worst[:5])
    why = "no path was measured, so no single limiting factor can be named; " + (
        f"{len(worst)} setting(s) would limit a long fat path." if worst else "settings look fine."
    )
    return Diagnosis(
        Verdict("unknown", 0.0, "local" if worst else None, why, evidence, WizardGap()),
        ev.local_fixes,
    )


def _unexplained(ev: Evidence, dirs: Sequence[_Direction], slow_dirs: set[str]) -> Diagnosis:
    """No rule explains what was measured: `unknown`, with the slow ways' numbers."""
    shown = [d for d in dirs if d.current and (not slow_dirs or d.name in slow_dirs)]
    evidence = tuple(
        f"{d.name}: {d.current.mode} {_fmt(d.current.throughput_mbps)}"
        + (f" of {_fmt(cap)} capacity" if (cap := _capacity(ev, d)) else "")
        for d in shown
        if d.current
    )
    why = "no rule explains the measured throughput; the evidence is shown as measured."
    slowest = min(
        shown, key=lambda d: d.current.throughput_mbps if d.current else 0.0, default=None
    )
    slow = slowest.name if slow_dirs and slowest else None
    return Diagnosis(
        Verdict("unknown", 0.2, None, why, evidence, _gap(ev, dirs, "unknown", slow)), ()
    )


def _predicted_healthy(
    ev: Evidence, dirs: Sequence[_Direction], best: _Candidate, missing: Sequence[str]
) -> Diagnosis:
    """Nothing was measured: settings that allow the capacity are no proof that the path
    is healthy, so the verdict stays unknown and says what it rests on."""
    why = (
        "not measured: no test transfer ran, so the limiting factor cannot be named; "
        f"{best.explanation}"
    )
    evidence = (*best.evidence, *(f"missing: {m}" for m in missing))
    return Diagnosis(Verdict("unknown", 0.2, None, why, evidence, _gap(ev, dirs, "unknown")), ())


def _slower_way_first(
    ev: Evidence, dirs: Sequence[_Direction], limits: list[_Candidate]
) -> list[_Candidate]:
    """The limits of the way that moved the smaller share of its capacity: the factor that
    limits throughput most is the slower way's, however sure another way's rule is. Ways
    within the healthy share of each other (headers and sampling spread) count as alike;
    then every limit competes on its confidence."""
    limited = {c.direction for c in limits}
    shares: dict[str, float] = {}
    for d in dirs:
        cap = _capacity(ev, d)
        if d.name in limited and d.current is not None and cap:
            shares[d.name] = steady_mbps(d.current) / cap
    if len(shares) < 2:
        return limits
    slower = min(shares, key=lambda k: shares[k])
    faster = max(shares, key=lambda k: shares[k])
    if shares[slower] >= HEALTHY_SHARE * shares[faster]:
        return limits
    return [c for c in limits if c.direction == slower]


def _speak_for_both_ways(
    pool: Sequence[_Candidate], candidates: Sequence[_Candidate], healthy_dirs: set[str]
) -> tuple[_Candidate, HostRole | None, str, tuple[str, ...]]:
    """The most confident candidate, and what the other way adds to it: (candidate, host to
    fix, explanation, evidence)."""
    best = max(pool, key=lambda c: c.confidence)
    if all(c.factor == "path-capacity" for c in pool) and len({c.direction for c in pool}) > 1:
        # Healthy both ways: speak for the way the user asked about first (up), and show
        # the other way's rate beside it.
        best = next((c for c in pool if c.direction == "up"), best)
        other = next(c for c in pool if c.direction != best.direction)
        return (
            best,
            best.host,
            best.explanation,
            (
                *best.evidence,
                f"{other.direction}: {other.evidence[0]}",
            ),
        )
    twin = next(
        (
            c
            for c in candidates
            if c.factor == best.factor
            and c.factor != "path-capacity"
            and c.direction != best.direction
            and c.direction not in healthy_dirs
            and c.confidence >= WEAK
            and c.host is not None
            and c.host != best.host
        ),
        None,
    )
    if twin is not None and best.host in ("local", "peer"):
        # The same limit both ways, on each way's own host (both senders' tcp_wmem, say):
        # fixing one end leaves the other way as slow as before.
        return (
            best,
            "both",
            f"{best.explanation} {twin.direction}: the same limit at the {twin.host} end.",
            (*best.evidence, *(f"{twin.direction}: {e}" for e in twin.evidence[:1])),
        )
    return best, best.host, best.explanation, best.evidence


def _calibrated(ev: Evidence, best: _Candidate) -> tuple[float, ConfidenceBasis | None]:
    """The candidate's confidence as the scenario matrix measured its factor's verdicts,
    in the matrix's situation only: a peer audit and transfers."""
    table = calibration.table()
    record = table.record(best.factor, best.confidence)
    if record is None or ev.peer is None or not ev.measured:
        return best.confidence, None
    return (
        table.confidence(best.factor, best.confidence),
        ConfidenceBasis(best.confidence, record.runs, record.right),
    )


def diagnose(ev: Evidence) -> Diagnosis:
    dirs = _directions(ev)
    if not dirs or (ev.path is None and ev.transfer is None):
        return _audit_only(ev)
    candidates = [c for d in dirs for rule in RULES if (c := rule(ev, d)) is not None]
    # A healthy direction does not excuse a slow one: prefer a real limit when one is found.
    healthy_dirs = {c.direction for c in candidates if c.decisive}
    slow_dirs = {d.name for d in dirs if d.current is not None and d.name not in healthy_dirs}
    limits = [
        c for c in candidates if c.factor != "path-capacity" and c.direction not in healthy_dirs
    ]
    healthy = [c for c in candidates if c.factor == "path-capacity"]
    strong_limits = [c for c in limits if c.confidence >= WEAK]
    if strong_limits:
        pool = _slower_way_first(ev, dirs, strong_limits)
    elif healthy_dirs and slow_dirs:
        # One way reached the capacity, the other did not: only the slow way's own (weak)
        # explanations may speak for it, never the healthy way's verdict.
        pool = [c for c in candidates if c.direction in slow_dirs]
    else:
        pool = [*limits, *healthy]
    if not pool:
        return _unexplained(ev, dirs, slow_dirs)
    best, host, explanation, found = _speak_for_both_ways(pool, candidates, healthy_dirs)
    if (bloat := bufferbloat.prefer(best, candidates)) is not best:
        best, host, explanation, found = bloat, bloat.host, bloat.explanation, bloat.evidence
    found += bufferbloat.beside(best, candidates)
    confidence, basis = _calibrated(ev, best)
    missing = []
    if ev.peer is None:
        missing.append("no peer audit (the far end does not run `tcpwizard serve`)")
        confidence *= 0.8
    if not ev.measured:
        missing.append("no test transfer")
        confidence *= 0.7
        if best.factor == "path-capacity":
            return _predicted_healthy(ev, dirs, best, missing)
    evidence = found + tuple(f"missing: {m}" for m in missing)
    if best.factor in WINDOW_FACTORS and ev.measured and best.confidence >= WEAK:
        evidence += (
            "parallel streams would only hide this: every stream is held by the same "
            "window; fix the buffer instead",
        )
    verdict = Verdict(
        best.factor,
        round(confidence, 2),
        host,
        explanation,
        evidence,
        # A policer's or a queue's rate is what the path gives: no host setting raises it.
        policer.wizard_gap(best, dirs)
        or _gap(ev, dirs, PATH_GAP.get(best.factor, best.factor), best.direction),
        basis,
    )
    fixes = _fixes_for(ev, best.factor, host)
    fixes += tuple(f for f in best.fixes if f not in fixes)
    if best.factor == "middlebox":
        fixes += (device_fix(syn_tampering(ev.peer_handshake, ev.peer)),)
    if best.factor == "congestion" and best.streams is not None:
        fixes += (streams_fix(*best.streams),)
    return Diagnosis(verdict, fixes)
