"""From the hops of a path to findings in words and fixes (`tcpwizard path`, `check --hops`).

Severity: a PMTU black hole is critical (TCP stalls as soon as a full-size segment leaves);
real loss is critical at 1 % and more (on a long path that alone holds a loss-based stream
to a few Mbit/s), a warning below; a path MTU below this host's interface MTU is a warning
(the jumbo frames gain nothing past that hop); ICMP rate limiting and the RTT jump are facts.
"""

from __future__ import annotations

from dataclasses import dataclass

from tcpwizard.advice.window_law import mathis_mbps
from tcpwizard.checks.model import Finding, Fix
from tcpwizard.exitcodes import ExitCode, exit_for_severities
from tcpwizard.measure.probes.hop_model import PathHops
from tcpwizard.measure.probes.syntrace_model import SynHopFinding

# Loss from a hop on at which the hop is critical, not a warning: at 1 % a Reno flow of 1460-byte
# segments is held to 1.4 Mbit/s per 100 ms of RTT (Mathis et al.), a loss no tuning outruns.
CRIT_LOSS_PCT = 1.0


@dataclass(frozen=True)
class PathAdvice:
    findings: tuple[Finding, ...]
    exit_code: ExitCode


def _where(p: PathHops, ttl: int | None) -> str:
    if ttl is None:
        return "the first hop"
    hop = next((h for h in p.hops if h.ttl == ttl), None)
    addr = hop.address if hop and hop.address else "no answer"
    name = f" {hop.name}" if hop and hop.name else ""
    return f"hop {ttl} ({addr}{name})"


def blackhole_fixes(p: PathHops) -> tuple[Fix, ...]:
    m = p.mtu
    assert m is not None and m.path_mtu is not None
    v6 = p.family == 6
    mss = m.path_mtu - (60 if v6 else 40)
    probing = Fix(
        "tcp_mtu_probing",
        "sysctl",
        "local",
        "net.ipv4.tcp_mtu_probing",
        "1",
        "sysctl -w net.ipv4.tcp_mtu_probing=1",
        why="TCP lowers its segment size by itself when full-size segments vanish (RFC 4821 "
        "packetization-layer PMTU discovery); it applies to IPv6 as well",
    )
    via = f" via {p.gateway}" if p.gateway else ""
    on = f" dev {p.dev}" if p.dev else ""
    prefix = "128" if v6 else "32"
    route = Fix(
        "route_mtu",
        "route",
        "local",
        f"{p.address}/{prefix}",
        str(m.path_mtu),
        f"ip {'-6 ' if v6 else ''}route replace {p.address}/{prefix}{via}{on} mtu lock "
        f"{m.path_mtu} advmss {mss}",
        why=f"packets to this host stay at {m.path_mtu} B and both ends use {mss} B segments "
        "(MSS clamping for this route), from the first segment on",
    )
    peer = Fix(
        "tcp_mtu_probing_peer",
        "sysctl",
        "peer",
        "net.ipv4.tcp_mtu_probing",
        "1",
        "sysctl -w net.ipv4.tcp_mtu_probing=1",
        why="the far end's own large segments toward this host vanish the same way",
    )
    where = _where(p, m.blackhole_hop)
    clamp = Fix(
        "mss_clamp_router",
        "other",
        "both",
        "",
        "",
        f"on the router at {where}: let ICMP 'fragmentation needed' / 'packet too big' out, "
        "or clamp the MSS there: nft add rule inet filter forward tcp flags syn tcp option "
        "maxseg size set rt mtu",
        why="the network's own fix: the router that drops the message",
    )
    return (probing, route, peer, clamp)


def _cost(f: SynHopFinding) -> str:
    """What each rewrite costs a transfer, for those this one made."""
    out = ""
    if "window scaling" in f.removed:
        out += " Without window scaling no window exceeds 64 KB, whatever the buffers."
    if "SACK" in f.removed:
        out += " Without SACK every lost segment costs a round trip of recovery."
    if any(c.startswith("MSS clamped") for c in f.changed):
        out += " A smaller MSS lowers a loss-bound rate in proportion."
    return out


def _rewrite_finding(f: SynHopFinding) -> Finding:
    """A device rewrites the SYN on the way: where, from the routers' quotes of it."""
    what = ", ".join([f"{o} removed" for o in f.removed] + list(f.changed))
    return Finding(
        "path-middlebox",
        "warn",
        f"SYN options changed {f.where}: {what}",
        "the SYN's options as sent at every hop",
        f"A device rewrites the TCP handshake: {f.text}.{_cost(f)} Ask the device's operator "
        "to leave TCP options alone.",
        "RFC 7323 (window scaling), RFC 2018 (SACK), RFC 6691 (MSS)",
        key="syn_options",
        title="middlebox",
    )


