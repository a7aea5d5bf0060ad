"""The laws the verdict rests on: throughput <= window / RTT, and the Mathis bound for loss.
The kernel's buffer-to-window arithmetic lives in tcpwizard.checks.window; this module applies
it to an audit (possibly the peer's) and adds the loss law.
"""

from __future__ import annotations

import math

from tcpwizard.checks.model import HostAudit
from tcpwizard.checks.window import (
    MAX_UNSCALED_WINDOW,
    mbps,
    parse_kernel_version,
    running_windows,
)

# A window-held flow delivers one window per loaded RTT; read against the idle RTT that is
# window x idle / loaded. At least this share of the window per idle RTT: the window held it,
# with the flow's own queue up to 2/3 of the idle RTT allowed (1 / 0.6 = 1.67 x idle).
# One figure for the check's receiver view, `conns` and captures.
WINDOW_FILLED = 0.6

UNSCALED_WINDOW = MAX_UNSCALED_WINDOW
# Mathis, Semke, Mahdavi, Ott (1997): rate <= (MSS / RTT) * C / sqrt(p), C = sqrt(3/2).
MATHIS_C = math.sqrt(1.5)
# A rate within this factor of the bound is held by it: the paper's constant runs from 0.87
# (periodic loss, delayed ACKs) to 1.31 (random loss, every segment ACKed), a ratio of 1.5;
# where a flow sits in that range depends on its receiver's ACKs and the loss pattern,
# neither of which the verdict sees.
LOSS_BOUND_MARGIN = 1.5
# Of the round trips of a transfer (captures: data to its ACK), the share in which the data
# in flight reached the receiver's window that makes the window the limit. A flow the window
# holds fills it in every round trip but those a loss drains (lossy_window_share: at least
# half of them); a sender the window does not hold meets it only at its own peaks, BBR in
# the one probing round of the eight of its gain cycle (1/8). 0.3 lies between the two.
WINDOW_FULL_ROUNDS = 0.3
# The RTT under load (median once up to speed) this many times the minimum: the sender
# keeps a queue at the bottleneck, so the path, not a window, set its rate. A loss-based
# sender through a drop-tail buffer of B keeps about B/2 queued and BBR about a quarter of
# the BDP in its probing cycle; +20 % is twice what counts as no queue at all (the delay
# line's and the timer's noise, advice/rules/policer.py NO_QUEUE_SHARE).
QUEUE_RTT = 1.2


def _adv_win_scale(audit: HostAudit) -> int:
    raw = audit.sysctl("net.ipv4.tcp_adv_win_scale")
    try:
        return int(raw) if raw is not None else 1
    except ValueError:
        return 1


def _triple(audit: HostAudit, key: str) -> tuple[int, int, int] | None:
    raw = audit.sysctl(key)
    if raw is None:
        return None
    try:
        a, b, c = (int(x) for x in raw.split())
    except ValueError:
        return None
    return a, b, c


def scaling_enabled(audit: HostAudit) -> bool | None:
    raw = audit.sysctl("net.ipv4.tcp_window_scaling")
    return None if raw is None else raw.strip() != "0"


def _windows(audit: HostAudit, recv_space: int, send_space: int) -> tuple[int, int]:
    """The audit's own window law (checks.window.running_windows) for this host's
    settings, the route toward the far end included."""
    route = audit.interface.route if audit.interface is not None else None
    return running_windows(
        recv_space,
        send_space,
        parse_kernel_version(audit.kernel),
        _adv_win_scale(audit),
        window_scaling=scaling_enabled(audit) is not False,
        route_window=route.window if route is not None else None,
    )


def max_receive_window(audit: HostAudit) -> int | None:
    """Largest window a running autotuned receiver on this host advertises (bytes)."""
    rmem = _triple(audit, "net.ipv4.tcp_rmem")
    if rmem is None:
        return None
    # Without receive autotuning (tcp_moderate_rcvbuf = 0) the buffer stays at the default.
    space = rmem[1] if audit.sysctl("net.ipv4.tcp_moderate_rcvbuf") == "0" else rmem[2]
    return _windows(audit, space, 0)[0]


def max_send_window(audit: HostAudit) -> int | None:
    """Most data a running connection keeps in flight with this host's autotuned send
    buffer (bytes)."""
    wmem = _triple(audit, "net.ipv4.tcp_wmem")
    return None if wmem is None else _windows(audit, 0, wmem[2])[1]


# The kernel checks the send buffer before it starts a new skb, then fills that skb to its
# size goal (one GSO skb, gso_max_size 64 KB): a small send buffer carries up to this much
# beyond it. Measured, a 16 KB tcp_wmem max carried ~31 KB in flight (docs/bench-matrix.md).
SEND_OVERSHOOT_BYTES = 65536


def audited_window(sender: HostAudit | None, receiver: HostAudit | None) -> int | None:
    """The largest window an autotuned connection can have by the audited hosts' buffers:
    the smaller of the sender's send window and the receiver's receive window (None when
    neither end was audited)."""
    windows = [
        w
        for w in (
            max_send_window(sender) if sender else None,
            max_receive_window(receiver) if receiver else None,
        )
        if w
    ]
    return min(windows) if windows else None


def window_limit_mbps(window_bytes: float, rtt_ms: float) -> float:
    """The window law in the verdict's units (milliseconds), from checks.window.mbps."""
    return mbps(window_bytes, rtt_ms / 1e3)


# Senders whose rate the loss bound (Mathis et al.) holds: they back off on every loss.
LOSS_BASED = ("reno", "cubic", "htcp", "bic", "highspeed", "scalable", "westwood", "illinois")


