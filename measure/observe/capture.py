"""TCP flows of a capture file (pcap or pcapng), read streaming.

scapy's raw readers (RawPcapReader, which hands pcapng files to RawPcapNgReader) read the
file record by record; the link, IP and TCP headers are decoded here with `struct` (a full
scapy dissection of every packet would take minutes for a 1 GB capture). A capture cut to
the headers (`tcpdump -s 128`) is enough: payload lengths come from the IP header.

For each direction of each flow the reader keeps what a wizard reads from Wireshark's TCP
graphs: the SYN's options (MSS, window scale, SACK, timestamps), the window the receiver
offers (scaled when both SYNs agreed), bytes in flight at each send, sends into a full
window, zero windows, retransmissions and loss episodes, RTT from data to the ACK that
covers it (Karn's rule), and the throughput over time.

Why one module of this size: the link, IP and TCP decoders and the per-flow accumulation are
one streaming pass over a file of any size; they share the record loop, the hot path of a 1
GB capture.
"""

from __future__ import annotations

import bisect
import logging
import struct
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from tcpwizard.measure.engine.loaded_rtt import peak_mbps, percentile
from tcpwizard.measure.observe.synopts import parse_options

LINK_ETHERNET = 1
LINK_RAW = (12, 101)
LINK_SLL = 113
LINK_SLL2 = 276
LINK_IPV4 = 228
LINK_IPV6 = 229
ETH_IPV4, ETH_IPV6, ETH_VLAN = 0x0800, 0x86DD, (0x8100, 0x88A8)
MAX_SAMPLES = 100_000  # RTT and in-flight samples kept per direction (evenly thinned)
SERIES_STEP_S = 0.05  # throughput series: one point per 50 ms of capture time


class CaptureError(ValueError):
    """The file is not a capture this reader understands, or it is cut short."""


@dataclass(frozen=True)
class SynOptions:
    mss: int | None
    wscale: int | None
    sack: bool
    timestamps: bool
    window: int  # the SYN's own (never scaled) window
    # The longest run of NOP options: more than two marks an option a device overwrote
    # (measure/observe/synopts.py).
    nops: int = 0
    # A SYN-ACK: it may carry window scaling or SACK only where the SYN offered them
    # (RFC 7323 section 1.3, RFC 2018 section 2), so its lack of one the SYN lacked says
    # nothing of the answering host.
    answer: bool = False


@dataclass(frozen=True)
class FlowDirection:
    """One direction of a flow: `sender` sends data to `receiver`."""

    sender: str
    sender_port: int
    receiver: str
    receiver_port: int
    handshake: bool  # both SYNs were captured (window scale known)
    sender_syn: SynOptions | None
    receiver_syn: SynOptions | None
    scaling: bool | None  # both SYNs carried the option; None: no handshake seen
    bytes: int  # sequence space covered (new data)
    data_packets: int
    retransmits: int
    retransmitted_bytes: int
    loss_episodes: int
    late_loss_episodes: int  # in the second half of the transfer
    first_t: float
    last_t: float
    rate_mbps: float  # new data over the data's time span
    steady_mbps: float  # delivered bytes over the second half, over its time
    rtt_min_ms: float | None
    rtt_p50_ms: float | None  # second half
    rtt_samples: int
    mss: int
    max_window: int  # the largest window the receiver offered (scaled as we know)
    window_p50: int  # offered window at the median send (second half)
    inflight_p50: int  # bytes in flight at the median send (second half)
    inflight_max: int
    window_full_share: float  # rounds (about an RTT each) in which the window was full
    zero_windows: int  # times the receiver's window closed to zero
    zero_window_s: float
    idle_share: float  # share of the time with nothing in flight and the window open
    # The highest rate held over a quarter second (a policer's bucket let it pass at the
    # line rate) and the 90th percentile of the RTT in the second half (under load).
    peak_mbps: float = 0.0
    rtt_p90_ms: float | None = None
    # Where the capture was taken: the share of the round trip between the capture point
    # and the receiver (1 at the sender, 0 at the receiver; None without timestamps).
    downstream_share: float | None = None
    # Of the bytes acknowledged, the share acknowledged without the receiver's right edge
    # (ack + window) moving: data that arrived and stayed unread.
    edge_still_share: float = 0.0
    # Of the bytes acknowledged, the share whose ACK the receiver held back: in-order ACKs
    # covering at least HELD_SEGMENTS segments that passed the capture point over at least
    # HELD_SPAN_S (see _held).
    held_ack_share: float = 0.0

    @property
    def seconds(self) -> float:
        return max(0.0, self.last_t - self.first_t)


