"""`middlebox`: a device between the hosts rewrote the TCP handshake (advice/middlebox.py
reads what each end sent against what the other received). The host to fix is the path;
the fix is the device's, never a sysctl."""

from __future__ import annotations

import dataclasses

from tcpwizard.advice.evidence import (
    HEALTHY_SHARE,
    Candidate,
    Direction,
    Evidence,
    probe_capacity,
    rtt_ms,
)
from tcpwizard.advice.middlebox import DOWN, Tampering, device_hop, syn_tampering
from tcpwizard.advice.window_law import (
    UNSCALED_WINDOW,
    held_by_loss,
    window_limit_mbps,
)
from tcpwizard.measure.model import ModeResult

# The window-scaling rule's own margins: a rate within 1.3x of 64 KB / RTT sits at that
# ceiling (the window law with a round trip's jitter), and a ceiling above 85 % of the
# capacity (TCP/IP headers cost ~3.5 %, see evidence.HEALTHY_SHARE) holds nothing back.
AT_CEILING = 1.3
# A loss-bound rate is proportional to the MSS (Mathis et al.): a clamp to less than 3/4
# of what this host sent costs over a quarter of such a rate, more than a test's own
# spread; a milder one (a VPN's 1380 of 1460) is noted, not named the limit.
MSS_COST = 0.75
NOTED = 0.35  # below advice.diagnose.WEAK: speaks only when nothing else explains the rate


def _clamp_costs(t: Tampering, m: ModeResult, rtt: float | None) -> bool:
    """The clamped MSS holds the rate: a deep clamp, and a rate at the loss bound computed
    with the clamped segment size (that bound grows with the MSS the clamp took away)."""
    if int(t.received) >= MSS_COST * int(t.sent) or not rtt or not m.bytes:
        return False
    mss = int(t.received)
    return held_by_loss(m.throughput_mbps, mss, rtt, m.retransmits * mss / m.bytes, "")


def _one_sided(ev: Evidence, found: tuple[Tampering, ...]) -> Candidate | None:
    """Window scaling taken out of the SYN-ACK only: the far end got our option and scales
    the windows it offers, while this host reads them unscaled (RFC 7323 lets it scale only
    when both SYNs carried the option). Every upload then sees a window 2^shift times
    smaller than offered; downloads may look healthy. The upload is the way to judge, even
    when its transfer failed outright (then it has no direction of its own)."""
    hs = ev.peer_handshake
    if hs is None or hs.received_syn is None or hs.received_syn.wscale is None:
        return None
    if [t.option for t in found if t.direction == DOWN] != ["window scaling"]:
        return None
    ups = [m for m in (ev.transfer.modes if ev.transfer else ()) if m.direction == "up"]
    ok = [m for m in ups if m.error is None]
    rtt = ev.path.rtt.min if ev.path else None
    ceiling = window_limit_mbps(UNSCALED_WINDOW, rtt) if rtt else None
    evidence = [t.text for t in found]
    if ups and not ok:
        evidence.append(f"the upload failed: {ups[0].error}")
        confidence = 0.97
    elif ok and ceiling is not None and max(m.throughput_mbps for m in ok) <= AT_CEILING * ceiling:
        best = max(m.throughput_mbps for m in ok)
        evidence.append(f"upload {best:.1f} Mbit/s, at most 64 KB / {rtt:.1f} ms")
        confidence = 0.97
    else:
        confidence = 0.6
    return Candidate(
        "up",
        "middlebox",
        confidence,
        "path",
        "up: a device between the hosts (a firewall or load balancer) takes window scaling "
        "out of the far end's SYN-ACK only: the far end scales the windows it offers, this "
        "host reads them unscaled, so uploads crawl (or stall) whatever either host's "
        "buffers are. Ask its operator to leave TCP options alone (peer->local).",
        tuple(evidence),
    )


def rule(ev: Evidence, d: Direction) -> Candidate | None:
    found = syn_tampering(ev.peer_handshake, ev.peer)
    if not found:
        return None
    cand = _candidate(ev, d, found)
    where = device_hop(ev.syn_hops, found)
    if where is None:
        return cand
    # The hop probes name where the device is: in the evidence and in the words.
    return dataclasses.replace(
        cand,
        explanation=f"{cand.explanation} Where: {where}.",
        evidence=(*cand.evidence, where),
    )


def _candidate(ev: Evidence, d: Direction, found: tuple[Tampering, ...]) -> Candidate:
    if (one_sided := _one_sided(ev, found)) is not None:
        return one_sided
    cur, rtt = d.current, rtt_ms(ev, d)
    cap = probe_capacity(ev, d)
    evidence = [t.text for t in found]
    scaling = any(t.option == "window scaling" for t in found)
    confidence = 0.6  # nothing measured: the rewrite is seen, its cost predicted
    why = ""
    if scaling and rtt:
        ceiling = window_limit_mbps(UNSCALED_WINDOW, rtt)
        evidence.append(f"without window scaling: 64 KB / {rtt:.1f} ms = {ceiling:.1f} Mbit/s")
        why = (
            " Without window scaling the window cannot exceed 64 KB whatever either host's "
            "buffers are, and both hosts have it on: no buffer or sysctl changes that."
        )
        if cur is not None and cur.throughput_mbps <= AT_CEILING * ceiling:
            evidence.append(f"measured {cur.throughput_mbps:.1f} Mbit/s, at that ceiling")
            confidence = 0.97
        elif cap is not None and ceiling >= HEALTHY_SHARE * cap.mbps:
            confidence = 0.45  # a short path: 64 KB is enough here
        elif cur is not None:
            confidence = 0.8
    elif cur is not None:
        below = cap is None or cur.throughput_mbps < HEALTHY_SHARE * cap.mbps
        # Without SACK (or timestamps, RFC 7323's RTT samples) loss recovery takes a round
        # trip per lost segment, and a small MSS lowers a loss-bound rate in proportion:
        # both cost only where segments are lost. There, below the path's capacity, the
        # device's rewrite is the fixable cause (it outranks congestion's 0.85).
        costly = any(t.option != "MSS" or _clamp_costs(t, cur, rtt) for t in found)
        confidence = 0.9 if below and costly and cur.retransmits > 0 else NOTED
        if cap is not None:
            evidence.append(
                f"{cur.mode} moved {cur.throughput_mbps:.1f} Mbit/s of {cap.mbps:.1f} capacity"
            )
    ways = sorted({t.direction for t in found})
    return Candidate(
        d.name,
        "middlebox",
        confidence,
        "path",
        f"{d.name}: a device between the hosts (a firewall or load balancer) rewrites the TCP "
        f"handshake: {'; '.join(t.text for t in found)}.{why} Ask its operator to leave TCP "
        f"options alone ({', '.join(ways)}).",
        tuple(evidence),
    )
