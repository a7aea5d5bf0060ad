"""`sender-buffer`: the sender cannot keep a bandwidth-delay product in flight; its send
buffer is too small (TCP_INFO's send-buffer-limited time, the window law).
"""

from __future__ import annotations

from tcpwizard.advice.capacity_view import below_path as _below_path
from tcpwizard.advice.capacity_view import capacity as _capacity
from tcpwizard.advice.evidence import CHRONO_SHARE, HEALTHY_SHARE, Evidence
from tcpwizard.advice.evidence import Candidate as _Candidate
from tcpwizard.advice.evidence import Direction as _Direction
from tcpwizard.advice.evidence import chrono as _chrono
from tcpwizard.advice.evidence import rtt_ms as _rtt_ms
from tcpwizard.advice.window_evidence import AT_BOUND_CONFIDENCE
from tcpwizard.advice.window_evidence import at_bound as _at_bound
from tcpwizard.advice.window_evidence import buffer_candidate as _buffer_candidate
from tcpwizard.advice.window_evidence import lossy as _lossy
from tcpwizard.advice.window_law import SEND_OVERSHOOT_BYTES, max_send_window, window_limit_mbps
from tcpwizard.units import format_mbps as _fmt


def rule(ev: Evidence, d: _Direction) -> _Candidate | None:
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
                confidence = max(confidence, AT_BOUND_CONFIDENCE)
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