@dataclass(frozen=True)
class CaptureSummary:
    path: str
    packets: int
    tcp_packets: int
    skipped: int  # not IP/TCP, or too short to read
    link_types: tuple[int, ...]
    seconds: float
    directions: tuple[FlowDirection, ...]  # busiest first


# ---------------------------------------------------------------------------- reading


def pcap_records(path: str) -> Iterator[tuple[float, int, bytes, int]]:
    """(time, link type, bytes, original length) of every record, streaming."""
    from scapy.error import Scapy_Exception
    from scapy.utils import RawPcapReader

    logging.getLogger("scapy.runtime").setLevel(logging.ERROR)
    try:
        reader = RawPcapReader(path)
    except (Scapy_Exception, OSError, EOFError, ValueError) as exc:
        raise CaptureError(f"{path}: not a pcap or pcapng capture ({exc})") from None
    link = getattr(reader, "linktype", LINK_ETHERNET)
    try:
        while True:
            try:
                data, meta_ = reader._read_packet()
                meta: Any = meta_
            except EOFError:
                return
            if hasattr(meta, "sec"):
                t = meta.sec + meta.usec / (1e9 if getattr(reader, "nano", False) else 1e6)
                lt, caplen = link, meta.caplen
            else:  # pcapng
                lt = meta.linktype
                t = ((meta.tshigh << 32) | meta.tslow) / (meta.tsresol or 1_000_000)
                caplen = len(data)
            if len(data) < min(caplen, 65535):
                raise CaptureError(f"{path}: the file is cut short in a packet record")
            yield t, lt, data, meta.wirelen
    except (Scapy_Exception, OSError, struct.error) as exc:
        raise CaptureError(f"{path}: unreadable capture ({exc})") from None
    finally:
        reader.close()


def ip_offset(link: int, data: bytes) -> int | None:
    """Where the IP header starts, for the link types tcpdump writes."""
    if link in LINK_RAW or link in (LINK_IPV4, LINK_IPV6):
        return 0
    if link == LINK_ETHERNET:
        off, proto = 14, int.from_bytes(data[12:14], "big") if len(data) >= 14 else 0
        while proto in ETH_VLAN and len(data) >= off + 4:
            proto = int.from_bytes(data[off + 2 : off + 4], "big")
            off += 4
        return off if proto in (ETH_IPV4, ETH_IPV6) else None
    if link == LINK_SLL:
        return 16
    if link == LINK_SLL2:
        return 20
    return None


@dataclass(frozen=True)
class Segment:
    t: float
    src: str
    sport: int
    dst: str
    dport: int
    seq: int
    ack: int
    flags: int
    window: int
    payload: int
    options: bytes


SYN, FIN, RST, ACK = 0x02, 0x01, 0x04, 0x10


def _addr(raw: bytes) -> str:
    import ipaddress

    return str(ipaddress.ip_address(raw))


def parse_segment(t: float, link: int, data: bytes) -> Segment | None:
    """The TCP segment in one record, or None (not IP/TCP, a fragment, too short)."""
    off = ip_offset(link, data)
    if off is None or len(data) < off + 20:
        return None
    version = data[off] >> 4
    if version == 4:
        ihl = (data[off] & 0x0F) * 4
        if data[off + 9] != 6 or int.from_bytes(data[off + 6 : off + 8], "big") & 0x1FFF:
            return None
        total = int.from_bytes(data[off + 2 : off + 4], "big")
        src, dst = data[off + 12 : off + 16], data[off + 16 : off + 20]
        tcp = off + ihl
        ip_payload = total - ihl
    elif version == 6:
        if len(data) < off + 40 or data[off + 6] != 6:
            return None  # extension headers before TCP are not followed
        ip_payload = int.from_bytes(data[off + 4 : off + 6], "big")
        src, dst = data[off + 8 : off + 24], data[off + 24 : off + 40]
        tcp = off + 40
    else:
        return None
    if len(data) < tcp + 20:
        return None
    sport, dport, seq, ack, offres, flags, window = struct.unpack_from("!HHIIBBH", data, tcp)
    hlen = (offres >> 4) * 4
    options = data[tcp + 20 : tcp + hlen]
    return Segment(
        t,
        _addr(src),
        sport,
        _addr(dst),
        dport,
        seq,
        ack,
        flags,
        window,
        max(0, ip_payload - hlen),
        options,
    )