def path_advice(p: PathHops) -> PathAdvice:
    out: list[Finding] = []
    m = p.mtu
    if m is not None and m.blackhole and m.path_mtu is not None:
        where = _where(p, m.blackhole_hop)
        out.append(
            Finding(
                "path-pmtu-blackhole",
                "crit",
                f"packets over {m.path_mtu} B vanish after {where}",
                "a 'fragmentation needed' message, or every size passing",
                f"PMTU black hole after {where}: packets larger than {m.path_mtu} B (this "
                f"host sends up to {m.local_mtu} B) are dropped and no 'fragmentation "
                "needed' / 'packet too big' comes back, so path MTU discovery never learns "
                "the size: a TCP connection opens, then stalls when full-size segments "
                "leave (small requests work, large transfers hang).",
                "RFC 2923 (TCP problems with path MTU discovery); RFC 4821",
                key="path_mtu",
                fixes=blackhole_fixes(p),
                title="PMTU black hole",
            )
        )
    elif m is not None and m.path_mtu is not None and m.path_mtu < min(m.local_mtu, 65535):
        where = _where(p, m.hop)
        gain = m.local_mtu / m.path_mtu
        out.append(
            Finding(
                "path-mtu-smaller",
                "warn" if m.local_mtu > 1500 else "info",
                f"interface MTU {m.local_mtu} B, path MTU {m.path_mtu} B from {where}",
                f"path MTU {m.local_mtu} B",
                f"This host sends frames of up to {m.local_mtu} B but {where} forwards at "
                f"most {m.path_mtu} B onward (it says so: path MTU discovery works). What "
                f"the large MTU gains on this path: nothing past that hop, TCP segments are "
                f"{m.path_mtu - 40} B. What it costs: the first full-size segments of each "
                "connection are dropped and resent once the router's message arrives, and "
                f"{gain:.1f}x the packets per byte compared with an end-to-end {m.local_mtu}: "
                f"a loss-based stream's Mathis bound is {gain:.1f}x lower than it would be "
                "with jumbo frames all the way.",
                "RFC 1191 (path MTU discovery); Mathis et al. 1997",
                key="path_mtu",
                title="path MTU below the interface MTU",
            )
        )
    if p.loss_start_hop is not None and p.end_loss_pct > 0:
        where = _where(p, p.loss_start_hop)
        end_rtt = next((h.rtt_min_ms for h in reversed(p.hops) if h.rtt_min_ms), None)
        mss = (m.path_mtu if m and m.path_mtu else 1500) - 52
        bound = mathis_mbps(mss, end_rtt or 0.0, p.end_loss_pct / 100)
        bound_txt = (
            f" A loss-based sender (Reno, CUBIC) gets at most ~{bound:.1f} Mbit/s per stream "
            f"here (Mathis bound, MSS {mss} B, RTT {end_rtt:.1f} ms); BBR or parallel streams "
            "get past it, a larger buffer does not."
            if bound is not None and end_rtt
            else ""
        )
        out.append(
            Finding(
                "path-loss",
                "crit" if p.end_loss_pct >= CRIT_LOSS_PCT else "warn",
                f"{p.end_loss_pct:.2f} % loss from {where} to the end",
                "no loss",
                f"Packets are lost from {where} on: the loss carries on to every later hop "
                f"and to the target ({p.end_loss_pct:.2f} %), so it is on the link into that "
                f"hop or the router itself, not ICMP rate limiting.{bound_txt}",
                "Mathis et al., The macroscopic behavior of the TCP congestion avoidance "
                "algorithm, 1997",
                key="loss",
                title="loss on the path",
            )
        )
    for ttl in p.rate_limited_hops:
        hop = next(h for h in p.hops if h.ttl == ttl)
        what = "the target" if hop.destination else _where(p, ttl)
        carried = (
            f"only {hop.real_loss_pct:.2f} % of it is real loss carried on"
            if hop.real_loss_pct > 0
            else "later hops lose none of it, so it is no loss on the path"
        )
        out.append(
            Finding(
                "path-icmp-ratelimit",
                "info",
                f"{hop.loss_pct:.0f} % of probes unanswered at {what}",
                "",
                f"{what[0].upper() + what[1:]} answers only some probes: its router limits the "
                f"ICMP it sends (Linux: net.ipv4.icmp_ratelimit); {carried}.",
                "RFC 1812 4.3.2.8 (rate limiting of ICMP messages)",
                key="icmp_ratelimit",
                title="ICMP rate limiting",
            )
        )
    if p.rtt_jump_hop is not None and p.rtt_jump_ms is not None:
        where = _where(p, p.rtt_jump_hop)
        prev = "this host" if p.rtt_jump_hop == 1 else f"hop {p.rtt_jump_hop - 1}"
        out.append(
            Finding(
                "path-rtt-jump",
                "info",
                f"+{p.rtt_jump_ms:.1f} ms at {where}",
                "",
                f"The RTT jumps by {p.rtt_jump_ms:.1f} ms at {where}: the long-haul link is "
                f"the one from {prev} to it.",
                "",
                key="rtt",
                title="RTT jump",
            )
        )
    if p.syn is not None and p.syn.finding is not None:
        out.append(_rewrite_finding(p.syn.finding))
    code = exit_for_severities([f.severity for f in out])
    if not p.reached:
        code = ExitCode.UNKNOWN
    return PathAdvice(tuple(out), code)
