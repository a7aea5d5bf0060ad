"""Peerless capacity from TCP SYN pairs: for hosts without serve where ICMP is filtered but
a TCP port answers (an SSH or web server).

Each probe is a SYN carrying a full-size payload (the far end ignores the data without TCP
Fast Open, but the packet crosses the bottleneck at full size), sent from a raw socket. The
SYN-ACK or RST that answers each one is small, so the spacing of the answers keeps the
spacing the forward bottleneck gave the large SYNs: this measures the forward direction.
Our kernel answers each SYN-ACK with a RST (no socket owns the port), so no connection is
left half open. Needs root (CAP_NET_RAW).
"""

from __future__ import annotations

import os
import socket
import struct

from tcpwizard.exitcodes import PermissionRequired
from tcpwizard.measure.model import CapacityEstimate
from tcpwizard.measure.probes.capacity import peerless_estimate, send_pairs
from tcpwizard.measure.probes.dispersion import capprobe
from tcpwizard.measure.probes.rtt import icmp_checksum

IPV6_CHECKSUM = 7
TCP_SYN, TCP_RST, TCP_ACK = 0x02, 0x04, 0x10
_TCP = struct.Struct("!HHIIBBHHH")


def _source_address(family: int, addr: tuple[object, ...]) -> str:
    """The address this host would send from to `addr` (a connected UDP socket knows)."""
    with socket.socket(family, socket.SOCK_DGRAM) as s:
        s.connect((addr[0], 9, *addr[2:]))
        return str(s.getsockname()[0])


def syn_packet(
    family: int, src: str, dst: str, sport: int, dport: int, seq: int, payload: bytes
) -> bytes:
    """A TCP SYN with payload (header without options). IPv4: we checksum over the
    pseudo-header; IPv6: the kernel does (IPV6_CHECKSUM)."""
    head = _TCP.pack(sport, dport, seq, 0, 5 << 4, TCP_SYN, 65535, 0, 0)
    if family == socket.AF_INET6:
        return head + payload
    length = len(head) + len(payload)
    pseudo = socket.inet_aton(src) + socket.inet_aton(dst) + struct.pack("!BBH", 0, 6, length)
    csum = icmp_checksum(pseudo + head + payload)  # the same ones'-complement sum
    return _TCP.pack(sport, dport, seq, 0, 5 << 4, TCP_SYN, 65535, csum, 0) + payload


def parse_answer(data: bytes, family: int) -> tuple[int, int, int] | None:
    """(source port, destination port, flags) of a received TCP segment."""
    if family == socket.AF_INET:
        if len(data) < 20:
            return None
        data = data[(data[0] & 0x0F) * 4 :]
    if len(data) < 20:
        return None
    sport, dport, _seq, _ack, _off, flags, _w, _c, _u = _TCP.unpack_from(data)
    return sport, dport, flags


def syn_pairs(
    host: str,
    port: int,
    npairs: int = 12,
    spacing_s: float = 0.01,
    timeout: float = 1.0,
    mtu: int = 1500,
) -> CapacityEstimate | None:
    infos = socket.getaddrinfo(host, port, socket.AF_UNSPEC, socket.SOCK_STREAM)
    family, _, _, _, addr = infos[0]
    dst = str(addr[0])
    src = _source_address(family, addr)
    try:
        sock = socket.socket(family, socket.SOCK_RAW, socket.IPPROTO_TCP)
    except PermissionError:
        raise PermissionRequired("TCP SYN pairs need root (raw socket); skipped") from None
    ip_len = 40 if family == socket.AF_INET6 else 20
    payload = bytes(mtu - ip_len - 20)
    wire = mtu
    base_port = 40000 + int.from_bytes(os.urandom(2), "big") % 20000
    with sock:
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, IPV6_CHECKSUM, 16)
        pkts = [
            syn_packet(
                family,
                src,
                dst,
                base_port + k,
                port,
                int.from_bytes(os.urandom(4), "big"),
                payload,
            )
            for k in range(2 * npairs)
        ]
        target = (dst, 0, *addr[2:])
        tx, rx = send_pairs(
            sock,
            pkts,
            target,
            npairs,
            spacing_s,
            timeout,
            lambda data, src: _answer(data, src, family, dst, port, base_port, npairs),
        )
    pairs = capprobe(tx, rx, npairs, wire)
    if pairs is None:
        return None
    return peerless_estimate(
        pairs,
        "peerless-tcp-syn-pairs",
        "peerless TCP SYN pairs (no serve): forward bottleneck, lower confidence",
        0.35,
    )


def _answer(
    data: bytes,
    src: object,
    family: int,
    dst: str,
    port: int,
    base_port: int,
    npairs: int,
) -> int | None:
    """The index of the SYN whose SYN-ACK or RST `data` is (None: anything else)."""
    if not isinstance(src, tuple) or str(src[0]) != dst:
        return None
    parsed = parse_answer(data, family)
    if parsed is None:
        return None
    sport, dport, flags = parsed
    k = dport - base_port
    answer = (flags & (TCP_SYN | TCP_ACK)) == (TCP_SYN | TCP_ACK) or flags & TCP_RST
    return k if sport == port and 0 <= k < 2 * npairs and answer else None
