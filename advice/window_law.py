"""The laws the verdict rests on: throughput <= window / RTT, and the Mathis bound for loss.
The kernel's buffer-to-window arithmetic lives in tcpwizard.checks.window; this module applies
it to an audit (possibly the peer's) and adds the loss law.
"""

from __future__ import annotations

import math

from tcpwizard.checks.model import HostAudit
from tcpwizard.checks.window import (
    MAX_UNSCALED_WINDOW,
    parse_kernel_version,
    typical_send_window,
    typical_window_from_space,
)

UNSCALED_WINDOW = MAX_UNSCALED_WINDOW
# Mathis, Semke, Mahdavi, Ott (1997): rate <= (MSS / RTT) * C / sqrt(p), C = sqrt(3/2).
MATHIS_C = math.sqrt(1.5)


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


def max_receive_window(audit: HostAudit) -> int | None:
    """Largest window a running autotuned receiver on this host advertises (bytes)."""
    rmem = _triple(audit, "net.ipv4.tcp_rmem")
    if rmem is None:
        return None
    # Without receive autotuning (tcp_moderate_rcvbuf = 0) the buffer stays at the default.
    space = rmem[1] if audit.sysctl("net.ipv4.tcp_moderate_rcvbuf") == "0" else rmem[2]
    kernel = parse_kernel_version(audit.kernel)
    window = typical_window_from_space(space, kernel, _adv_win_scale(audit))
    if scaling_enabled(audit) is False:
        window = min(window, UNSCALED_WINDOW)
    return window


def max_send_window(audit: HostAudit) -> int | None:
    """Most data a running connection keeps in flight with this host's autotuned send
    buffer (bytes)."""
    wmem = _triple(audit, "net.ipv4.tcp_wmem")
    return None if wmem is None else typical_send_window(wmem[2])


def window_limit_mbps(window_bytes: float, rtt_ms: float) -> float:
    return window_bytes * 8 / (rtt_ms / 1e3) / 1e6


def mathis_mbps(mss_bytes: float, rtt_ms: float, loss: float) -> float | None:
    """Loss-based (Reno/CUBIC-like) steady-state bound; None without loss."""
    if loss <= 0 or rtt_ms <= 0:
        return None
    return mss_bytes * 8 / (rtt_ms / 1e3) * MATHIS_C / math.sqrt(loss) / 1e6
