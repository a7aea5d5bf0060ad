"""Findings about a far end that runs no tcpwizard serve, from what it agreed to in the TCP
handshake: the one part of its configuration any connection shows."""

from __future__ import annotations

import dataclasses

from tcpwizard.checks.buffer_checks import TcpRmem, TcpWmem
from tcpwizard.checks.model import BdpTarget, Finding, Fix, Severity
from tcpwizard.checks.protocol_checks import Sack, Timestamps, WindowScaling
from tcpwizard.checks.window import MAX_UNSCALED_WINDOW, mbps, recommended_buffer
from tcpwizard.measure.observe.handshake import HandshakeFacts
from tcpwizard.units import format_bytes, format_rate

SOURCE = "handshake"


def handshake_findings(hs: HandshakeFacts, rtt_s: float | None) -> tuple[Finding, ...]:
    """The far end's window scaling, SACK and timestamps as findings for the peer (with
    fixes to run there). An option this host did not offer says nothing about the far end
    and is left out."""
    out: list[Finding] = []
    ws = WindowScaling()
    syn = hs.received_syn
    if hs.local_scaling_offered:
        if syn is not None and syn.wscale is None and not hs.window_scaling:
            out.append(_stripped(ws, "crit"))
        elif hs.window_scaling:
            window = hs.max_peer_window
            out.append(
                ws.finding(
                    "ok",
                    f"on (shift {hs.peer_wscale})",
                    "on",
                    f"The far end agreed to window scaling; it can offer windows up to "
                    f"{format_bytes(window or 0)}.",
                )
            )
        else:
            at = f" ({format_rate(mbps(MAX_UNSCALED_WINDOW, rtt_s) * 1e6)} at " if rtt_s else ""
            limit = f"{at}{rtt_s * 1000:.0f} ms)" if rtt_s else ""
            out.append(
                ws.finding(
                    "crit",
                    "off (no window scale option in its SYN-ACK)",
                    "on",
                    "The far end did not agree to window scaling: every connection with it is "
                    f"held to a 64 KB window{limit}. It is off there, or a middlebox on the "
                    "way strips the option.",
                    (dataclasses.replace(ws.fix(ws.keys[0], "1"), host="peer"),),
                )
            )
    for check, agreed, offered in (
        (Sack(), hs.sack, hs.local_sack_offered),
        (Timestamps(), hs.timestamps, hs.local_timestamps_offered),
    ):
        if not offered:
            continue
        arrived = syn is None or (
            syn.sack_permitted if check.title == Sack().title else syn.timestamps
        )
        if not agreed and not arrived:
            out.append(_stripped(check, "warn"))
        elif agreed:
            out.append(check.finding("ok", "on", "on", f"The far end agreed to {check.title}."))
        else:
            out.append(
                check.finding(
                    "warn",
                    "off (not in its SYN-ACK)",
                    "on",
                    f"The far end did not agree to {check.title}. {check.why}",
                    (dataclasses.replace(check.fix(check.keys[0], "1"), host="peer"),),
                )
            )
    return tuple(out)


def _stripped(check: WindowScaling | Sack | Timestamps, severity: Severity) -> Finding:
    """An option our SYN carried that the far end's serve did not receive: no setting of
    the far end's is to blame, and the fix is not a sysctl (advice/middlebox.py)."""
    return check.finding(
        severity,
        "stripped on the way (absent from our SYN as the far end received it)",
        "on",
        f"This host offered {check.title} and the far end has no say: a device on the path "
        "(firewall, load balancer) removed it from our SYN. Ask its operator to leave TCP "
        "options alone.",
    )


# Linux's defaults for the min and default fields, kept when only the max must grow.
LINUX_RMEM_MIN_DEFAULT = "4096 131072"
LINUX_WMEM_MIN_DEFAULT = "4096 16384"


def unaudited_peer_fixes(target: BdpTarget) -> tuple[Fix, ...]:
    """Buffer fixes for a far end whose settings we cannot read (iperf3, a web server):
    the max sized from the measured path, min and default at Linux's defaults (the admin
    keeps theirs if they differ)."""
    size = recommended_buffer(target, None)
    why = " Its current value is unknown (the far end does not run tcpwizard serve)."
    out: list[Fix] = []
    for check, base in ((TcpRmem(), LINUX_RMEM_MIN_DEFAULT), (TcpWmem(), LINUX_WMEM_MIN_DEFAULT)):
        fix = check.fix(check.keys[0], f"{base} {size}")
        out.append(dataclasses.replace(fix, host="peer", why=fix.why + why))
    return tuple(out)
