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
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from tcpwizard.exitcodes import PermissionRequired, Unavailable
from tcpwizard.measure.capture import (
    ACK,
    SYN,
    _records,
    _unwrap,
    parse_segment,
    syn_options,
)

MAX_POINTS = 20_000
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
    key: tuple[str, int, str, int]
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
    d.last = _unwrap(d.last, raw)
    return d.last - d.isn


def series_from_capture(path: str, min_bytes: int = MIN_FLOW_BYTES) -> list[TsgSeries]:
    """Every flow direction of the capture that carried at least min_bytes, largest first."""
    dirs: dict[tuple[str, int, str, int], _Dir] = {}
    for t, link, raw, _wire in _records(path):
        seg = parse_segment(t, link, raw)
        if seg is None:
            continue
        key = (seg.src, seg.sport, seg.dst, seg.dport)
        d = dirs.get(key)
        if d is None:
            d = dirs[key] = _Dir(key, t)
        if seg.flags & SYN:
            d.wscale = syn_options(seg).wscale or 0
            d.isn = seg.seq + 1
            d.last = seg.seq + 1
        elif seg.payload > 0:
            start = _rel(d, seg.seq)
            end = start + seg.payload
            if end <= d.high:
                d.retrans.append((t, start, end))
            d.data.append((t, start, end))
            d.high = max(d.high, end)
            d.nbytes += seg.payload
        if seg.flags & ACK and not seg.flags & SYN:  # a SYN's window is never scaled
            # This segment acknowledges the reverse direction's data: record it there.
            rev = dirs.get((seg.dst, seg.dport, seg.src, seg.sport))
            if rev is not None and rev.isn is not None:
                ack = _unwrap(rev.isn, seg.ack) - rev.isn
                scale = d.wscale or 0
                rev.acks.append((t, ack))
                rev.window.append((t, ack + (seg.window << scale)))
    out = []
    for d in dirs.values():
        if d.nbytes < min_bytes:
            continue
        rev = dirs.get((d.key[2], d.key[3], d.key[0], d.key[1]))
        t0 = min(d.t0, rev.t0) if rev else d.t0
        thinned = len(d.data) > MAX_POINTS or len(d.acks) > MAX_POINTS
        end_t = max((x[0] for x in (d.data[-1:] + d.retrans[-1:])), default=t0)
        out.append(
            TsgSeries(
                flow=f"{d.key[0]}:{d.key[1]} > {d.key[2]}:{d.key[3]}",
                src=d.key[0],
                dst=d.key[2],
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
    block runs; headers only (snaplen 128). Needs root (or CAP_NET_RAW) and tcpdump."""

    def __init__(self, path: str, host: str, port: int | None = None, iface: str = "any") -> None:
        self.path = path
        expr = ["tcp", "and", "host", host]
        if port:
            expr += ["and", "port", str(port)]
        self.argv = ["tcpdump", "-i", iface, "-n", "-s", "128", "-U", "-w", path, *expr]
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> TcpdumpCapture:
        if os.geteuid() != 0:
            raise PermissionRequired("--plot captures the transfers with tcpdump: needs root")
        try:
            self.proc = subprocess.Popen(
                self.argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
            )
        except FileNotFoundError:
            raise Unavailable("--plot needs tcpdump (apt-get install tcpdump)") from None
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
