"""The laws the verdict rests on: throughput <= window / RTT, and the Mathis bound for loss.

Linux grants twice a setsockopt request and advertises only part of the receive buffer (the
rest pays for skb overhead). Since 6.x the share is learned per socket (`scaling_ratio`, about
half of the buffer for 1500-byte frames); before it was `tcp_adv_win_scale` (1 -> 1/2). We use
the share the audit reports, else one half, which is what both schemes give for MTU 1500.
"""

from __future__ import annotations

import math

from tcpwizard.checks.model import HostAudit

UNSCALED_WINDOW = 65535
DEFAULT_WINDOW_SHARE = 0.5
# Mathis, Semke, Mahdavi, Ott (1997): rate <= (MSS / RTT) * C / sqrt(p), C = sqrt(3/2).
MATHIS_C = math.sqrt(1.5)


def window_share(audit: HostAudit) -> float:
    raw = audit.sysctl("net.ipv4.tcp_adv_win_scale")
    try:
        scale = int(raw) if raw is not None else 1
    except ValueError:
        scale = 1
    if scale > 0:
        return 1.0 - 2.0**-scale
    if scale < 0:
        return 2.0**scale
    return DEFAULT_WINDOW_SHARE


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


def max_receive_window(audit: HostAudit) -> int | None:
    """Largest window an autotuning receiver on this host can advertise (bytes)."""
    rmem = _triple(audit, "net.ipv4.tcp_rmem")
    if rmem is None:
        return None
    window = int(rmem[2] * window_share(audit))
    if scaling_enabled(audit) is False:
        window = min(window, UNSCALED_WINDOW)
    return window


def max_send_buffer(audit: HostAudit) -> int | None:
    """Largest autotuned send buffer: bytes in flight plus what waits to be sent."""
    wmem = _triple(audit, "net.ipv4.tcp_wmem")
    return None if wmem is None else wmem[2]


def window_limit_mbps(window_bytes: float, rtt_ms: float) -> float:
    return window_bytes * 8 / (rtt_ms / 1e3) / 1e6


def mathis_mbps(mss_bytes: float, rtt_ms: float, loss: float) -> float | None:
    """Loss-based (Reno/CUBIC-like) steady-state bound; None without loss."""
    if loss <= 0 or rtt_ms <= 0:
        return None
    return mss_bytes * 8 / (rtt_ms / 1e3) * MATHIS_C / math.sqrt(loss) / 1e6