def mathis_mbps(mss_bytes: float, rtt_ms: float, loss: float, cc: str = "") -> float | None:
    """A loss-based sender's steady-state rate at random loss `loss`; None without loss.
    Reno (and any sender not named): Mathis et al. CUBIC: the larger of its own average
    window (RFC 8312 section 5.1: (C(3+b)/(4(1-b)))^(1/4) (RTT/p)^(3/4) segments, C = 0.4,
    b = 0.7) and the Reno-friendly window it never falls below, so "far above the bound"
    still means far above what random loss allows it."""
    if loss <= 0 or rtt_ms <= 0:
        return None
    rtt_s = rtt_ms / 1e3
    segments = MATHIS_C / math.sqrt(loss)
    if cc == "cubic":
        segments = max(segments, CUBIC_K * (rtt_s / loss) ** 0.75)
    return segments * mss_bytes * 8 / rtt_s / 1e6


# Padhye, Firoiu, Towsley, Kurose (1998): with retransmission timeouts the rate under loss
# p is 1 / (RTT sqrt(2bp/3) + T0 min(1, 3 sqrt(3bp/8)) p (1 + 32 p^2)) segments per second,
# below the Mathis bound wherever a timeout costs many round trips (a short path, heavy
# loss: at 3 ms and 1 % 0.28 of it, at 5 % 0.08). b = 2 segments per ACK (delayed ACKs),
# the lower rate; T0 = RTT + 200 ms (Linux: rto = srtt + max(4 rttvar, TCP_RTO_MIN)).
ACKED_PER_ACK = 2
RTO_MIN_MS = 200.0


def timeout_floor_mbps(mss_bytes: float, rtt_ms: float, loss: float) -> float | None:
    """The least a loss-based sender keeps at random loss `loss` (Padhye et al., timeouts
    included); None without loss."""
    if loss <= 0 or rtt_ms <= 0:
        return None
    rtt_s, t0_s, b = rtt_ms / 1e3, (rtt_ms + RTO_MIN_MS) / 1e3, ACKED_PER_ACK
    per_segment = rtt_s * math.sqrt(2 * b * loss / 3) + t0_s * min(
        1.0, 3 * math.sqrt(3 * b * loss / 8)
    ) * loss * (1 + 32 * loss**2)
    return mss_bytes * 8 / per_segment / 1e6


def held_by_loss(rate_mbps: float, mss_bytes: float, rtt_ms: float, loss: float, cc: str) -> bool:
    """The rate sits where loss `loss` holds a `cc` sender: within LOSS_BOUND_MARGIN of the
    range from its timeout floor (Padhye et al.) to its bound (Mathis et al.). Far below the
    floor the losses allow more than the rate: something else held the window."""
    bound = mathis_mbps(mss_bytes, rtt_ms, loss, cc)
    floor = timeout_floor_mbps(mss_bytes, rtt_ms, loss)
    if bound is None or floor is None:
        return False
    return min(floor, bound) / LOSS_BOUND_MARGIN <= rate_mbps <= LOSS_BOUND_MARGIN * bound


# The share of its window a sender keeps after a loss (its multiplicative decrease), the
# least where it adapts: Reno (RFC 5681) 0.5; CUBIC 717/1024 (Linux tcp_cubic beta, RFC
# 8312's 0.7); BIC 819/1024 (Linux tcp_bic); Scalable 7/8 (Linux tcp_scalable, cwnd >> 3);
# H-TCP, HighSpeed, Illinois adapt from 0.5 upward; Westwood+ resets to its bandwidth
# estimate, at worst half. The least beta gives the least utilisation a healthy sawtooth
# can show.
DECREASE = {"cubic": 717 / 1024, "bic": 819 / 1024, "scalable": 7 / 8}
LEAST_DECREASE = 0.5


def backoff(cc: str) -> float:
    """The share of its window `cc` keeps after a loss (DECREASE; the least for the rest)."""
    return DECREASE.get(cc, LEAST_DECREASE)


def sawtooth_utilisation(queue_bdps: float, beta: float) -> float:
    """The share of the line a loss-based window keeps busy through a drop-tail queue of
    queue_bdps: it cycles from beta x W to W = 1 + q growing linearly; below one BDP it sends
    its window per round trip, above it the line is full. Linear growth counted in idle
    round trips is the least share (a round trip above the BDP lasts longer; CUBIC's concave
    growth lingers near W)."""
    top = 1.0 + max(0.0, queue_bdps)
    bottom = beta * top
    if bottom >= 1.0:
        return 1.0
    below = (1.0 - bottom) / (top - bottom)
    return below * (bottom + 1.0) / 2 + (1.0 - below)


def lossy_window_share(loss: float, window_bytes: float, mss_bytes: float) -> float:
    """The share of the window law (window / RTT) a window-held flow keeps at per-segment
    loss `loss`: a lost segment holds the window's left edge until its repair arrives a
    round trip later, so a window with a loss in it takes two round trips, not one. Of the
    windows sent, 1 - (1 - loss)^(segments per window) have a loss."""
    return 1.0 / (1.0 + round_trip_hit(loss, window_bytes, mss_bytes))


def round_trip_hit(loss: float, window_bytes: float, mss_bytes: float) -> float:
    """The share of round trips whose window of `window_bytes` holds at least one segment
    lost at random per-segment loss `loss`: 1 - (1 - loss)^(segments per window)."""
    if loss <= 0 or window_bytes <= 0 or mss_bytes <= 0:
        return 0.0
    return 1.0 - math.pow(1.0 - min(loss, 1.0), window_bytes / mss_bytes)


CUBIC_BETA = 0.7  # RFC 8312 section 4.5: beta_cubic
# RFC 8312's constants: C = 0.4, beta_cubic = 0.7.
CUBIC_K = (0.4 * (3 + CUBIC_BETA) / (4 * (1 - CUBIC_BETA))) ** 0.25
