"""`congestion` that a host's own setting makes: SACK is off, so every loss costs a round trip.

Without selective acknowledgements (RFC 2018) the sender learns of one hole per round trip
(NewReno's partial ACKs, RFC 6582): a window that loses k segments takes k round trips to
repair, and a hole the duplicate ACKs do not show waits for the retransmission timer. The
same losses then hold a flow far lower than with SACK, a model-based one too (BBR v1 kept
19 % of a 100 Mbit/s x 60 ms line at 0.2 % random loss with SACK off at one end, and
retransmitted 22 % of its segments, in the lab). SACK is used only when both ends
offer it, so the fix is on the host that turned it off.

A device on the path that strips the option is the middlebox rule's (advice/middlebox.py
tells it apart from the audits); this rule reads what a host's own audit says, or for a far
end without one (iperf3, a plain port) the handshake it answered.
"""

from __future__ import annotations

from tcpwizard.advice.capacity_view import below_path, capacity
from tcpwizard.advice.evidence import Candidate, Direction, Evidence, audit_of, chrono, mss, rtt_ms
from tcpwizard.advice.loss_episodes import settled_mbps
from tcpwizard.advice.middlebox import syn_tampering
from tcpwizard.advice.rules.congestion import WINDOW_HELD_SHARE
from tcpwizard.advice.window_evidence import loss_fraction
from tcpwizard.advice.window_law import LOSS_BOUND_MARGIN, timeout_floor_mbps
from tcpwizard.checks.model import HostAudit, HostRole
from tcpwizard.measure.engine.loaded_rtt import flow_rtt_ms
from tcpwizard.units import format_mbps

# Above the congestion rule's 0.85 for losses at their bound: with SACK off the same losses
# cost a round trip each, and the host's setting, not the path, is what can be fixed. The
# middlebox rule gives a stripped SACK the same weight (advice/rules/middlebox.py).
NO_SACK_CONFIDENCE = 0.9


def sack_enabled(audit: HostAudit) -> bool | None:
    raw = audit.sysctl("net.ipv4.tcp_sack")
    return None if raw is None else raw.strip() != "0"


def _sack_off(ev: Evidence, role: HostRole, audit: HostAudit | None) -> bool:
    """SACK is off on that host: from its audit, or for an unaudited far end from the
    handshake (it did not agree to the SACK this host offered, and no device took it out)."""
    if audit is not None:
        return sack_enabled(audit) is False
    hs = ev.peer_handshake
    if role != "peer" or hs is None or hs.sack or not hs.local_sack_offered:
        return False
    return not any(t.option == "SACK" for t in syn_tampering(hs, ev.peer))


def sack_off_roles(ev: Evidence, d: Direction) -> list[HostRole]:
    """The hosts of direction `d` whose SACK was off (SACK is used only when both offer it)."""
    return [
        role
        for role, audit in ((d.sender_role, d.sender), (d.receiver_role, d.receiver))
        if _sack_off(ev, role, audit)
    ]


def rule(ev: Evidence, d: Direction) -> Candidate | None:
    cur = d.current
    if cur is None or cur.error is not None or cur.retransmits <= 0:
        return None
    off = sack_off_roles(ev, d)
    if not off or not below_path(ev, d):
        return None  # SACK off, but no loss or the line reached: not what held it
    rwnd, sndbuf, _ = chrono(cur)
    if max(rwnd or 0.0, sndbuf or 0.0) >= WINDOW_HELD_SHARE:
        return None  # a window held the sender most of the time: the window rules speak
    loss = loss_fraction(ev, d)
    rtt = rtt_ms(ev, d)
    floor = timeout_floor_mbps(mss(d), flow_rtt_ms(cur, rtt), loss) if loss and rtt else None
    if floor is not None and settled_mbps(cur) < floor / LOSS_BOUND_MARGIN:
        # Far under what that loss leaves even a sender that times out on every loss it
        # cannot repair at once: the losses, SACK or not, did not set its rate.
        return None
    host: HostRole = off[0] if len(off) == 1 else "both"
    evidence = [
        f"net.ipv4.tcp_sack = 0 on {role}"
        if audit_of(ev, role) is not None
        else f"the {role} host did not agree to SACK in the TCP handshake"
        for role in off
    ]
    share = f" (~{loss:.2%} of segments)" if loss else ""
    evidence.append(f"{cur.retransmits} retransmissions{share} repaired one per round trip")
    cap = capacity(ev, d)
    if cap is not None:
        evidence.append(
            f"{cur.mode} moved {format_mbps(cur.throughput_mbps)} of {format_mbps(cap)} capacity"
        )
    return Candidate(
        d.name,
        "congestion",
        NO_SACK_CONFIDENCE,
        host,
        f"{d.name}: losses hold the window down, and SACK (RFC 2018) is off on the {host} "
        "host, so the connection repairs one lost segment per round trip and waits for the "
        "retransmission timer where several go at once. Turn SACK on there; every "
        "connection of that host, both ways, recovers from loss in a round trip again.",
        tuple(evidence),
    )
