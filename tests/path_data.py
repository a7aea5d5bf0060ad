"""A synthetic `path` result for golden and unit tests: 5 hops, the RTT jump at hop 2, ICMP
rate limiting at hop 2, 1 % loss from hop 3 on, a 9000-byte host behind a 1500-byte hop."""

from __future__ import annotations

import dataclasses
import socket
import struct

from tcpwizard.measure.observe.synopts import SynOptions
from tcpwizard.measure.probes.hop_model import HopCounts, MtuFinding, PathHops, analyse
from tcpwizard.measure.probes.syntrace_model import (
    HopSyn,
    SynTrace,
    checksum,
    hop_view,
    locate,
    parse_icmp,
    syn_options_bytes,
    syn_segment,
)


def hop(ttl: int, rtt: float, got: int, addr: str, dest: bool = False) -> HopCounts:
    """One TTL's 300 probes: `got` answers from `addr`, their RTTs a little spread."""
    rtts = tuple(rtt + 0.01 * (i % 7) for i in range(got))
    return HopCounts(ttl, 300, rtts, (addr,) * got, dest, span_s=3.0)


def counts() -> list[HopCounts]:
    return [
        hop(1, 2.1, 300, "10.200.3.6"),
        hop(2, 42.2, 150, "10.200.3.10"),
        hop(3, 42.4, 296, "10.200.3.14"),
        hop(4, 42.4, 297, "10.200.3.18"),
        hop(5, 42.5, 296, "10.200.3.22", dest=True),
    ]


def mtu_drop_at_hop_2(addr: str, probes: int, blackhole_probes: int | None) -> MtuFinding:
    """This host's 9000 bytes narrowed to 1500 after hop 2 (`addr`); with
    `blackhole_probes`, silently: no 'fragmentation needed' comes back."""
    if blackhole_probes is None:
        return MtuFinding(9000, 1500, 2, addr, False, None, None, probes, "")
    return MtuFinding(
        9000, 1500, 2, addr, True, 2, addr, blackhole_probes,
        "packets over 1500 B vanish after hop 2 and no 'fragmentation needed' comes back",
    )  # fmt: skip


def icmp_hops(
    host: str,
    address: str,
    counted: list[HopCounts],
    names: dict[str, str],
    mtu: MtuFinding,
    probes_sent: int,
    elapsed_s: float,
    gateway: str | None = None,
    dev: str | None = None,
) -> PathHops:
    """An ICMP traceroute's result to `host`, analysed as `path` analyses its counts."""
    hops, jump, jump_ms, loss_at, end_loss, limited = analyse(counted, names)
    return PathHops(
        host=host,
        address=address,
        family=4,
        method="icmp",
        port=None,
        hops=hops,
        reached=True,
        rtt_jump_hop=jump,
        rtt_jump_ms=jump_ms,
        loss_start_hop=loss_at,
        end_loss_pct=end_loss,
        rate_limited_hops=limited,
        mtu=mtu,
        probes_sent=probes_sent,
        elapsed_s=elapsed_s,
        notes=(),
        gateway=gateway,
        dev=dev,
    )


def path(blackhole: bool = False) -> PathHops:
    mtu = mtu_drop_at_hop_2("10.200.3.10", 4, 42 if blackhole else None)
    names = {"10.200.3.10": "core-2.example.net"}
    return icmp_hops(
        "b.lab", "10.200.3.22", counts(), names, mtu, 1504, 5.2, gateway="10.200.3.6", dev="wan0"
    )


def unreached() -> PathHops:
    return dataclasses.replace(path(), reached=False, mtu=None)


# A device on the path that takes window scaling out of SYNs and clamps the MSS --------

SENT = SynOptions(1460, 7, True, True, 1)
SRC, DST, SPORT, DPORT, SEQ = "10.200.3.1", "10.200.3.22", 40001, 5301, 0x5A5A0001


def _ipv4(src: str, dst: str, proto: int, payload: bytes, ttl: int = 64) -> bytes:
    head = struct.pack(
        "!BBHHHBBH4s4s", 0x45, 0, 20 + len(payload), 0, 0, ttl, proto, 0,
        socket.inet_aton(src), socket.inet_aton(dst),
    )  # fmt: skip
    return head[:10] + struct.pack("!H", checksum(head)) + head[12:] + payload


def probe(mss: int | None = 1460, wscale: int | None = 7) -> bytes:
    """Our SYN as it left (or as a device left it: an option removed is NOPs in its place,
    as nftables' `reset tcp option` does)."""
    opts = syn_options_bytes(1460, True, True, 7, tsval=1)
    if wscale is None:
        opts = opts[:16] + b"\x01\x01\x01\x01"
    elif mss is not None and mss != 1460:
        opts = struct.pack("!BBH", 2, 4, mss) + opts[4:]
    seg = syn_segment(socket.inet_aton(SRC), socket.inet_aton(DST), SPORT, DPORT, SEQ, opts)
    return _ipv4(SRC, DST, 6, seg, ttl=1)


def time_exceeded(router: str, quoted: bytes, tcp_bytes: int | None = None) -> bytes:
    """A router's ICMP time exceeded quoting `quoted` (IP header on): the whole packet, as
    Linux quotes up to 576 bytes, or the IP header and `tcp_bytes` of TCP (RFC 792: 8)."""
    if tcp_bytes is not None:
        quoted = quoted[: 20 + tcp_bytes]
    icmp = struct.pack("!BBHI", 11, 0, 0, 0) + quoted
    icmp = icmp[:2] + struct.pack("!H", checksum(icmp)) + icmp[4:]
    return _ipv4(router, SRC, 1, icmp)


def rewritten_hops(
    short_at: int | None = None, silent_at: int | None = None, **device: int | None
) -> tuple[HopSyn, ...]:
    """Routers 1-4 and the far end at 5: the device sits on router 2 (it rewrites as it
    forwards, after the TTL check), so routers 3 and 4 quote the SYN rewritten."""
    out = []
    for ttl, addr in enumerate(("10.200.3.6", "10.200.3.10", "10.200.3.14", "10.200.3.18"), 1):
        pkt = probe(device.get("mss", 1460), device.get("wscale", 7)) if ttl >= 3 else probe()
        quotes = []
        if ttl != silent_at:
            q = parse_icmp(time_exceeded(addr, pkt, 8 if ttl == short_at else None))
            assert q is not None
            quotes.append((addr, q))
        out.append(hop_view(ttl, quotes, SENT))
    out.append(hop_view(5, [], SENT, DST))
    return tuple(out)


def syn_trace(
    short_at: int | None = None, silent_at: int | None = None, **device: int | None
) -> SynTrace:
    hops = rewritten_hops(short_at, silent_at, **device)
    return SynTrace(DPORT, SENT, hops, locate(hops), 10)


def rewritten() -> PathHops:
    """The path above with a device on router 2 that strips window scaling."""
    return dataclasses.replace(path(), syn=syn_trace(wscale=None))
