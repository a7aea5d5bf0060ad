"""Where on the path a device rewrites the TCP handshake: the SYN's options as each router
quoted them back in its ICMP "time exceeded" (docs/middlebox.md), as tracebox does.

Pure: the packets are built and parsed here, the sockets live in measure/probes/syntrace.py. A
router that drops a probe for its TTL quotes the probe's IP header and, per RFC 1812 /
Linux (`icmp_send`: up to 576 bytes in all), the whole TCP header with its options, as
the packet arrived at that router. RFC 792 asks for only 8 bytes of the transport header:
the ports and the sequence number, enough to match the answer to its probe but not to see
any option ("quote too short").

A Linux router drops a packet whose TTL runs out in `ip_forward()`, before the netfilter
`forward` hook runs, so a rewrite in router K's forward path shows first in router K+1's
quote (or in what the far end received): the first hop whose quote differs from what was
sent puts the device at the hop before it or on the link just after that hop.
"""

from __future__ import annotations

import struct
from collections import Counter
from dataclasses import dataclass

from tcpwizard.measure.observe.synopts import SynOptions, parse_options

IPPROTO_TCP = 6
ICMP_TIME_EXCEEDED = 11
ICMP_UNREACH = 3
ICMP6_UNREACH = 1  # RFC 4443
ICMP6_TIME_EXCEEDED = 3
IPV6_HEADER = 40
SYN = 0x02
TCP_HEADER = struct.Struct("!HHIIBBHHH")  # ports, seq, ack, offset, flags, window, csum, urg

# How a hop's answer quoted our SYN.
FULL = "full"  # the whole TCP header with its options
SHORT = "short"  # only the first 8 bytes (RFC 792): ports and sequence number
NONE = "none"  # no answer at this TTL


@dataclass(frozen=True)
class HopSyn:
    """One hop's view of the SYN: the options as the packet arrived at that router."""

    ttl: int
    address: str | None
    quote: str  # FULL, SHORT or NONE
    seen: SynOptions | None  # None unless the quote was FULL
    removed: tuple[str, ...] = ()  # options sent that this hop did not see
    changed: tuple[str, ...] = ()  # options that arrived with another value, in words
    destination: bool = False  # the far end answered this TTL (SYN-ACK or RST)

    @property
    def rewritten(self) -> bool:
        return bool(self.removed or self.changed)


@dataclass(frozen=True)
class SynHopFinding:
    """The stretch of the path where the SYN's options changed."""

    after_hop: int  # the last hop that saw the SYN as sent (0: this host)
    after_address: str | None
    before_hop: int | None  # the first hop that saw it rewritten (None: the far end)
    before_address: str | None
    removed: tuple[str, ...]
    changed: tuple[str, ...]

    @property
    def where(self) -> str:
        first = "this host" if self.after_hop == 0 else _hop(self.after_hop, self.after_address)
        last = (
            "the far end" if self.before_hop is None else _hop(self.before_hop, self.before_address)
        )
        return f"between {first} and {last}"

    @property
    def text(self) -> str:
        what = [f"{o} removed" for o in self.removed] + list(self.changed)
        return f"the SYN's options changed {self.where}: {', '.join(what)}; {self.device}"

    @property
    def device(self) -> str:
        """Which box it can be: a router rewrites after its own TTL check."""
        if self.before_hop is not None and self.before_hop > self.after_hop + 1:
            return (
                f"the device is one of hops {self.after_hop or 1}-{self.before_hop - 1} or "
                "on a link between them (the hops in between quoted no options)"
            )
        if self.after_hop == 0:
            return "the device is this host's own way out or on the link to hop 1"
        return (
            f"the device is hop {self.after_hop} itself (a router drops a probe for its TTL "
            "before its forwarding rules run, so its own rewrite shows only past it) or on "
            "the link just after it"
        )


def _hop(ttl: int, address: str | None) -> str:
    return f"hop {ttl} ({address or 'no answer'})"


