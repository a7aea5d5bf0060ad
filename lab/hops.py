"""Multi-hop labs: a router namespace per hop between hosts a and b (real kernel forwarding).

    a -[link 1: the lab's bottleneck, wan0]- r1 -[link 2]- r2 ... rN -[link N+1, veth]- b

Link 1 is the lab's own delay line (LabSpec.forward/reverse). Link k (2..N) is described by
hop k's HopSpec: a delay line of its own (TUN both ends, interface l<k>) when it has a delay,
rate or loss, else a veth pair; its MTU is the hop's. The last link is a veth at the lab's MTU,
named wan0 in b so the rest of the lab treats b as in a two-host lab. Each link k has its own
/30 (10.200.H.4k) and /64 (fd00:7478:H:k::); a and b route everything through their neighbour,
routers hold a route to every subnet. Routers answer every probe (icmp_ratelimit 0) unless
the hop sets a rate limit, and may drop their own "fragmentation needed" (nftables): a PMTU
black hole.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tcpwizard.lab import netns
from tcpwizard.lab.netns import LabError
from tcpwizard.lab.spec import Addresses, HopSpec, LabSpec

if TYPE_CHECKING:
    from tcpwizard.lab.lab import Lab

UNSHAPED_BPS = 10e9  # a hop link with delay or loss but no rate: the delay line's own pace
NFT_TABLE = "twlab"


@dataclass(frozen=True)
class LinkAddresses:
    """Link k joins node k-1 (upstream, .1 / ::1) and node k (downstream, .2 / ::2)."""

    up4: str
    down4: str
    up6: str
    down6: str


def _index(name: str) -> int:
    return hashlib.sha256(name.encode()).digest()[0]


def link_addresses(name: str, k: int) -> LinkAddresses:
    h = _index(name)
    base = 4 * k
    return LinkAddresses(
        up4=f"10.200.{h}.{base + 1}",
        down4=f"10.200.{h}.{base + 2}",
        up6=f"fd00:7478:{h:x}:{k:x}::1",
        down6=f"fd00:7478:{h:x}:{k:x}::2",
    )


def addresses(spec: LabSpec) -> Addresses:
    """a on link 1, b on link N+1."""
    first = link_addresses(spec.name, 1)
    last = link_addresses(spec.name, len(spec.hops) + 1)
    return Addresses(a4=first.up4, b4=last.down4, a6=first.up6, b6=last.down6)


def router_ns(name: str, k: int) -> str:
    return f"{name}-r{k}"


def routers(spec: LabSpec) -> list[str]:
    return [router_ns(spec.name, k) for k in range(1, len(spec.hops) + 1)]


def hop_address(spec: LabSpec, k: int, family: int = 4) -> str:
    """Router k's address on its upstream link: what a traceroute from a sees."""
    la = link_addresses(spec.name, k)
    return la.down4 if family == 4 else la.down6


def link_mtu(spec: LabSpec, k: int) -> int:
    if 2 <= k <= len(spec.hops):
        return spec.hops[k - 1].mtu or spec.mtu
    return spec.mtu


def delayline_name(name: str, k: int) -> str:
    return f"{name}-h{k}"


def first_peer(lab: Lab) -> str:
    """The namespace on the far side of the bottleneck: b, or router 1."""
    return router_ns(lab.name, 1) if lab.spec.hops else lab.ns_b


def _node(lab: Lab, k: int) -> str:
    """Node k of the chain: 0 is a, N+1 is b, else router k."""
    if k == 0:
        return lab.ns_a
    if k == len(lab.spec.hops) + 1:
        return lab.ns_b
    return router_ns(lab.name, k)


def create(lab: Lab) -> None:
    """Router namespaces and links 2..N+1 (link 1 is the lab's delay line)."""
    spec = lab.spec
    n = len(spec.hops)
    for ns in routers(spec):
        if netns.ns_exists(ns):
            raise LabError(f"network namespace {ns} already exists; pick another --name")
    for ns in [*routers(spec), lab.ns_b]:
        if ns != lab.ns_b:
            netns.ns_add(ns)
            netns.ip("link", "set", "lo", "up", ns=ns)
        # veth links need IPv6 neighbour discovery at once: no duplicate address detection.
        for key in ("net.ipv6.conf.default.accept_dad", "net.ipv6.conf.all.accept_dad"):
            netns.write_sysctl(ns, key, "0")
    for k in range(2, n + 2):
        up, down = _node(lab, k - 1), _node(lab, k)
        hop = spec.hops[k - 1] if k <= n else HopSpec()
        if hop.emulated:
            _start_hop_delayline(lab, k, hop)
        else:
            down_name = "wan0" if k == n + 1 else f"l{k}"
            netns.ip("link", "add", f"l{k}", "netns", up, "type", "veth", "peer", "name",
                     down_name, "netns", down)  # fmt: skip


