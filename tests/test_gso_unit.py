"""GSO super-packets in the delay line: the virtio-net header read, the per-segment charge,
the split into the segments the kernel would have sent, and the Direction's per-segment loss
and drop-tail, on hand-built byte strings (no TUN, no root)."""

from __future__ import annotations

import random
import socket
import struct
from collections.abc import Iterator

import pytest

from tcpwizard.lab import gso
from tcpwizard.lab.delayline import Direction, LinkParams

MSS = 1448
TCP_OPTS = 12  # timestamps, as Linux sends them: a 32-byte TCP header


def _vnet(gso_type: int, hdr_len: int, gso_size: int, csum_start: int, csum_off: int) -> bytes:
    return gso.VNET_HDR.pack(gso.F_NEEDS_CSUM, gso_type, hdr_len, gso_size, csum_start, csum_off)


def _tcp_header(seq: int, flags: int) -> bytes:
    doff = (20 + TCP_OPTS) // 4
    return struct.pack("!HHIIBBHHH", 40000, 5201, seq, 7, doff << 4, flags, 5000, 0, 0) + (
        b"\x01\x01\x08\x0a" + b"\0" * 8
    )


def _ipv4(payload_len: int, proto: int, ip_id: int = 1000) -> bytes:
    head = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + payload_len, ip_id, 0x4000, 64, proto, 0,
                       bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2]))  # fmt: skip
    return head[:10] + struct.pack("!H", gso.ipv4_checksum(head)) + head[12:]


def _ipv6(payload_len: int, proto: int) -> bytes:
    return struct.pack("!IHBB16s16s", 6 << 28, payload_len, proto, 64,
                       b"\xfd" + b"\0" * 14 + b"\1", b"\xfd" + b"\0" * 14 + b"\2")  # fmt: skip


def tcp_super(n_full: int, tail: int, v6: bool = False, flags: int = 0x18 | 0x01) -> bytes:
    """A TCP super-packet as a TUN read gives it: n_full MSS segments plus `tail` bytes."""
    data = bytes(i % 251 for i in range(n_full * MSS + tail))
    tcp = _tcp_header(1_000_000, flags)
    ip = _ipv6(len(tcp) + len(data), 6) if v6 else _ipv4(len(tcp) + len(data), 6)
    hl = len(ip) + len(tcp)
    kind = gso.GSO_TCPV6 if v6 else gso.GSO_TCPV4
    return _vnet(kind, hl, MSS, len(ip), gso.TCP_CSUM_OFFSET) + ip + tcp + data


def _completed_l4_checksum(segment: bytes) -> tuple[int, int]:
    """(checksum as completed from the NEEDS_CSUM seed, checksum computed from scratch)."""
    ip = segment[gso.VNET_HDR_LEN :]
    lens = gso.l4_header_len(ip)
    assert lens is not None
    ihl = lens[0]
    l4 = ip[ihl:]
    v4 = ip[0] >> 4 == 4
    proto = ip[9] if v4 else ip[6]
    completed = ~gso.ones_sum(l4) & 0xFFFF  # the seed is in the field: sum it with the rest
    off = gso.TCP_CSUM_OFFSET if proto == 6 else gso.UDP_CSUM_OFFSET
    zeroed = l4[:off] + b"\0\0" + l4[off + 2 :]
    addrs = ip[12:20] if v4 else ip[8:40]
    pseudo = addrs + struct.pack("!HH", proto, len(l4))
    return completed, ~gso.ones_sum(pseudo + zeroed) & 0xFFFF


def test_a_plain_packet_is_one_segment_of_its_own_length() -> None:
    pkt = bytes(gso.VNET_HDR_LEN) + _ipv4(8 + 100, 17) + b"\0" * 108
    seg = gso.segments(pkt)
    assert (seg.count, seg.wire_bytes) == (1, 20 + 108)
    assert gso.wire_size(pkt) == (1, 128)
    assert gso.split(pkt) == [pkt]


@pytest.mark.parametrize("v6", [False, True])
def test_a_super_packet_is_charged_per_wire_byte_of_each_segment(v6: bool) -> None:
    pkt = tcp_super(4, 100, v6=v6)
    hl = (40 if v6 else 20) + 32
    seg = gso.segments(pkt)
    ip_len = len(pkt) - gso.VNET_HDR_LEN
    assert (seg.count, seg.header_len) == (5, hl)
    # 4 x 1448 + 100 payload bytes leave as five packets, each with its own headers.
    assert seg.wire_bytes == ip_len + 4 * hl == 4 * (hl + MSS) + hl + 100
    assert gso.wire_size(pkt) == (5, seg.wire_bytes)