def syn_options(seg: Segment) -> SynOptions:
    """A SYN's options as the kernel parses them (a malformed or cut-short option ends the
    walk, as in tcp_parse_options), with the SYN's own window."""
    o = parse_options(seg.options)
    answer = bool(seg.flags & ACK)
    return SynOptions(o.mss, o.wscale, o.sack_permitted, o.timestamps, seg.window, o.nops, answer)


# ---------------------------------------------------------------------------- flows


def unwrap_seq(prev: int, raw: int) -> int:
    """A 32-bit sequence number as the 64-bit value closest to `prev`."""
    cand = (prev & ~0xFFFFFFFF) | raw
    if cand - prev > 1 << 31:
        cand -= 1 << 32
    elif prev - cand > 1 << 31:
        cand += 1 << 32
    return cand


def _thin(values: list[tuple[float, int]]) -> None:
    if len(values) > MAX_SAMPLES:
        del values[::2]


@dataclass
class _Half:
    """Mutable state of one direction while the file is read."""

    src: str
    sport: int
    dst: str
    dport: int
    syn: SynOptions | None = None
    base: int | None = None
    snd_max: int = 0
    snd_una: int = 0
    data_packets: int = 0
    retransmits: int = 0
    retrans_bytes: int = 0
    retrans_high: int = 0
    loss_times: list[float] = field(default_factory=list)
    pending: deque[tuple[int, float]] = field(default_factory=deque)
    rtts: list[tuple[float, int]] = field(default_factory=list)  # (t, µs)
    sends: list[tuple[float, int]] = field(default_factory=list)  # (t, in flight)
    windows: list[tuple[float, int]] = field(default_factory=list)  # (t, offered at send)
    # Rounds (about one RTT each) with sends, and those in which the window was full.
    rounds: int = 0
    full_rounds: int = 0
    round_start: float | None = None
    round_full: bool = False
    rtt_min_us: int = 0
    first_t: float | None = None
    last_t: float = 0.0
    series: list[tuple[float, int]] = field(default_factory=list)  # (t, bytes sent)
    # (t, bytes the receiver acknowledged): delivered bytes, which the bottleneck bounds; the
    # sent series runs above the line rate while slow start fills a queue.
    acked: list[tuple[float, int]] = field(default_factory=list)
    delivered: int = 0  # acknowledged plus selectively acknowledged bytes
    sacked: list[tuple[int, int]] = field(default_factory=list)  # merged blocks above snd_una
    # The receiver's right edge (ack + window offered) and how much of the acknowledged data
    # it acknowledged without moving that edge (its application left the data unread).
    right_edge: int = 0
    edges: deque[tuple[float, int]] = field(default_factory=deque)  # (t, new right edge)
    acked_total: int = 0
    acked_edge_still: int = 0
    acked_held: int = 0
    sacking: bool = False  # the receiver's last ACK carried SACK blocks (a hole was open)
    # TSvals of the receiver's ACKs as they passed the capture point, and the time until the
    # sender's data echoed each: the round trip on the sender's side of the capture point.
    ack_tsvals: dict[int, float] = field(default_factory=dict)
    echoes: list[tuple[float, int]] = field(default_factory=list)  # (t, µs)
    echo_min_us: int = 0
    # Silences in the data longer than a round trip (past the round trip): the sender had
    # nothing to send, as seen from any capture point.
    gap_idle_s: float = 0.0
    mss: int = 0
    # What the other side (the receiver of this direction) says in its ACKs.
    rwin_raw: int | None = None
    max_window: int = 0
    zero_windows: int = 0
    zero_since: float | None = None
    zero_s: float = 0.0
    idle_since: float | None = None
    idle_s: float = 0.0

    def rel(self, seq: int) -> int:
        base = self.base or 0
        return unwrap_seq(self.snd_max, (seq - base) & 0xFFFFFFFF)