def _start_hop_delayline(lab: Lab, k: int, hop: HopSpec) -> None:
    spec = lab.spec
    rate = hop.rate_bps or UNSHAPED_BPS
    queue = max(round(rate * max(spec.rtt_s, 0.001) / 8), 10 * link_mtu(spec, k))

    def params(loss: float) -> str:
        return json.dumps({"rate_bps": rate, "delay_s": hop.rtt_s / 2, "jitter_s": 0.0,
                           "loss": loss, "queue_bytes": queue})  # fmt: skip

    argv = [
        sys.executable, "-m", "tcpwizard.lab.delayline",
        "--name", delayline_name(lab.name, k),
        "--ns-a", _node(lab, k - 1), "--ns-b", _node(lab, k),
        "--ifname", f"l{k}", "--mtu", str(max(link_mtu(spec, k), spec.mtu)),
        "--forward", params(hop.loss), "--reverse", params(0.0),
    ]  # fmt: skip
    if lab.seed is not None:
        argv += ["--seed", str(lab.seed + k)]
    if lab.owner_pid:
        argv += ["--owner-pid", str(lab.owner_pid)]
    with open(lab.state.file(lab.name, f".h{k}.log"), "ab") as log:
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log,
            start_new_session=True, close_fds=True,
        )  # fmt: skip
    if not netns.said_ready(proc):
        raise LabError(f"lab {lab.name}: the delay line of hop {k} did not start")


def _is_tun(spec: LabSpec, k: int) -> bool:
    return k == 1 or (k <= len(spec.hops) and spec.hops[k - 1].emulated)


def _ip_both(ns: str, dev: str, la4: str, la6: str, mtu: int, tun: bool) -> None:
    # A TUN link needs no neighbour discovery (and no chatter crossing the delay line); a
    # veth needs its link-local address for it.
    netns.ip("link", "set", dev, "addrgenmode", "none" if tun else "eui64", ns=ns, check=False)
    netns.ip("link", "set", dev, "mtu", str(mtu), ns=ns)
    netns.ip("addr", "add", f"{la4}/30", "dev", dev, ns=ns)
    netns.ip("-6", "addr", "add", f"{la6}/64", "dev", dev, "nodad", ns=ns)
    netns.ip("link", "set", dev, "up", ns=ns)


def configure(lab: Lab) -> None:
    """Addresses, forwarding, routes and ICMP behaviour; after Lab._configure set up a and
    b's own interface (wan0)."""
    spec = lab.spec
    n = len(spec.hops)
    name = lab.name
    for k in range(1, n + 1):
        ns = router_ns(name, k)
        hop = spec.hops[k - 1]
        up_dev = "wan0" if k == 1 else f"l{k}"
        la = link_addresses(name, k)
        _ip_both(ns, up_dev, la.down4, la.down6, link_mtu(spec, k), _is_tun(spec, k))
        lb = link_addresses(name, k + 1)
        _ip_both(ns, f"l{k + 1}", lb.up4, lb.up6, link_mtu(spec, k + 1), _is_tun(spec, k + 1))
        for key, value in (
            ("net.ipv4.ip_forward", "1"),
            ("net.ipv6.conf.all.forwarding", "1"),
            ("net.ipv4.icmp_ratelimit", str(hop.icmp_ratelimit_ms)),
            ("net.ipv6.icmp.ratelimit", str(hop.icmp_ratelimit_ms)),
        ):
            netns.write_sysctl(ns, key, value)
        for j in range(1, n + 2):
            if j in (k, k + 1):
                continue
            lj = link_addresses(name, j)
            via = la.up4 if j < k else lb.down4
            via6 = la.up6 if j < k else lb.down6
            net4 = lj.up4.rsplit(".", 1)[0] + f".{4 * j}"
            netns.ip("route", "add", f"{net4}/30", "via", via, ns=ns)
            netns.ip("-6", "route", "add", lj.up6[:-1] + "/64", "via", via6, ns=ns)
        if hop.drop_frag_needed:
            _drop_frag_needed(ns)
    # b's wan0 is a veth here: Lab._configure turned its link-local address off.
    netns.ip("link", "set", "wan0", "down", ns=lab.ns_b)
    netns.ip("link", "set", "wan0", "addrgenmode", "eui64", ns=lab.ns_b)
    netns.ip("link", "set", "wan0", "up", ns=lab.ns_b)
    first, last = link_addresses(name, 1), link_addresses(name, n + 1)
    # (link down flushed its IPv6 address)
    netns.ip("-6", "addr", "add", f"{last.down6}/64", "dev", "wan0", "nodad", ns=lab.ns_b,
             check=False)  # fmt: skip
    netns.ip("route", "add", "default", "via", first.down4, ns=lab.ns_a)
    netns.ip("-6", "route", "add", "default", "via", first.down6, ns=lab.ns_a)
    netns.ip("route", "add", "default", "via", last.up4, ns=lab.ns_b)
    netns.ip("-6", "route", "add", "default", "via", last.up6, ns=lab.ns_b)


def _drop_frag_needed(ns: str) -> None:
    rules = (
        f"table inet {NFT_TABLE} {{\n"
        "  chain out {\n"
        "    type filter hook output priority 0; policy accept;\n"
        "    icmp type destination-unreachable icmp code frag-needed drop\n"
        "    icmpv6 type packet-too-big drop\n"
        "  }\n"
        "}\n"
    )
    netns.load_nft(ns, rules)


def _hop_delaylines(name: str, count: int) -> list[int]:
    wanted = {delayline_name(name, k) for k in range(2, count + 2)}
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        argv = netns.cmdline(int(entry))
        if "tcpwizard.lab.delayline" in argv and wanted & set(argv):
            pids.append(int(entry))
    return pids


def teardown(lab: Lab) -> None:
    """Remove the routers and their delay lines; safe when nothing of it exists."""
    spec = lab.spec
    if not spec.hops:
        return
    for pid in _hop_delaylines(lab.name, len(spec.hops)):
        netns.terminate(pid)
    for ns in routers(spec):
        netns.kill_ns_processes(ns)
        netns.ns_del(ns)
    for k in range(2, len(spec.hops) + 2):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(lab.state.file(lab.name, f".h{k}.log"))