def test_an_exact_multiple_of_gso_size_has_no_empty_last_segment() -> None:
    assert gso.segments(tcp_super(3, 0)).count == 3


@pytest.mark.parametrize("v6", [False, True])
def test_split_gives_the_segments_the_kernel_would_have_sent(v6: bool) -> None:
    pkt = tcp_super(2, 500, v6=v6)
    parts = gso.split(pkt)
    hl = (40 if v6 else 20) + 32
    assert [len(p) - gso.VNET_HDR_LEN for p in parts] == [hl + MSS, hl + MSS, hl + 500]
    assert sum(len(p) - gso.VNET_HDR_LEN for p in parts) == gso.segments(pkt).wire_bytes
    ihl = hl - 32
    payload = b"".join(p[gso.VNET_HDR_LEN + hl :] for p in parts)
    assert payload == pkt[gso.VNET_HDR_LEN + hl :]
    for i, p in enumerate(parts):
        flags, kind, _, size, start, off = gso.VNET_HDR.unpack_from(p)
        assert (flags, kind, size, start, off) == (gso.F_NEEDS_CSUM, 0, 0, ihl, 16)
        ip = p[gso.VNET_HDR_LEN :]
        if v6:
            assert struct.unpack_from("!H", ip, 4)[0] == len(ip) - 40
        else:
            assert struct.unpack_from("!H", ip, 2)[0] == len(ip)
            assert struct.unpack_from("!H", ip, 4)[0] == 1000 + i  # the IP id counts up
            assert gso.ones_sum(ip[:20]) == 0xFFFF  # a valid header checksum
        seq = struct.unpack_from("!I", ip, ihl + 4)[0]
        assert seq == 1_000_000 + i * MSS
        tcp_flags = ip[ihl + 13]
        last = i == len(parts) - 1
        assert bool(tcp_flags & (gso.TCP_FIN | gso.TCP_PSH)) == last
        completed, scratch = _completed_l4_checksum(p)
        assert completed == scratch


def test_cwr_stays_on_the_first_segment_only() -> None:
    parts = gso.split(tcp_super(2, 10, flags=0x10 | gso.TCP_CWR))
    assert [p[gso.VNET_HDR_LEN + 20 + 13] & gso.TCP_CWR for p in parts] == [gso.TCP_CWR, 0, 0]


def test_a_udp_super_packet_splits_into_datagrams() -> None:
    size = 1200
    data = bytes(range(200)) * 15  # 3000 bytes: 1200 + 1200 + 600
    udp = struct.pack("!HHHH", 5000, 6000, 8 + len(data), 0)
    ip = _ipv4(8 + len(data), 17)
    pkt = _vnet(gso.GSO_UDP_L4, 28, size, 20, gso.UDP_CSUM_OFFSET) + ip + udp + data
    assert gso.segments(pkt).count == 3
    parts = gso.split(pkt)
    assert [struct.unpack_from("!H", p, gso.VNET_HDR_LEN + 24)[0] for p in parts] == [
        1208,
        1208,
        608,
    ]
    for p in parts:
        completed, scratch = _completed_l4_checksum(p)
        assert completed == scratch


def test_unparseable_headers_are_charged_by_the_kernels_hdr_len_and_not_split() -> None:
    # IPv6 with a hop-by-hop header (next header 0) before TCP.
    ip = _ipv6(8 + 32 + 3000, 0) + b"\x06" + b"\0" * 7 + _tcp_header(1, 0x10) + b"\0" * 3000
    pkt = _vnet(gso.GSO_TCPV6, 80, MSS, 48, 16) + ip
    seg = gso.segments(pkt)
    assert (seg.count, seg.header_len) == (3, 80)
    assert gso.wire_size(pkt) == (3, seg.wire_bytes)
    assert gso.split(pkt) == [pkt]


def test_super_packets_stay_within_the_burst_the_line_allows() -> None:
    # A 1500-byte packet takes 120 us at 100 Mbit/s: longer than the burst, so none.
    assert gso.max_segments(100e6, 1500, 100e-6) == 1
    assert gso.max_segments(1e9, 1500, 100e-6) == 8  # 12 us each
    assert gso.max_segments(10e9, 1500, 100e-6) == 83
    assert gso.max_segments(10e9, 9000, 100e-6) == 13


# -- the delay line's Direction on virtio-net framed packets ------------------------------


@pytest.fixture
def pipes() -> Iterator[tuple[socket.socket, socket.socket, socket.socket, socket.socket]]:
    src_w, src_r = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    dst_w, dst_r = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    for s in (src_w, src_r, dst_w, dst_r):
        s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    for s in (src_r, dst_r):
        s.setblocking(False)
    src_w.settimeout(5.0)  # a full queue fails the test instead of hanging it
    yield src_w, src_r, dst_w, dst_r
    for s in (src_w, src_r, dst_w, dst_r):
        s.close()


