"""`receiver-window`: the receiver does not offer a window as large as the path's
bandwidth-delay product (TCP_INFO's receive-window-limited time, the window law).
"""

from __future__ import annotations

from tcpwizard.advice.capacity_view import below_path as _below_path
from tcpwizard.advice.capacity_view import capacity as _capacity
from tcpwizard.advice.capacity_view import steady_mbps
from tcpwizard.advice.evidence import (
    CHRONO_SHARE,
    HEALTHY_SHARE,
    Evidence,
    offered_window_fill,
)
from tcpwizard.advice.evidence import Candidate as _Candidate
from tcpwizard.advice.evidence import Direction as _Direction
from tcpwizard.advice.evidence import chrono as _chrono
from tcpwizard.advice.evidence import mss as _mss
from tcpwizard.advice.evidence import rtt_ms as _rtt_ms
from tcpwizard.advice.middlebox import window_scaling_stripped
from tcpwizard.advice.window_evidence import AT_BOUND_CONFIDENCE
from tcpwizard.advice.window_evidence import at_bound as _at_bound
from tcpwizard.advice.window_evidence import buffer_candidate as _buffer_candidate
from tcpwizard.advice.window_evidence import loss_fraction as _loss_fraction
from tcpwizard.advice.window_evidence import lossy as _lossy
from tcpwizard.advice.window_law import (
    WINDOW_FILLED,
    max_receive_window,
    round_trip_hit,
    window_limit_mbps,
)
from tcpwizard.units import format_mbps as _fmt

# A window counter whose buffer allows the path: below WEAK (advice/diagnose.py), so any
# named cause wins.
BUFFER_ALLOWS_PATH = 0.35
# A hole in most round trips (more than half) keeps autotuning's in-order count behind the
# path in most of its measurements.
MOST_ROUND_TRIPS = 0.5


def rule(ev: Evidence, d: _Direction) -> _Candidate | None:
    rwnd, _, _ = _chrono(d.current)
    rtt, cur = _rtt_ms(ev, d), d.current
    evidence: list[str] = []
    confidence = 0.0
    if not _below_path(ev, d) or window_scaling_stripped(ev.peer_handshake, ev.peer):
        return None  # no receive buffer opens a window the path keeps unscaled
    if rwnd is not None and rwnd >= CHRONO_SHARE:
        evidence.append(f"sender was receive-window limited {rwnd:.0%} of the time (TCP_INFO)")
        confidence = 0.6 + 0.35 * min(1.0, rwnd)
    fill = offered_window_fill(cur) if cur is not None else None
    if confidence == 0.0 and fill is not None and fill >= WINDOW_FILLED:
        # A paced sender (BBR) measures the window-bound rate as the path's and paces at
        # it: it rarely waits on the window that holds it, and the counter stays low (an
        # upload to iperf3 through a 256 KB tcp_rmem read `path-capacity` 1 run in 3).
        evidence.append(
            f"the sender delivered {fill:.0%} of the window the receiver offered (TCP_INFO "
            "snd_wnd) per round trip once up to speed: that window held it"
        )
        confidence = AT_BOUND_CONFIDENCE  # the window law's bound, reached
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
            if _holes_hold_autotuning(ev, d, rtt):
                # Most round trips had a loss in them: the receiver's autotuning counts
                # only the in-order bytes its reader took, which a hole stops for a round
                # trip, so the window trails the path's losses, not its buffer; no host
                # setting is to blame (BBR at 1.6-1.9 % random loss over 166-237 ms, a
                # 23-25 MB tcp_rmem: receive-window limited 23-29 % of the time, read
                # `receiver-window` on a healthy host; docs/bench-matrix-two-seeds.md).
                return None
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
                confidence = max(confidence, AT_BOUND_CONFIDENCE)
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


def _holes_hold_autotuning(ev: Evidence, d: _Direction, rtt_ms: float) -> bool:
    """At least half the round trips of the settled rate had a lost segment in them: of a
    window of n segments at per-segment loss p, 1 - (1 - p)^n (window_law.round_trip_hit)."""
    cur, loss = d.current, _loss_fraction(ev, d)
    if cur is None or not loss:
        return False
    window = steady_mbps(cur) * 1e6 / 8 * rtt_ms / 1e3
    return round_trip_hit(loss, window, _mss(d)) >= MOST_ROUND_TRIPS
