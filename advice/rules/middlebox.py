"""`middlebox`: a device between the hosts rewrote the TCP handshake (advice/middlebox.py
reads what each end sent against what the other received). The host to fix is the path;
the fix is the device's, never a sysctl."""

from __future__ import annotations

from tcpwizard.advice.evidence import Candidate, Direction, Evidence, probe_capacity, rtt_ms
from tcpwizard.advice.middlebox import syn_tampering
from tcpwizard.advice.window_law import UNSCALED_WINDOW, window_limit_mbps

# The window-scaling rule's own margins: a rate within 1.3x of 64 KB / RTT sits at that
# ceiling (the window law with a round trip's jitter), and a ceiling above 85 % of the
# capacity (TCP/IP headers cost ~3.5 %, see diagnose.HEALTHY_SHARE) holds nothing back.
AT_CEILING = 1.3
HEALTHY_SHARE = 0.85


def rule(ev: Evidence, d: Direction) -> Candidate | None:
    found = syn_tampering(ev.peer_handshake, ev.peer)
    if not found:
        return None
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
        # SACK, timestamps or a small MSS cost most under loss: below the path's capacity
        # the device's rewrite is the fixable cause (it outranks congestion's 0.85).
        confidence = 0.9 if below else 0.45
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
