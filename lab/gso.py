"""The kernel's GSO super-packets as the delay line sees them: pure functions, no I/O.

A TUN opened with IFF_VNET_HDR and TCP segmentation offload (tun.open_tun) hands the delay
line one read per TCP super-packet: a 10-byte virtio-net header, then one IP packet of up to
64 KB whose payload the kernel would otherwise have cut into gso_size segments. Writing the
same bytes (header unchanged) into the far TUN delivers the super-packet whole; the far
kernel takes it like a GRO'd packet. That moves ~40x fewer packets through Python at the
same rate, but the bottleneck must still be charged, lose and queue per segment:

- charge: a super-packet of total length L with header length h (IP + TCP) and payload
  L - h holds n = ceil((L - h) / gso_size) segments; on the wire they are L + (n - 1) * h
  bytes (every segment repeats the headers).
- loss and drop-tail are decided per segment; where any segment is lost or does not fit,
  the super-packet is split here (split_tcp) into the segments the kernel would have sent,
  and only those segments are dropped.

The virtio-net header (include/uapi/linux/virtio_net.h), little-endian on a TUN unless
TUNSETVNETBE is used: flags u8, gso_type u8, hdr_len u16, gso_size u16, csum_start u16,
csum_offset u16.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass

VNET_HDR_LEN = 10
VNET_HDR = struct.Struct("<BBHHHH")
F_NEEDS_CSUM = 1  # VIRTIO_NET_HDR_F_NEEDS_CSUM: checksum from csum_start, stored at +offset
F_DATA_VALID = 2
GSO_NONE = 0
GSO_TCPV4 = 1
GSO_UDP = 3
GSO_TCPV6 = 4
GSO_UDP_L4 = 5
GSO_ECN = 0x80
PROTO_TCP = 6
PROTO_UDP = 17
TCP_CSUM_OFFSET = 16  # the checksum field inside the TCP header
UDP_CSUM_OFFSET = 6
TCP_FIN = 0x01
TCP_PSH = 0x08
TCP_CWR = 0x80
# The kernel's own caps (include/linux/netdevice.h): GSO_MAX_SEGS, and a super-packet's
# IP length fits 16 bits without BIG TCP (which the lab does not enable).
GSO_MAX_SEGS = 65535
MAX_SUPER_BYTES = 65535


@dataclass(frozen=True)
class Segments:
    """What one read holds: n segments, each repeating header_len bytes of IP + L4 header."""

    count: int
    header_len: int
    ip_len: int  # the super-packet's IP bytes (without the virtio-net header)

    @property
    def wire_bytes(self) -> int:
        return self.ip_len + (self.count - 1) * self.header_len


def l4_header_len(ip: bytes | memoryview, offset: int = 0) -> tuple[int, int] | None:
    """(IP header length, IP + L4 header length) of the TCP or UDP packet at `offset`, or
    None if it is neither (or an IPv6 packet with extension headers before them)."""
    if len(ip) < offset + 20:
        return None
    version = ip[offset] >> 4
    if version == 4:
        ihl = (ip[offset] & 0x0F) * 4
        proto = ip[offset + 9]
    elif version == 6:
        ihl = 40
        proto = ip[offset + 6]
    else:
        return None
    if proto == PROTO_UDP:
        return ihl, ihl + 8
    if proto != PROTO_TCP or len(ip) < offset + ihl + 13:
        return None
    return ihl, ihl + (ip[offset + ihl + 12] >> 4) * 4


def segments(pkt: bytes) -> Segments:
    """How many wire segments a read from a vnet-header TUN carries (1 unless GSO)."""
    ip_len = len(pkt) - VNET_HDR_LEN
    gso_size = pkt[4] | pkt[5] << 8
    if pkt[1] & ~GSO_ECN == GSO_NONE or gso_size == 0:
        return Segments(1, 0, ip_len)
    lens = l4_header_len(pkt, VNET_HDR_LEN)
    # Headers we cannot parse: the kernel's hdr_len (the linear part, at least the headers)
    # is the best bound left; it can only over-charge.
    hl = lens[1] if lens else (pkt[2] | pkt[3] << 8)
    payload = ip_len - hl
    return Segments(-(-payload // gso_size) if payload > gso_size else 1, hl, ip_len)


def wire_size(pkt: bytes) -> tuple[int, int]:
    """(segments, wire bytes) of a read, as segments(pkt) has them: the delay line's hot
    path, so TCP over IPv4/IPv6 is computed inline."""
    ip_len = len(pkt) - VNET_HDR_LEN
    gso_size = pkt[4] | pkt[5] << 8
    if pkt[1] & ~GSO_ECN == GSO_NONE or gso_size == 0:
        return 1, ip_len
    first = pkt[VNET_HDR_LEN]
    if first >> 4 == 4 and pkt[VNET_HDR_LEN + 9] == PROTO_TCP:
        ihl = (first & 0x0F) * 4
        hl = ihl + (pkt[VNET_HDR_LEN + ihl + 12] >> 4) * 4
    elif first >> 4 == 6 and pkt[VNET_HDR_LEN + 6] == PROTO_TCP:
        hl = 40 + (pkt[VNET_HDR_LEN + 52] >> 4) * 4
    else:
        s = segments(pkt)
        return s.count, s.wire_bytes
    payload = ip_len - hl
    count = -(-payload // gso_size) if payload > gso_size else 1
    return count, ip_len + (count - 1) * hl


def fold(total: int) -> int:
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return total


def ones_sum(data: bytes) -> int:
    """The 16-bit ones'-complement sum of `data` (RFC 1071), not complemented."""
    if len(data) % 2:
        data += b"\0"
    return fold(sum(struct.unpack(f"!{len(data) // 2}H", data)))