@dataclass(frozen=True)
class SynTrace:
    """SYNs with this host's options sent hop by hop, and where they changed."""

    port: int
    sent: SynOptions
    hops: tuple[HopSyn, ...]
    finding: SynHopFinding | None
    probes_sent: int
    notes: tuple[str, ...] = ()


# Building ----------------------------------------------------------------------------


def syn_options_bytes(
    mss: int | None, sack: bool, timestamps: bool, wscale: int | None, tsval: int = 0
) -> bytes:
    """The options the Linux kernel puts in a SYN, in its order (tcp_options_write():
    MSS, then SACK-permitted folded into the timestamps' NOPs, then NOP + window scale)."""
    out = b""
    if mss is not None:
        out += struct.pack("!BBH", 2, 4, mss)
    if timestamps:
        out += (b"\x04\x02" if sack else b"\x01\x01") + struct.pack("!BBII", 8, 10, tsval, 0)
    elif sack:
        out += b"\x01\x01\x04\x02"
    if wscale is not None:
        out += struct.pack("!BBBB", 1, 3, 3, wscale)
    return out


def checksum(data: bytes) -> int:
    """The Internet checksum (RFC 1071)."""
    if len(data) % 2:
        data += b"\x00"
    total: int = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def syn_segment(
    src: bytes, dst: bytes, sport: int, dport: int, seq: int, options: bytes, window: int = 65535
) -> bytes:
    """A TCP SYN (header and options, no payload) with its checksum over the IP pseudo-
    header: IPv4's when `src`/`dst` are 4-byte addresses (RFC 793 section 3.1), IPv6's when
    they are 16 (RFC 8200 section 8.1: a 32-bit length and the next header last)."""
    options += b"\x00" * (-len(options) % 4)
    offset = (20 + len(options)) // 4
    head = TCP_HEADER.pack(sport, dport, seq, 0, offset << 4, SYN, window, 0, 0) + options
    if len(src) == 16:
        pseudo = src + dst + struct.pack("!I3xB", len(head), IPPROTO_TCP)
    else:
        pseudo = src + dst + struct.pack("!BBH", 0, IPPROTO_TCP, len(head))
    csum = checksum(pseudo + head)
    return head[:16] + struct.pack("!H", csum) + head[18:]


# Parsing -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Quote:
    """One ICMP error that quotes a probe of ours."""

    kind: int  # ICMP type
    sport: int
    dport: int
    seq: int
    dst: bytes  # the quoted packet's destination address
    options: SynOptions | None  # None: the quote stops before the end of the options


def parse_icmp(packet: bytes) -> Quote | None:
    """An IPv4 packet from a raw ICMP socket (IP header first): the TCP probe it quotes,
    None when it is not a time-exceeded or unreachable quoting a TCP segment."""
    if len(packet) < 20 or packet[0] >> 4 != 4:
        return None
    icmp = packet[(packet[0] & 0x0F) * 4 :]
    if len(icmp) < 8 + 20 or icmp[0] not in (ICMP_TIME_EXCEEDED, ICMP_UNREACH):
        return None
    inner = icmp[8:]
    ihl = (inner[0] & 0x0F) * 4
    if inner[0] >> 4 != 4 or ihl < 20 or inner[9] != IPPROTO_TCP or len(inner) < ihl + 8:
        return None
    return _quoted_tcp(icmp[0], inner[ihl:], inner[16:20])


def parse_icmp6(packet: bytes) -> Quote | None:
    """An ICMPv6 message from a raw ICMPv6 socket (the kernel strips the IPv6 header): the
    TCP probe it quotes, None when it is not a time-exceeded or unreachable quoting a TCP
    segment right after the quoted IPv6 header (a probe of ours carries no extension)."""
    if len(packet) < 8 + IPV6_HEADER + 8 or packet[0] not in (ICMP6_TIME_EXCEEDED, ICMP6_UNREACH):
        return None
    inner = packet[8:]
    if inner[0] >> 4 != 6 or inner[6] != IPPROTO_TCP:
        return None
    return _quoted_tcp(packet[0], inner[IPV6_HEADER:], inner[24:40])