class _Flow:
    def __init__(self, a: tuple[str, int], b: tuple[str, int]) -> None:
        self.halves = {
            a: _Half(a[0], a[1], b[0], b[1]),
            b: _Half(b[0], b[1], a[0], a[1]),
        }

    def scale(self, receiver: _Half, sender: _Half) -> int:
        """The receiver's window shift, when both SYNs agreed to scaling."""
        if receiver.syn is None or sender.syn is None:
            return 0
        if receiver.syn.wscale is None or sender.syn.wscale is None:
            return 0
        return receiver.syn.wscale


def _on_segment(flow: _Flow, seg: Segment) -> None:
    me = flow.halves[(seg.src, seg.sport)]
    other = flow.halves[(seg.dst, seg.dport)]
    if seg.flags & SYN:
        me.syn = syn_options(seg)
        me.base = (seg.seq + 1) & 0xFFFFFFFF
        me.snd_max = me.snd_una = 0
        return
    ts = timestamps(seg.options)  # (TSval, TSecr): read once, used by both roles below
    # --- as the receiver of the other direction: its window and ACKs
    if seg.flags & ACK and other.base is not None:
        ack = unwrap_seq(other.snd_una, (seg.ack - other.base) & 0xFFFFFFFF)
        window = seg.window << flow.scale(me, other)
        other.rwin_raw = window
        other.max_window = max(other.max_window, window)
        if window == 0 and not seg.flags & (FIN | RST):
            if other.zero_since is None:
                other.zero_windows += 1
                other.zero_since = seg.t
        elif other.zero_since is not None:
            other.zero_s += seg.t - other.zero_since
            other.zero_since = None
        if ack > other.snd_una or (seg.options and not seg.flags & SYN):
            # Delivered = acknowledged + selectively acknowledged (the kernel's own count):
            # without the SACKed bytes, the cumulative ACK that closes a recovery's hole
            # credits all of them to one instant (135 Mbit/s over 0.25 s on a 100 Mbit/s lab
            # path).
            other.delivered = max(other.delivered, _sacked(other, ack, seg.options))
            if not other.acked or seg.t - other.acked[-1][0] >= SERIES_STEP_S:
                other.acked.append((seg.t, other.delivered))
        right = ack + window
        if ack > other.snd_una:
            other.acked_total += ack - other.snd_una
            if right <= other.right_edge:
                other.acked_edge_still += ack - other.snd_una
        if right > other.right_edge:
            other.edges.append((seg.t, right))
            if len(other.edges) > 4 * MAX_SAMPLES:
                other.edges.popleft()
        other.right_edge = max(other.right_edge, right)
        if ts is not None:
            other.ack_tsvals.setdefault(ts[0], seg.t)
            if len(other.ack_tsvals) > MAX_SAMPLES:
                del other.ack_tsvals[next(iter(other.ack_tsvals))]
        blocks = bool(seg.options) and bool(sack_blocks(seg.options))
        if ack > other.snd_una:
            first_t = other.pending[0][1] if other.pending else None
            held = _held(other, ack, blocks)
            other.snd_una = ack
            sample = None
            while other.pending and other.pending[0][0] <= ack:
                sample = other.pending.popleft()
            if held and sample and first_t is not None and sample[1] - first_t >= HELD_SPAN_S:
                other.acked_held += held
            if sample is not None and sample[0] > other.retrans_high:
                rtt = round((seg.t - sample[1]) * 1e6)
                other.rtts.append((seg.t, rtt))
                other.rtt_min_us = min(other.rtt_min_us or rtt, rtt)
                _thin(other.rtts)
            if other.snd_una >= other.snd_max and other.idle_since is None and window > 0:
                other.idle_since = seg.t
        other.sacking = blocks
    # --- as the sender of its own data
    if seg.payload <= 0:
        return
    if me.base is None:  # no SYN captured: sequence numbers start at the first data
        me.base = seg.seq
        me.snd_max = me.snd_una = 0
    start = me.rel(seg.seq)
    end = start + seg.payload
    if ts is not None and (sent := me.ack_tsvals.pop(ts[1], None)):
        echo = round((seg.t - sent) * 1e6)
        me.echoes.append((seg.t, echo))
        me.echo_min_us = min(me.echo_min_us or echo, echo)
        _thin(me.echoes)
    if me.first_t is not None:
        round_trip = (max(me.rtt_min_us, me.echo_min_us) or 100_000) / 1e6
        me.gap_idle_s += max(0.0, seg.t - me.last_t - round_trip)
    me.data_packets += 1
    me.mss = max(me.mss, seg.payload)
    me.first_t = seg.t if me.first_t is None else me.first_t
    me.last_t = seg.t
    if me.idle_since is not None:
        me.idle_s += seg.t - me.idle_since
        me.idle_since = None
    if end <= me.snd_max:
        me.retransmits += 1
        me.retrans_bytes += seg.payload
        me.retrans_high = me.snd_max
        me.loss_times.append(seg.t)
        return
    me.snd_max = end
    me.pending.append((end, seg.t))
    if len(me.pending) > 4 * MAX_SAMPLES:
        me.pending.popleft()
    inflight = me.snd_max - me.snd_una
    length = max(me.rtt_min_us, 10_000) / 1e6 if me.rtt_min_us else 0.1
    if me.round_start is None or seg.t - me.round_start >= length:
        me.rounds += 1
        me.full_rounds += me.round_full
        me.round_start, me.round_full = seg.t, False
    if me.rwin_raw is not None:
        me.windows.append((seg.t, me.rwin_raw))
        _thin(me.windows)
        # Data that reaches the right edge the sender knew filled the window offered; at the
        # sender's side this is in flight + 2 MSS >= the window, and it holds wherever the
        # capture was taken (at the receiver, in flight there is only its ACK delay).
        if end + 2 * me.mss >= _edge_known(me, seg.t):
            me.round_full = True
    me.sends.append((seg.t, inflight))
    _thin(me.sends)
    if not me.series or seg.t - me.series[-1][0] >= SERIES_STEP_S:
        me.series.append((seg.t, me.snd_max))


