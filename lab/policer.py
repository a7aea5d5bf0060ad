"""A token-bucket policer made of kernel parts: nftables `limit rate over ... drop`.

This kernel has no tc police action; an nftables byte limit is the same device a provider
edge runs: packets within the rate (plus the bucket) pass untouched, the excess is dropped at
once — no queue, so the RTT stays at the path's while TCP loses segments in bursts.

Where it sits: a link's policer (LinkSpec.policer_bps) in the node that receives from the
bottleneck (b, or router 1 with hops, for a->b; a for b->a), hooked at prerouting; a hop's
policer (HopSpec.policer_bps) on the router's forward chain for packets toward b.

The bucket's depth: nftables' byte limit holds one unit (a second) of the rate plus the burst
(nft_limit_init: tokens_max = unit x (rate + burst) / rate), so the bucket is rate x 1 s +
burst bytes. Trains shorter than that (a capacity probe's) pass at the line rate; a transfer
longer than bucket / (line - policed rate) is policed.
"""

from __future__ import annotations

import subprocess
from typing import TYPE_CHECKING

from tcpwizard.lab import hops, netns

if TYPE_CHECKING:
    from tcpwizard.lab.lab import Lab

NFT_TABLE = "twpolice"


def limit_expr(rate_bps: float, burst_bytes: int | None) -> str:
    """The nftables statement: drop what exceeds rate_bps (IP bits per second)."""
    expr = f"limit rate over {max(1, round(rate_bps / 8))} bytes/second"
    if burst_bytes:
        expr += f" burst {burst_bytes} bytes"
    return expr + " counter drop"


def ingress_rules(rate_bps: float, burst_bytes: int | None, iifname: str) -> str:
    """Police what arrives on `iifname` before routing (a host or router at the link's end).
    Priority -300 runs before conntrack: every packet counts, as on a provider's edge."""
    return (
        f"table inet {NFT_TABLE} {{\n"
        "  chain ingress_police {\n"
        "    type filter hook prerouting priority -300; policy accept;\n"
        f'    iifname "{iifname}" {limit_expr(rate_bps, burst_bytes)}\n'
        "  }\n"
        "}\n"
    )


def forward_rules(rate_bps: float, burst_bytes: int | None, iifname: str) -> str:
    """Police what a router forwards from `iifname` (toward b)."""
    return (
        f"table inet {NFT_TABLE} {{\n"
        "  chain forward_police {\n"
        "    type filter hook forward priority 0; policy accept;\n"
        f'    iifname "{iifname}" {limit_expr(rate_bps, burst_bytes)}\n'
        "  }\n"
        "}\n"
    )


def apply(lab: Lab) -> None:
    """Every policer the lab's spec asks for, in its namespace."""
    spec = lab.spec
    fwd, rev = spec.forward, spec.reverse
    if fwd.policer_bps is not None:
        netns.load_nft(
            hops.first_peer(lab), ingress_rules(fwd.policer_bps, fwd.policer_burst_bytes, "wan0")
        )
    if rev.policer_bps is not None:
        netns.load_nft(lab.ns_a, ingress_rules(rev.policer_bps, rev.policer_burst_bytes, "wan0"))
    for k, hop in enumerate(spec.hops, 1):
        if hop.policer_bps is not None:
            dev = "wan0" if k == 1 else f"l{k}"
            rules = forward_rules(hop.policer_bps, hop.policer_burst_bytes, dev)
            netns.load_nft(hops.router_ns(lab.name, k), rules)


def dropped(ns: str) -> int:
    """Packets the policer in `ns` dropped so far (0 when it has none): from nft's counter."""
    proc = subprocess.run(
        ["ip", "netns", "exec", ns, "nft", "list", "table", "inet", NFT_TABLE],
        capture_output=True, text=True, check=False, timeout=15,
    )  # fmt: skip
    total = 0
    for line in proc.stdout.splitlines():
        words = line.split()
        if "counter" in words and "packets" in words:
            total += int(words[words.index("packets") + 1])
    return total
