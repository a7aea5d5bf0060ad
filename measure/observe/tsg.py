"""Time-sequence graphs (tcptrace/xplot's picture) from a packet capture, and a capture of
our own test transfers with tcpdump.

For each TCP flow that carried data, the series a time-sequence graph draws, relative to the
flow's first sequence number and the capture's first packet:

* data: each segment sent, (t, first byte, last byte + 1);
* retransmissions: segments whose bytes had been sent before;
* acks: the cumulative ACK the receiver sent back, (t, ack);
* window: the receive window's right edge, (t, ack + window << scale) - the sender may not
  send beyond it, so data pressed against this line means the receiver's window limits.

Very long flows are thinned for drawing (at most MAX_POINTS per series, keeping each time
bin's highest sequence number), so a 1 GB capture draws as fast as a small one.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import struct
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from tcpwizard.exitcodes import PermissionRequired, Unavailable
from tcpwizard.measure.observe.capture import (
    ACK,
    SYN,
    ip_offset,
    parse_segment,
    pcap_records,
    syn_options,
    unwrap_seq,
)

MAX_POINTS = 4_000  # per series: ~4 per pixel column of the 1000-pixel-wide graph
MIN_FLOW_BYTES = 64 * 1024


@dataclass(frozen=True)
class TsgSeries:
    flow: str  # "src:port > dst:port" (the data's direction)
    src: str
    dst: str
    t0: float  # capture time of the flow's first packet (s since the epoch)
    data: tuple[tuple[float, int, int], ...]
    retransmits: tuple[tuple[float, int, int], ...]
    acks: tuple[tuple[float, int], ...]
    window: tuple[tuple[float, int], ...]
    bytes: int
    duration_s: float
    window_scale: int | None  # None: no SYN captured, windows taken unscaled
    thinned: bool = False


@dataclass
class _Dir:
    key: tuple[bytes, int, bytes, int]
    t0: float
    isn: int | None = None
    last: int = 0
    high: int = 0  # highest sequence end sent
    wscale: int | None = None  # this side's own scale (from its SYN): applies to its windows
    data: list[tuple[float, int, int]] = field(default_factory=list)
    retrans: list[tuple[float, int, int]] = field(default_factory=list)
    acks: list[tuple[float, int]] = field(default_factory=list)  # acks *received* from peer
    window: list[tuple[float, int]] = field(default_factory=list)
    nbytes: int = 0


def _rel(d: _Dir, raw: int) -> int:
    if d.isn is None:
        d.isn = raw
        d.last = raw
    d.last = unwrap_seq(d.last, raw)
    return d.last - d.isn


_PCAP_MAGIC = {
    b"\xd4\xc3\xb2\xa1": ("<", 1e-6),
    b"\xa1\xb2\xc3\xd4": (">", 1e-6),
    b"\x4d\x3c\xb2\xa1": ("<", 1e-9),
    b"\xa1\xb2\x3c\x4d": (">", 1e-9),
}


def _classic_pcap(path: str) -> Iterator[tuple[float, int, bytes, int]]:
    """Records of a classic pcap file, read in large blocks with struct (tcpdump -w writes
    this format): several times faster than a general reader on a 1 GB capture."""
    with open(path, "rb", buffering=1 << 20) as f:
        head = f.read(24)
        endian, unit = _PCAP_MAGIC[head[:4]]
        link = struct.unpack(endian + "I", head[20:24])[0] & 0x0FFFFFFF
        rec = struct.Struct(endian + "IIII")
        while True:
            h = f.read(16)
            if len(h) < 16:
                return
            sec, frac, caplen, wire = rec.unpack(h)
            data = f.read(caplen)
            if len(data) < caplen:
                return  # cut short: what was read stands
            yield sec + frac * unit, link, data, wire


def _read(path: str) -> Iterator[tuple[float, int, bytes, int]]:
    with open(path, "rb") as f:
        magic = f.read(4)
    return _classic_pcap(path) if magic in _PCAP_MAGIC else pcap_records(path)


def _fast_segment(
    t: float, link: int, data: bytes
) -> tuple[tuple[bytes, int, bytes, int], int, int, int, int, int] | None:
    """(key, seq, ack, flags, window, payload) of an IPv4/IPv6 TCP segment, without building
    address strings (the hot loop of a 1 GB capture); SYNs go the full way."""
    off = ip_offset(link, data)
    if off is None or len(data) < off + 40:
        return None
    v = data[off] >> 4
    if v == 4:
        if data[off + 9] != 6:
            return None
        ihl = (data[off] & 0x0F) * 4
        total = (data[off + 2] << 8) | data[off + 3]
        src, dst, tcp, ip_payload = (
            data[off + 12 : off + 16],
            data[off + 16 : off + 20],
            off + ihl,
            total - ihl,
        )
    elif v == 6:
        if data[off + 6] != 6 or len(data) < off + 60:
            return None
        ip_payload = (data[off + 4] << 8) | data[off + 5]
        src, dst, tcp = data[off + 8 : off + 24], data[off + 24 : off + 40], off + 40
    else:
        return None
    if len(data) < tcp + 20:
        return None
    sport, dport, seq, ack, offres, flags, window = _TCP.unpack_from(data, tcp)
    return (src, sport, dst, dport), seq, ack, flags, window, ip_payload - (offres >> 4) * 4


_TCP = struct.Struct("!HHIIBBH")


def _ip(raw: bytes) -> str:
    return socket.inet_ntop(socket.AF_INET6 if len(raw) == 16 else socket.AF_INET, raw)


def series_from_capture(path: str, min_bytes: int = MIN_FLOW_BYTES) -> list[TsgSeries]:
    """Every flow direction of the capture that carried at least min_bytes, largest first."""
    dirs: dict[tuple[bytes, int, bytes, int], _Dir] = {}
    for t, link, raw, _wire in _read(path):
        fast = _fast_segment(t, link, raw)
        if fast is None:
            continue
        key, seq, ack_no, flags, window, payload = fast
        d = dirs.get(key)
        if d is None:
            d = dirs[key] = _Dir(key, t)
        if flags & SYN:
            seg = parse_segment(t, link, raw)
            d.wscale = (syn_options(seg).wscale if seg else None) or 0
            d.isn = seq + 1
            d.last = seq + 1
        elif payload > 0:
            start = _rel(d, seq)
            end = start + payload
            if end <= d.high:
                d.retrans.append((t, start, end))
            else:
                d.high = end
            d.data.append((t, start, end))
            d.nbytes += payload
        if flags & ACK and not flags & SYN:  # a SYN's window is never scaled
            # This segment acknowledges the reverse direction's data: record it there.
            rev = dirs.get((key[2], key[3], key[0], key[1]))
            if rev is not None and rev.isn is not None:
                ack = unwrap_seq(rev.isn, ack_no) - rev.isn
                scale = d.wscale or 0
                rev.acks.append((t, ack))
                rev.window.append((t, ack + (window << scale)))
    out = []
    for d in dirs.values():
        if d.nbytes < min_bytes:
            continue
        rev = dirs.get((d.key[2], d.key[3], d.key[0], d.key[1]))
        t0 = min(d.t0, rev.t0) if rev else d.t0
        thinned = len(d.data) > MAX_POINTS or len(d.acks) > MAX_POINTS
        end_t = max((x[0] for x in (d.data[-1:] + d.retrans[-1:])), default=t0)
        src, dst = _ip(d.key[0]), _ip(d.key[2])
        out.append(
            TsgSeries(
                flow=f"{src}:{d.key[1]} > {dst}:{d.key[3]}",
                src=src,
                dst=dst,
                t0=t0,
                data=tuple(_shift3(_thin3(d.data), t0)),
                retransmits=tuple(_shift3(d.retrans[:MAX_POINTS], t0)),
                acks=tuple(_shift2(_thin2(d.acks), t0)),
                window=tuple(_shift2(_thin2(d.window), t0)),
                bytes=d.nbytes,
                duration_s=end_t - t0,
                window_scale=rev.wscale if rev else None,
                thinned=thinned,
            )
        )
    return sorted(out, key=lambda s: -s.bytes)


def _shift3(xs: list[tuple[float, int, int]], t0: float) -> Iterator[tuple[float, int, int]]:
    return ((t - t0, a, b) for t, a, b in xs)


def _shift2(xs: list[tuple[float, int]], t0: float) -> Iterator[tuple[float, int]]:
    return ((t - t0, a) for t, a in xs)


def _bins(n: int) -> int:
    return max(1, -(-n // MAX_POINTS))


def _thin3(xs: list[tuple[float, int, int]]) -> list[tuple[float, int, int]]:
    """Every k-th group reduced to its highest segment (the line a TSG shows)."""
    k = _bins(len(xs))
    if k == 1:
        return xs
    return [max(xs[i : i + k], key=lambda s: s[2]) for i in range(0, len(xs), k)]


def _thin2(xs: list[tuple[float, int]]) -> list[tuple[float, int]]:
    k = _bins(len(xs))
    if k == 1:
        return xs
    return [max(xs[i : i + k], key=lambda s: s[1]) for i in range(0, len(xs), k)]


# ---------------------------------------------------------------------------- capturing


class TcpdumpCapture:
    """tcpdump writing the TCP packets to/from `host` (port `port`) to `path` while the
    block runs; headers only (snaplen 128). Needs root (or CAP_NET_RAW) and tcpdump; `flag`
    is the option that asked for it, named in the errors."""

    def __init__(
        self,
        path: str,
        host: str,
        port: int | None = None,
        iface: str = "any",
        flag: str = "--plot",
    ) -> None:
        self.path = path
        self.flag = flag
        expr = ["tcp", "and", "host", host]
        if port:
            expr += ["and", "port", str(port)]
        self.argv = ["tcpdump", "-i", iface, "-n", "-s", "128", "-U", "-w", path, *expr]
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> TcpdumpCapture:
        if os.geteuid() != 0:
            raise PermissionRequired(f"{self.flag} captures the transfers with tcpdump: needs root")
        try:
            self.proc = subprocess.Popen(
                self.argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
            )
        except FileNotFoundError:
            raise Unavailable(f"{self.flag} needs tcpdump (apt-get install tcpdump)") from None
        assert self.proc.stderr is not None
        deadline = time.monotonic() + 5
        line = b""
        while b"listening on" not in line and time.monotonic() < deadline:
            line = self.proc.stderr.readline()
            if not line and self.proc.poll() is not None:
                raise Unavailable("tcpdump did not start (see: tcpdump -i any)")
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            self.proc.send_signal(signal.SIGINT)  # flushes the file
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stderr is not None:
            self.proc.stderr.close()