MAX_SACK_RANGES = 256  # a scoreboard this fragmented is kept to its newest ranges


def _option(options: bytes, want: int) -> bytes | None:
    """The body of the first option of kind `want`, None without one (or a malformed walk)."""
    i = 0
    while i < len(options):
        kind = options[i]
        if kind == 0:
            return None
        if kind == 1:
            i += 1
            continue
        if i + 1 >= len(options) or options[i + 1] < 2:
            return None
        length = options[i + 1]
        if kind == want:
            return options[i + 2 : i + length]
        i += length
    return None


def sack_blocks(options: bytes) -> list[tuple[int, int]]:
    """The SACK blocks (left, right edge, raw sequence numbers) of a segment's options."""
    body = _option(options, 5) if options else None
    if not body:
        return []
    return [struct.unpack_from("!II", body, k) for k in range(0, len(body) - 7, 8)]


def timestamps(options: bytes) -> tuple[int, int] | None:
    """(TSval, TSecr) of a segment's timestamps option, None without it."""
    body = _option(options, 8) if options else None
    if body is None or len(body) != 8:
        return None
    val, ecr = struct.unpack("!II", body)
    return val, ecr


def _sacked(h: _Half, ack: int, options: bytes) -> int:
    """Update h's SACK scoreboard with an ACK (`ack` relative, unwrapped); the bytes the
    receiver holds: everything below `ack` and every SACKed range above it."""
    blocks = sack_blocks(options)
    if not blocks and not h.sacked:
        return ack  # no hole open: most ACKs, read without a scoreboard
    base = h.base or 0
    ranges = [(max(lo, ack), hi) for lo, hi in h.sacked if hi > ack]
    for left, right in blocks:
        lo = unwrap_seq(ack, (left - base) & 0xFFFFFFFF)
        hi = unwrap_seq(ack, (right - base) & 0xFFFFFFFF)
        if ack < hi <= h.snd_max and lo < hi:
            ranges.append((max(lo, ack), hi))
    ranges.sort()
    merged: list[tuple[int, int]] = []
    for lo, hi in ranges:
        if merged and lo <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], hi))
        else:
            merged.append((lo, hi))
    h.sacked = merged[-MAX_SACK_RANGES:]
    return ack + sum(hi - lo for lo, hi in h.sacked)


