"""TCP SYNs with this host's options, TTL by TTL, and the options each router quotes back
(measure/probes/syntrace_model.py explains the reading; docs/middlebox.md the use), as tracebox
does, over IPv4 and IPv6.

The SYNs leave a raw socket (the kernel adds the IP header; IP_TTL or IPV6_UNICAST_HOPS per
probe) from a source port no socket of ours holds: a probe that reaches the far end draws a
SYN-ACK (or a RST from a closed port) and this host's kernel answers the SYN-ACK with a RST,
so no connection is left half open. The answers are read from a raw ICMP or ICMPv6 socket
(the routers' time exceeded) and the raw TCP socket (the far end's SYN-ACK or RST, which
marks the TTL that reached it). Root is needed for both raw sockets.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import select
import socket
import time

from tcpwizard.exitcodes import PermissionRequired
from tcpwizard.measure.observe.synopts import MAX_WSCALE, SynOptions
from tcpwizard.measure.probes.syntrace_model import (
    TCP_HEADER,
    Quote,
    SynTrace,
    hop_view,
    locate,
    parse_icmp,
    parse_icmp6,
    syn_options_bytes,
    syn_segment,
)

PROBES_PER_HOP = 2  # a second chance for a router that limits its ICMP rate
INTERVAL_S = 0.02  # between two probes: a router sees one every TTL-round
TIMEOUT_S = 1.0  # answers still read after the last probe
MAX_TIME_S = 8.0  # sending stops after this
MAX_HOPS = 30
RST = 0x04
SYN_ACK = 0x12


def _sysctl(name: str, default: str) -> str:
    try:
        with open(f"/proc/sys/net/ipv4/{name}") as f:
            return f.read().strip()
    except OSError:
        return default


# The IP and TCP headers an MSS leaves out of the route's MTU (RFC 879; RFC 8200's 40-byte
# IPv6 header).
MSS_HEADERS: dict[int, int] = {socket.AF_INET: 40, socket.AF_INET6: 60}


def own_syn_options(route_mtu: int, family: int = socket.AF_INET) -> SynOptions:
    """The options this host's kernel puts in its SYNs: MSS from the route's MTU, SACK,
    timestamps and window scaling as the sysctls say, the shift as tcp_select_initial_window()
    computes it from the largest receive buffer (tcp_rmem's maximum or rmem_max)."""
    wscale = None
    if _sysctl("tcp_window_scaling", "1") != "0":
        rmem = _sysctl("tcp_rmem", "4096 131072 6291456").split()
        core = 0
        with contextlib.suppress(OSError, ValueError), open("/proc/sys/net/core/rmem_max") as f:
            core = int(f.read())
        space = max(int(rmem[-1]) if rmem and rmem[-1].isdigit() else 0, core, 1)
        wscale = max(0, min(MAX_WSCALE, space.bit_length() - 1 - 15))
    return SynOptions(
        mss=max(88, route_mtu - MSS_HEADERS[family]),
        wscale=wscale,
        sack_permitted=_sysctl("tcp_sack", "1") != "0",
        timestamps=_sysctl("tcp_timestamps", "1") != "0",
    )


def family_of(address: str) -> int:
    return socket.AF_INET6 if ipaddress.ip_address(address).version == 6 else socket.AF_INET


def _source_for(address: str, port: int, family: int) -> str:
    with socket.socket(family, socket.SOCK_DGRAM) as s:
        s.connect((address, port))
        return str(s.getsockname()[0])


RAW_RCVBUF = 4 << 20  # bytes; capped by net.core.rmem_max


def syn_trace(
    address: str,
    port: int,
    route_mtu: int,
    max_ttl: int,
    probes: int = PROBES_PER_HOP,
    max_time_s: float = MAX_TIME_S,
) -> SynTrace:
    """SYNs to `address`:`port` with TTL 1..max_ttl, `probes` per TTL, within max_time_s of
    sending and TIMEOUT_S of waiting. PermissionRequired without root."""
    max_ttl = max(1, min(max_ttl, MAX_HOPS))
    family = family_of(address)
    v6 = family == socket.AF_INET6
    sent = own_syn_options(route_mtu, family)
    src = socket.inet_pton(family, _source_for(address, port, family))  # the checksum covers it
    dst = socket.inet_pton(family, address)
    try:
        tx = socket.socket(family, socket.SOCK_RAW, socket.IPPROTO_TCP)
    except PermissionError:
        raise PermissionRequired(
            "the SYN options per hop need root (raw sockets): run as root"
        ) from None
    try:
        icmp = socket.socket(
            family, socket.SOCK_RAW, socket.IPPROTO_ICMPV6 if v6 else socket.IPPROTO_ICMP
        )
    except PermissionError:
        tx.close()
        raise PermissionRequired(
            "the SYN options per hop need root (raw sockets): run as root"
        ) from None
    sport = 32768 + int.from_bytes(os.urandom(2), "big") % 28000  # no socket of ours holds it
    base = int.from_bytes(os.urandom(4), "big") & 0xFFFF0000  # low 16 bits: the probe id
    ttl_of: dict[int, int] = {}
    answers: dict[int, list[tuple[str, Quote]]] = {}
    reached: set[int] = set()
    start = time.monotonic()
    try:
        for sock in (tx, icmp):
            # A raw socket gets a copy of every TCP (or ICMP) packet the host receives: on a
            # busy host the default buffer overflows before the few answers are read.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RAW_RCVBUF)
        tx.setblocking(False)
        icmp.setblocking(False)

        def done() -> bool:
            far = min(reached, default=MAX_HOPS + 1)
            return all(
                ttl >= far or any(q.seq & 0xFFFF == p for _a, q in answers.get(ttl, []))
                for p, ttl in ttl_of.items()
            )

        def pump(until: float, stop: bool = False) -> None:
            while (left := until - time.monotonic()) > 0 and not (stop and done()):
                ready, _w, _x = select.select([icmp, tx], [], [], min(left, 0.05))
                for sock in ready:
                    for _ in range(256):  # bounded: whatever is queued now
                        try:
                            pkt, peer = sock.recvfrom(65535)
                        except (BlockingIOError, InterruptedError):
                            break
                        if sock is icmp:
                            q = parse_icmp6(pkt) if v6 else parse_icmp(pkt)
                            _icmp_answer(q, str(peer[0]), dst, sport, port, base, ttl_of, answers)
                        else:
                            # An IPv6 raw socket delivers the segment without its IP header.
                            seg = _from(pkt, str(peer[0]), address) if v6 else _ipv4_tcp(pkt, dst)
                            _tcp_answer(seg, sport, port, base, ttl_of, reached)

        pid = 0
        for _round in range(probes):
            for ttl in range(1, max_ttl + 1):
                if time.monotonic() - start > max_time_s:
                    break
                if any(t <= ttl for t in reached):
                    break  # the far end answered at a lower TTL: no router beyond
                pid += 1
                ttl_of[pid] = ttl
                tsval = int(time.monotonic() * 1000) & 0xFFFFFFFF
                opts = syn_options_bytes(
                    sent.mss, sent.sack_permitted, sent.timestamps, sent.wscale, tsval
                )
                seg = syn_segment(src, dst, sport, port, (base | pid) & 0xFFFFFFFF, opts)
                if v6:
                    tx.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_UNICAST_HOPS, ttl)
                else:
                    tx.setsockopt(socket.IPPROTO_IP, socket.IP_TTL, ttl)
                with contextlib.suppress(OSError):  # a local error: this probe is lost
                    tx.sendto(seg, (address, 0))
                pump(time.monotonic() + INTERVAL_S)
        pump(time.monotonic() + TIMEOUT_S, stop=True)
    finally:
        tx.close()
        icmp.close()
    top = min(reached, default=max_ttl)
    hops = tuple(
        hop_view(ttl, answers.get(ttl, []), sent, address if ttl in reached else None)
        for ttl in range(1, top + 1)
    )
    notes = []
    if hops and all(h.quote != "full" for h in hops if not h.destination):
        notes.append("no router quoted the SYN's options (quote too short or no answer)")
    return SynTrace(port, sent, hops, locate(hops), pid, tuple(notes))