def ipv4_checksum(header: bytes) -> int:
    """The IPv4 header checksum of `header` (its checksum field zeroed)."""
    return ~ones_sum(header) & 0xFFFF


def pseudo_seed(ip_head: bytes, l4_len: int, proto: int) -> int:
    """What a CHECKSUM_PARTIAL packet carries in its L4 checksum field: the folded sum of the
    pseudo-header (the kernel's ~csum_tcpudp_magic(saddr, daddr, len, proto, 0)); whoever
    completes the checksum adds the sum over the L4 header and payload to it."""
    addrs = ip_head[12:20] if ip_head[0] >> 4 == 4 else ip_head[8:40]
    return ones_sum(addrs + struct.pack("!HH", proto, l4_len))


def split(pkt: bytes) -> list[bytes]:
    """The segments the kernel would have sent for super-packet `pkt` (virtio-net header +
    IP), each with its own header: gso_type NONE, NEEDS_CSUM at the L4 checksum (the far
    kernel takes it as CHECKSUM_PARTIAL, like a locally sent packet).

    TCP: sequence numbers advance by gso_size, FIN/PSH stay on the last segment and CWR on
    the first, the IPv4 id counts up (as tcp4_gso_segment does); UDP (GSO_UDP_L4): each
    datagram gets its own UDP length. A packet that is not GSO, or whose headers are not
    TCP/UDP over IPv4/IPv6 without extension headers, comes back whole."""
    gso_type = pkt[1] & ~GSO_ECN
    gso_size = pkt[4] | pkt[5] << 8
    lens = l4_header_len(pkt, VNET_HDR_LEN)
    if gso_type == GSO_NONE or gso_size == 0 or lens is None:
        return [pkt]
    ihl, hl = lens
    base = VNET_HDR_LEN
    ip_head = pkt[base : base + ihl]
    l4_head = pkt[base + ihl : base + hl]
    payload = pkt[base + hl :]
    if len(payload) <= gso_size:
        return [pkt]
    v4 = ip_head[0] >> 4 == 4
    proto = ip_head[9] if v4 else ip_head[6]
    tcp = proto == PROTO_TCP
    vnet = VNET_HDR.pack(
        F_NEEDS_CSUM, GSO_NONE, hl, 0, ihl, TCP_CSUM_OFFSET if tcp else UDP_CSUM_OFFSET
    )
    seq = struct.unpack_from("!I", l4_head, 4)[0] if tcp else 0
    flags = l4_head[13] if tcp else 0
    ip_id = struct.unpack_from("!H", ip_head, 4)[0] if v4 else 0
    n = -(-len(payload) // gso_size)
    out = []
    for i in range(n):
        data = payload[i * gso_size : (i + 1) * gso_size]
        l4_len = hl - ihl + len(data)
        if v4:
            head = bytearray(ip_head)
            struct.pack_into("!HH", head, 2, ihl + l4_len, (ip_id + i) & 0xFFFF)
            struct.pack_into("!H", head, 10, 0)
            struct.pack_into("!H", head, 10, ipv4_checksum(bytes(head)))
        else:
            head = bytearray(ip_head)
            struct.pack_into("!H", head, 4, l4_len)
        l4 = bytearray(l4_head)
        if tcp:
            struct.pack_into("!I", l4, 4, (seq + i * gso_size) & 0xFFFFFFFF)
            f = flags
            if i < n - 1:
                f &= ~(TCP_FIN | TCP_PSH)
            if i > 0:
                f &= ~TCP_CWR
            l4[13] = f
            struct.pack_into("!H", l4, TCP_CSUM_OFFSET, pseudo_seed(ip_head, l4_len, proto))
        else:
            struct.pack_into("!H", l4, 4, l4_len)
            struct.pack_into("!H", l4, UDP_CSUM_OFFSET, pseudo_seed(ip_head, l4_len, proto))
        out.append(vnet + bytes(head) + bytes(l4) + data)
    return out


def max_segments(rate_bps: float, mtu: int, burst_s: float) -> int:
    """gso_max_segs for the TUN that feeds a bottleneck of `rate_bps`: a super-packet
    arrives whole at the far end, so its first segment is late by the time the rest take to
    serialize; at most `burst_s` of the bottleneck's time per super-packet keeps that inside
    the delay line's own timing error. 1 (no super-packets) on slow links."""
    seg_s = mtu * 8 / rate_bps
    return max(1, min(GSO_MAX_SEGS, math.floor(burst_s / seg_s)))