def _median(values: list[int] | list[float]) -> float | None:
    if not values:
        return None
    s = sorted(values)
    return float(s[len(s) // 2])


def _second_half(values: list[tuple[float, int]], mid: float) -> list[int]:
    i = bisect.bisect_left(values, (mid, -1))
    rest = [v for _, v in values[i:]]
    return rest or [v for _, v in values]


def _steady_mbps(series: list[tuple[float, int]]) -> float:
    """The rate once up to speed: bytes over the second half of the series, over its time
    (as measure/engine/rates.py steady_mbps does for a transfer's samples)."""
    if len(series) < 4:
        return 0.0
    mid = (series[0][0] + series[-1][0]) / 2
    i = bisect.bisect_left(series, (mid, -1))
    (t0, b0), (t1, b1) = series[min(i, len(series) - 2)], series[-1]
    return max(0, b1 - b0) * 8 / (t1 - t0) / 1e6 if t1 > t0 else 0.0


def _episodes(times: list[float], gap: float) -> list[float]:
    """Loss episodes: retransmissions closer than `gap` (about an RTT) are one."""
    out: list[float] = []
    for t in times:
        if not out or t - out[-1] > gap:
            out.append(t)
    return out


def _path_rtts(h: _Half) -> tuple[list[tuple[float, int]], float | None]:
    """The path's round trips (t, µs) and the share of the round trip that lies between the
    capture point and the receiver (1: captured at the sender, 0: at the receiver; None
    without timestamps). Data-to-ACK times cover the receiver's side of the capture point,
    timestamp echoes (the receiver's TSval, then the sender's data echoing it) the
    sender's side; the side with the longer minimum carries the path's delay and its
    queue, the other side's minimum is added to it. At the receiver, data-to-ACK is only
    its ACK delay: read alone it shows no path and a "queue" of delayed ACKs."""
    if not h.rtts:
        return [], None
    down_min = min(v for _, v in h.rtts)
    if not h.echoes:
        return h.rtts, None
    up_min = min(v for _, v in h.echoes)
    share = down_min / (down_min + up_min) if down_min + up_min > 0 else None
    if up_min > down_min:
        return [(t, v + down_min) for t, v in h.echoes], share
    return [(t, v + up_min) for t, v in h.rtts], share


# A Linux receiver acknowledges every second full segment at once only when its reader has
# made room (the window would not shrink: tcp_input.c __tcp_ack_snd_check); otherwise the
# delayed-ACK timer (40-200 ms) or the next read sends the ACK. In-order data of more than
# two such pairs under one ACK, arriving over longer than a NIC's interrupt coalescing lets
# GRO merge segments (rx-usecs, under 1 ms) by an order of magnitude, waited for the reader.
# Healthy 100 Mbit/s x 50 ms lab captures: no such ACK (the longest span 3 ms); a reader
# under a CPU quota at 200 Mbit/s x 250 ms: 88-94 % of the data.
HELD_SEGMENTS = 4
HELD_SPAN_S = 0.010


def _held(h: _Half, ack: int, blocks: bool) -> int:
    """The bytes this ACK newly acknowledges when it may be a held one (in order, no hole
    open before or now, at least HELD_SEGMENTS segments), else 0; the caller checks the
    span the data took to pass."""
    n = ack - h.snd_una
    if h.sacking or blocks or n < HELD_SEGMENTS * max(h.mss, 1):
        return 0
    return n


def _edge_known(h: _Half, now: float) -> int:
    """The receiver's right edge as the sender knew it when it sent what passes now: the
    latest advertised at least the sender's side of the round trip (the echo time) ago.
    At the sender that is the latest; at the receiver, the one a round trip back."""
    cutoff = now - h.echo_min_us / 1e6
    edges = h.edges
    while len(edges) >= 2 and edges[1][0] <= cutoff:
        edges.popleft()
    if not edges or edges[0][0] > cutoff:
        return h.right_edge if h.echo_min_us == 0 else 1 << 62
    return edges[0][1]


def _direction(flow: _Flow, h: _Half, end_t: float) -> FlowDirection:
    rcv = flow.halves[(h.dst, h.dport)]
    first = h.first_t or 0.0
    span = max(1e-9, h.last_t - first)
    mid = first + span / 2
    rtts, downstream = _path_rtts(h)
    rtt_us = [v for _, v in rtts]
    rtt_min = min(rtt_us) / 1e3 if rtt_us else None
    late_rtts = _second_half(rtts, mid) if rtts else []
    rtt_p50 = _median(late_rtts)
    gap = (rtt_min or 100.0) / 1e3
    episodes = _episodes(h.loss_times, gap)
    zero_s = h.zero_s + (end_t - h.zero_since if h.zero_since is not None else 0.0)
    scaling = None
    if h.syn is not None and rcv.syn is not None:
        scaling = rcv.syn.wscale is not None and h.syn.wscale is not None
    # Rates from what the receiver acknowledged where the capture holds its ACKs (a capture
    # of one direction only has what was sent).
    delivered = h.acked if len(h.acked) >= 4 else h.series
    inflight = _second_half(h.sends, mid) if h.sends else []
    windows = _second_half(h.windows, mid) if h.windows else []
    return FlowDirection(
        sender=h.src,
        sender_port=h.sport,
        receiver=h.dst,
        receiver_port=h.dport,
        handshake=h.syn is not None and rcv.syn is not None,
        sender_syn=h.syn,
        receiver_syn=rcv.syn,
        scaling=scaling,
        bytes=h.snd_max,
        data_packets=h.data_packets,
        retransmits=h.retransmits,
        retransmitted_bytes=h.retrans_bytes,
        loss_episodes=len(episodes),
        late_loss_episodes=sum(1 for t in episodes if t >= mid),
        first_t=first,
        last_t=h.last_t,
        rate_mbps=h.snd_max * 8 / span / 1e6,
        steady_mbps=_steady_mbps(delivered),
        rtt_min_ms=rtt_min,
        rtt_p50_ms=None if rtt_p50 is None else rtt_p50 / 1e3,
        rtt_samples=len(rtt_us),
        mss=(h.syn.mss if h.syn and h.syn.mss else 0) or h.mss or 1448,
        max_window=h.max_window,
        window_p50=int(_median(windows) or 0),
        inflight_p50=int(_median(inflight) or 0),
        inflight_max=max(inflight, default=0),
        window_full_share=(h.full_rounds + h.round_full) / h.rounds if h.rounds else 0.0,
        zero_windows=h.zero_windows,
        zero_window_s=zero_s,
        # At the receiver's side of the path every ACK leaves nothing in flight there: the
        # sender's idle time is then read from silences in its data.
        idle_share=min(
            1.0, (h.idle_s if downstream is None or downstream >= 0.5 else h.gap_idle_s) / span
        ),
        peak_mbps=peak_mbps(delivered),
        rtt_p90_ms=percentile(late_rtts, 0.9) / 1e3 if late_rtts else None,
        downstream_share=downstream,
        edge_still_share=h.acked_edge_still / h.acked_total if h.acked_total else 0.0,
        held_ack_share=h.acked_held / h.acked_total if h.acked_total else 0.0,
    )


def read_capture(path: str, min_bytes: int = 64 * 1024) -> CaptureSummary:
    """Every TCP flow direction of the capture that moved at least `min_bytes`."""
    flows: dict[tuple[tuple[str, int], tuple[str, int]], _Flow] = {}
    packets = tcp = skipped = 0
    links: set[int] = set()
    first_t = last_t = None
    for t, link, data, _wirelen in pcap_records(path):
        packets += 1
        links.add(link)
        first_t = t if first_t is None else first_t
        last_t = t
        seg = parse_segment(t, link, data)
        if seg is None:
            skipped += 1
            continue
        tcp += 1
        a, b = (seg.src, seg.sport), (seg.dst, seg.dport)
        key = (a, b) if a <= b else (b, a)
        flow = flows.get(key)
        if flow is None:
            flow = flows[key] = _Flow(a, b)
        _on_segment(flow, seg)
    if packets == 0:
        raise CaptureError(f"{path}: the capture holds no packets")
    end = last_t or 0.0
    dirs = [
        _direction(flow, h, end)
        for flow in flows.values()
        for h in flow.halves.values()
        if h.snd_max >= min_bytes
    ]
    dirs.sort(key=lambda d: -d.bytes)
    return CaptureSummary(
        path, packets, tcp, skipped, tuple(sorted(links)), end - (first_t or 0.0), tuple(dirs)
    )