def _direction(src: socket.socket, dst: socket.socket, seed: int = 1, **kw: float) -> Direction:
    params = {"rate_bps": 8e6, "delay_s": 0.010, "jitter_s": 0.0, "loss": 0.0,
              "queue_bytes": 1_000_000} | kw  # fmt: skip
    p = LinkParams(**params)  # type: ignore[arg-type]
    return Direction(src.fileno(), dst.fileno(), p, random.Random(seed), 1500, gso=True)


def test_a_whole_super_packet_leaves_when_its_last_segment_would(
    pipes: tuple[socket.socket, ...],
) -> None:
    src_w, src_r, dst_w, _ = pipes
    d = _direction(src_r, dst_w)  # 8 Mbit/s: one byte per microsecond
    pkt = tcp_super(4, 0)
    src_w.send(pkt)
    assert d.ingest(now=1.0)
    wire = 4 * (52 + MSS)
    assert [t for t, _ in d.pending] == pytest.approx([1.0 + wire * 1e-6 + 0.010])
    assert d.pending[0][1] == pkt  # header and all, unchanged
    assert (d.packets_in, d.bytes_in, d.super_packets) == (4, wire, 1)
    d.flush(now=2.0)
    assert d.packets_out == 4


def test_drop_tail_takes_the_segments_that_fit(pipes: tuple[socket.socket, ...]) -> None:
    src_w, src_r, dst_w, _ = pipes
    d = _direction(src_r, dst_w, queue_bytes=3 * 1500 + 100)
    src_w.send(tcp_super(5, 0))
    d.ingest(now=0.0)
    # Three 1500-byte segments fit the queue; the other two are dropped, as packets would be.
    assert (len(d.pending), d.queue_drops, d.split) == (3, 2, 1)
    seqs = [struct.unpack_from("!I", p, gso.VNET_HDR_LEN + 24)[0] for _, p in d.pending]
    assert seqs == [1_000_000, 1_000_000 + MSS, 1_000_000 + 2 * MSS]
    assert [t for t, _ in d.pending] == pytest.approx([0.0115, 0.0130, 0.0145])


def test_random_loss_is_per_segment_not_per_super_packet(pipes: tuple[socket.socket, ...]) -> None:
    src_w, src_r, dst_w, _ = pipes
    d = _direction(src_r, dst_w, rate_bps=1e12, loss=0.02, queue_bytes=10**9)
    pkt = tcp_super(20, 0)
    for _ in range(400):
        for _ in range(5):  # a Unix datagram socket queues 10 at most (max_dgram_qlen)
            src_w.send(pkt)
        d.ingest(now=0.0)
    segments = 400 * 5 * 20
    assert d.packets_in == segments
    delivered = sum(20 if len(p) > 2000 else 1 for _, p in d.pending)
    assert d.lost + delivered == segments
    # 40,000 segments at p = 2 %: sigma 0.07 %; a whole-super-packet drop would lose ~33 %.
    assert 0.017 <= d.lost / segments <= 0.023
    # Only super-packets with a loss were split; the others went on whole.
    assert 0 < d.split < 2000 * 0.5


def test_plain_packets_on_a_gso_line_behave_as_before(pipes: tuple[socket.socket, ...]) -> None:
    src_w, src_r, dst_w, _ = pipes
    d = _direction(src_r, dst_w)
    pkt = bytes(gso.VNET_HDR_LEN) + _ipv4(980, 17) + b"\0" * 980  # 1000 IP bytes
    for _ in range(3):
        src_w.send(pkt)
    d.ingest(now=1.0)
    assert [t for t, _ in d.pending] == pytest.approx([1.011, 1.012, 1.013])
    assert (d.packets_in, d.super_packets) == (3, 0)


def test_a_super_packet_that_cannot_be_split_is_counted_per_segment(
    pipes: tuple[socket.socket, ...],
) -> None:
    src_w, src_r, dst_w, _ = pipes
    d = _direction(src_r, dst_w, loss=1.0)
    ip = _ipv6(8 + 32 + 3000, 0) + b"\x06" + b"\0" * 7 + _tcp_header(1, 0x10) + b"\0" * 3000
    src_w.send(_vnet(gso.GSO_TCPV6, 80, MSS, 48, 16) + ip)
    d.ingest(now=0.0)
    assert (d.packets_in, d.lost, len(d.pending), d.split) == (3, 3, 0, 0)
