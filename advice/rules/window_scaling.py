"""`window-scaling`: window scaling (RFC 7323) is off at one end, so no window exceeds
64 KB whatever the buffers are.
"""

from __future__ import annotations

from tcpwizard.advice.capacity_view import capacity as _capacity
from tcpwizard.advice.evidence import HEALTHY_SHARE, Evidence
from tcpwizard.advice.evidence import Candidate as _Candidate
from tcpwizard.advice.evidence import Direction as _Direction
from tcpwizard.advice.evidence import audit_of as _audit_of
from tcpwizard.advice.evidence import rtt_ms as _rtt_ms
from tcpwizard.advice.middlebox import window_scaling_stripped
from tcpwizard.advice.window_law import UNSCALED_WINDOW, scaling_enabled, window_limit_mbps
from tcpwizard.checks.model import HostAudit, HostRole
from tcpwizard.units import format_mbps as _fmt


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


def rule(ev: Evidence, d: _Direction) -> _Candidate | None:
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