def _quoted_tcp(kind: int, tcp: bytes, dst: bytes) -> Quote:
    sport, dport, seq = struct.unpack_from("!HHI", tcp)
    options = None
    if len(tcp) >= 20:
        offset = (tcp[12] >> 4) * 4
        if offset >= 20 and len(tcp) >= offset:
            options = parse_options(tcp[20:offset])
    return Quote(kind, sport, dport, seq, dst, options)


# Analysis ----------------------------------------------------------------------------


def compare(sent: SynOptions, seen: SynOptions) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(options removed, options changed in words) between what was sent and what a hop
    saw. An option overwritten with NOPs and one taken out read the same: removed."""
    removed: list[str] = []
    changed: list[str] = []
    for name, was, now in (
        ("MSS", sent.mss is not None, seen.mss is not None),
        ("window scaling", sent.wscale is not None, seen.wscale is not None),
        ("SACK", sent.sack_permitted, seen.sack_permitted),
        ("timestamps", sent.timestamps, seen.timestamps),
    ):
        if was and not now:
            removed.append(name)
        elif now and not was:
            changed.append(f"{name} added")
    if sent.mss is not None and seen.mss is not None and seen.mss != sent.mss:
        verb = "clamped" if seen.mss < sent.mss else "raised"
        changed.append(f"MSS {verb} {sent.mss} -> {seen.mss}")
    if sent.wscale is not None and seen.wscale is not None and seen.wscale != sent.wscale:
        changed.append(f"window scale {sent.wscale} -> {seen.wscale}")
    return tuple(removed), tuple(changed)


def hop_view(
    ttl: int,
    quotes: list[tuple[str, Quote]],
    sent: SynOptions,
    destination: str | None = None,
) -> HopSyn:
    """One TTL's answers: the most frequent answering router, and its fullest quote;
    `destination`: the far end's address when it answered this TTL."""
    if not quotes:
        return HopSyn(ttl, destination, NONE, None, destination=destination is not None)
    address = Counter(a for a, _ in quotes).most_common(1)[0][0]
    full = [q.options for a, q in quotes if a == address and q.options is not None]
    if not full:
        return HopSyn(ttl, address, SHORT, None, destination=destination is not None)
    seen = full[0]
    removed, changed = compare(sent, seen)
    return HopSyn(ttl, address, FULL, seen, removed, changed, destination is not None)


def last_intact(hops: tuple[HopSyn, ...]) -> tuple[int, str | None]:
    """The last router that quoted the SYN as sent, before any quote showed it rewritten
    ((0, None): none did, or this host's own way out)."""
    intact: tuple[int, str | None] = (0, None)
    for h in sorted(hops, key=lambda x: x.ttl):
        if h.destination or (h.quote == FULL and h.rewritten):
            break
        if h.quote == FULL:
            intact = (h.ttl, h.address)
    return intact


def locate(hops: tuple[HopSyn, ...]) -> SynHopFinding | None:
    """The first hop whose quote shows the SYN rewritten, after the last one that saw it
    as sent; None when every quote shows it as sent or none could tell."""
    after, address = last_intact(hops)
    for h in sorted(hops, key=lambda x: x.ttl):
        if h.destination:
            break
        if h.quote == FULL and h.rewritten:
            return SynHopFinding(after, address, h.ttl, h.address, h.removed, h.changed)
    return None


def past_last_router(hops: tuple[HopSyn, ...]) -> str | None:
    """Where a rewrite the far end saw (serve's report) but no router quoted must be:
    past the last router that quoted the SYN intact. None when no router did."""
    after, address = last_intact(hops)
    if after == 0 or locate(hops) is not None:
        return None
    return (
        f"hop {after} ({address}) quoted the SYN as sent, the last router to do so: the "
        f"device is hop {after} itself (a router drops a probe for its TTL before its "
        "forwarding rules run) or past it, toward the far end"
    )
