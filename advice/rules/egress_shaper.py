"""`interface` (the sender's egress queue): a shaper in the sending host's own qdisc — tbf's
rate, cake's bandwidth, an htb tree's ceiling, fq's per-flow maxrate (checks/shaper.py) —
and a transfer that settled at its rate.

No path measurement sees past it: the capacity probe's trains leave through the same queue,
so the path reads as fast as the shaper, and without this rule the verdict would be a
healthy `path-capacity`. The sender's audit recorded what tc printed (its facts), a far
end's too, so the rule reads the shaper of whichever host sent.
"""

from __future__ import annotations

from tcpwizard.advice.evidence import HEALTHY_SHARE, Candidate, Direction, Evidence
from tcpwizard.checks.host_rates import ETHERNET_HEADER
from tcpwizard.checks.shaper import Shaper, recorded_shaper, removal_fix
from tcpwizard.measure.engine.loaded_rtt import mss_of, plateau_mbps
from tcpwizard.measure.engine.rates import IP_TCP_HEADERS
from tcpwizard.units import format_mbps

# A shaper counts frames as the kernel holds them, the Ethernet header on top of each IP
# packet (checks/host_rates.py ETHERNET_HEADER): an IP-layer rate reaches IP / (IP + header)
# of the shaped one.


def ip_share(mss: int) -> float:
    ip = mss + IP_TCP_HEADERS
    return ip / (ip + ETHERNET_HEADER)


def rule(ev: Evidence, d: Direction) -> Candidate | None:
    found = shaped(d)
    if found is None:
        return None
    shaper, allowed_mbps, plateau = found
    iface = d.sender.interface.name if d.sender and d.sender.interface else "IF"
    who = "each flow" if shaper.per_flow else "everything it sends"
    return Candidate(
        d.name,
        "interface",
        # Above `path-capacity`'s highest (0.95): the probe measured the shaper, not the path.
        0.96,
        d.sender_role,
        f"{d.name}: the sending host's own egress queue ({shaper.kind} on {iface}) holds "
        f"{who} to {format_mbps(shaper.rate_bps / 1e6)}, and the transfer settled there. "
        "The capacity probe leaves through the same queue, so the path's own rate is not "
        "known from here: remove the limit, or raise it, and check again.",
        (
            f"{iface}: {shaper.describe()} (tc, the {d.sender_role} host's audit)",
            f"transfer settled at {format_mbps(plateau)} at the IP layer, "
            f"{plateau / allowed_mbps:.0%} of the {format_mbps(allowed_mbps)} the shaper lets "
            "through at that layer",
        ),
        fixes=(removal_fix(iface, d.sender_role, ("interface",)),),
    )


def shaped(d: Direction) -> tuple[Shaper, float, float] | None:
    """(the shaper, the IP-layer rate it lets through, the plateau) when the sender's egress
    queue has one and the transfer settled at the healthy share of its rate or above."""
    m = d.current
    shaper = recorded_shaper(d.sender) if d.sender is not None else None
    plateau = plateau_mbps(m) if m is not None else None
    if shaper is None or m is None or plateau is None:
        return None
    flows = m.streams if shaper.per_flow else 1
    allowed = shaper.rate_bps / 1e6 * flows * ip_share(mss_of(m))
    if plateau < HEALTHY_SHARE * allowed:
        return None
    return shaper, allowed, plateau
