"""The lab's middlebox: nftables rules that rewrite the TCP handshake the way firewalls and
load balancers do (LabSpec.middlebox; docs/lab.md). `reset tcp option` overwrites an option
with NOPs (nftables >= 1.0.3 with a kernel that has it), `tcp option maxseg size set` lowers
the MSS (only where it is larger, as an MSS clamp does)."""

from __future__ import annotations

from tcpwizard.lab import netns
from tcpwizard.lab.spec import MiddleboxSpec

NFT_TABLE = "tcpwizard_middlebox"
MATCH = {
    "both": "tcp flags & syn == syn",  # SYN and SYN-ACK alike
    "syn": "tcp flags & (syn | ack) == syn",
    "syn-ack": "tcp flags & (syn | ack) == syn | ack",
}


def ruleset(mb: MiddleboxSpec, hook: str) -> str:
    """The table for one namespace: `forward` on a router, `postrouting` on a host."""
    syn = MATCH[mb.way]
    rules = [f"    {syn} reset tcp option {option}" for option in mb.strip]
    if mb.mss is not None:
        rules.append(
            f"    {syn} tcp option maxseg size > {mb.mss} tcp option maxseg size set {mb.mss}"
        )
    return (
        f"table inet {NFT_TABLE} {{\n"
        "  chain handshake {\n"
        f"    type filter hook {hook} priority mangle; policy accept;\n"
        + "\n".join(rules)
        + "\n  }\n}\n"
    )


def install(mb: MiddleboxSpec, namespaces: tuple[str, ...], hook: str) -> None:
    for ns in namespaces:
        netns.load_nft(ns, ruleset(mb, hook), "needs nftables >= 1.0.3: apt-get install nftables")


def router_or_hosts(mb: MiddleboxSpec, ns_a: str, ns_b: str, routers: tuple[str, ...]) -> None:
    """On router `mb.hop` when there are routers, else on both hosts' way out (every SYN
    and SYN-ACK crosses one of them, rewritten before it reaches the wire)."""
    if routers:
        install(mb, (routers[(mb.hop or 1) - 1],), "forward")
    else:
        install(mb, (ns_a, ns_b), "postrouting")