def _icmp_answer(
    q: Quote | None,
    router: str,
    dst: bytes,
    sport: int,
    dport: int,
    base: int,
    ttl_of: dict[int, int],
    answers: dict[int, list[tuple[str, Quote]]],
) -> None:
    if q is None or q.dst != dst or q.sport != sport or q.dport != dport:
        return
    if q.seq & 0xFFFF0000 != base:
        return
    ttl = ttl_of.get(q.seq & 0xFFFF)
    if ttl is not None:
        answers.setdefault(ttl, []).append((router, q))


def _ipv4_tcp(pkt: bytes, dst: bytes) -> bytes | None:
    """The TCP segment of an IPv4 packet from the far end (a raw IPv4 socket delivers the
    IP header too)."""
    if len(pkt) < 20 or pkt[0] >> 4 != 4 or pkt[12:16] != dst:
        return None
    return pkt[(pkt[0] & 0x0F) * 4 :]


def _from(seg: bytes, peer: str, address: str) -> bytes | None:
    """The segment when it came from the far end."""
    return seg if ipaddress.ip_address(peer) == ipaddress.ip_address(address) else None


def _tcp_answer(
    tcp: bytes | None,
    sport: int,
    dport: int,
    base: int,
    ttl_of: dict[int, int],
    reached: set[int],
) -> None:
    """The far end's SYN-ACK (open port) or RST (closed): its ack is our probe's seq + 1."""
    if tcp is None or len(tcp) < TCP_HEADER.size:
        return
    src_port, dst_port, _seq, ack, _off, flags, *_rest = TCP_HEADER.unpack_from(tcp)
    if src_port != dport or dst_port != sport or not flags & (RST | SYN_ACK):
        return
    probe = (ack - 1) & 0xFFFFFFFF
    if probe & 0xFFFF0000 == base and (ttl := ttl_of.get(probe & 0xFFFF)) is not None:
        reached.add(ttl)
