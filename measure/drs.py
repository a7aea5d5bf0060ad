"""Dynamic Right-Sizing in user space (Engelhart, Gardner, Feng: drsFTP, §3-4).

The receiver measures bandwidth as bytes received per interval and sends
``SBUF <timestamp> <buffer-size>`` on a DRS channel (a TCP connection beside the data
connection, same endpoints). The sender sets SO_SNDBUF to buffer-size within its limits and
echoes the line unchanged -- it keeps no per-message state, so several SBUFs may be in flight.
The receiver takes the RTT from the echoed timestamp, computes BDP = bandwidth x RTT and sets
SO_RCVBUF for 2 x BDP *before* sending the next SBUF (the new drsFTP favours throughput over
memory frugality).

Choices this implementation makes where the paper leaves room (documented in the README):
- RTT is the minimum of the recent echoes, not the last one: SBUF echoes include queueing
  and scheduling delay (the paper saw 180 ms against ping's 77 ms), and feeding that back
  would make the buffer chase its own queue.
- Bandwidth is the maximum over the last few intervals: one interval after a loss shows
  a dip, and sizing the buffer to the dip would then hold the connection down (measured
  on the lab: 35 instead of 48 Mbit/s at 50 Mbit/s x 50 ms).
- "2 x BDP" is in the kernel's units: Linux doubles every SO_RCVBUF request and reports the
  doubled size, so the request is BDP and getsockopt reads 2 x BDP.
- Startup: while the bandwidth keeps growing by a quarter per interval, our own window may
  be the limit (the measurement only shows what the window let through), so the buffer at
  least doubles per interval, up to 3 x BDP -- the slow-start case the paper's factor 2 is
  for. Three intervals without growth end the startup (as BBR's full-pipe check); growth
  of a quarter in one interval starts it again.
- Shrinking is gradual (at most a quarter per interval): data already in flight for the
  old window would otherwise be pruned by the kernel.
- The measurement interval adapts: one smoothed RTT during startup, two after, bounded to
  [25 ms, 250 ms]
  (the paper's compile-time constant is listed there as future work).
"""

from __future__ import annotations

import math
import select
import socket
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from tcpwizard.measure import buffers
from tcpwizard.measure.tcpinfo import read_tcp_info

SBUF = b"SBUF"
MAX_LINE = 128  # "SBUF <float> <int>" is far shorter; anything longer is garbage


@dataclass(frozen=True)
class DrsConfig:
    headroom: float = 2.0  # buffer memory = headroom x BDP (paper: 2x for slow start)
    interval_rtts: float = 2.0  # measurement interval in smoothed RTTs
    startup_interval_rtts: float = 1.0  # the same during startup
    min_interval_s: float = 0.025
    max_interval_s: float = 0.25
    initial_interval_s: float = 0.05  # before the first echo there is no RTT
    rtt_window: int = 64  # echoes the min-RTT filter looks at (seconds of them, like BBR)
    bw_window: int = 8  # intervals the max-bandwidth filter looks at
    min_request: int = buffers.UNTUNED_BYTES  # never below stock FTP's buffer
    max_request: int = 4 * 1024 * 1024  # the host's limit (setsockopt argument)
    startup_growth: float = 1.25  # bandwidth growth per interval that keeps startup going
    startup_flat_intervals: int = 3  # intervals without that growth that end startup
    startup_cap: float = 3.0  # startup never sizes the buffer beyond this many BDPs
    max_shrink: float = 0.75  # a new buffer is at least this share of the last one
    kernel_doubles: bool = True  # Linux stores 2x the request


@dataclass(frozen=True)
class DrsDecision:
    """What the receiver does at the end of one interval."""

    t: float
    bandwidth_bps: float
    rtt_s: float | None
    bdp_bytes: int | None
    request: int  # SO_RCVBUF argument, also the SBUF buffer-size
    message: bytes


def format_sbuf(timestamp: float, size: int) -> bytes:
    return b"SBUF %.6f %d\n" % (timestamp, size)


def parse_sbuf(line: bytes) -> tuple[float, int] | None:
    """(timestamp, buffer-size) of one SBUF line, None if it is not one."""
    parts = line.strip().split()
    if len(parts) != 3 or parts[0] != SBUF or len(line) > MAX_LINE:
        return None
    try:
        ts, size = float(parts[1]), int(parts[2])
    except ValueError:
        return None
    if not math.isfinite(ts) or size <= 0:
        return None
    return ts, size


class DrsReceiver:
    """The receiver's DRS state machine, free of sockets and clocks: the glue feeds it byte
    counts and echoed lines with timestamps, and applies the decisions it returns."""

    def __init__(self, config: DrsConfig, now: float, initial_request: int | None = None) -> None:
        self.config = config
        self.request = initial_request or config.min_request
        self._rtts: deque[float] = deque(maxlen=config.rtt_window)
        self._bws: deque[float] = deque(maxlen=config.bw_window)
        self.startup = True
        self._startup_bw = 0.0
        self._flat = 0
        self._srtt: float | None = None
        self._last_t = now
        self._last_bytes = 0
        self._prev_t = now  # one tick further back
        self._prev_bytes = 0
        self._next_t = now + config.initial_interval_s
        self.max_request = self.request
        self.last_bandwidth_bps = 0.0

    @property
    def rtt_s(self) -> float | None:
        return min(self._rtts) if self._rtts else None

    @property
    def interval_s(self) -> float:
        c = self.config
        if self._srtt is None:
            return c.initial_interval_s
        # One RTT per step while growing (like slow start), a few once settled: longer
        # intervals average out the bursts of a steady connection.
        rtts = c.startup_interval_rtts if self.startup else c.interval_rtts
        return min(c.max_interval_s, max(c.min_interval_s, rtts * self._srtt))

    def due(self, now: float) -> bool:
        return now >= self._next_t

    def next_due(self) -> float:
        return self._next_t

    def on_echo(self, line: bytes, now: float) -> float | None:
        """An SBUF came back: its RTT (seconds), or None for a line that is not ours."""
        parsed = parse_sbuf(line)
        if parsed is None:
            return None
        rtt = now - parsed[0]
        if rtt < 0:
            return None
        self._rtts.append(rtt)
        # Smoothed like TCP's SRTT (RFC 6298, alpha 1/8); it only sets the interval.
        self._srtt = rtt if self._srtt is None else 0.875 * self._srtt + 0.125 * rtt
        return rtt

    def target_request(self, bandwidth_bps: float, sustained_bps: float | None = None) -> int:
        """Take one interval's bandwidth (and the rate over the last two intervals, which
        the BDP filter uses: a burst after loss recovery fills one interval, not two);
        return the next SO_RCVBUF argument."""
        c = self.config
        if not self.startup and self._bws and bandwidth_bps >= c.startup_growth * max(self._bws):
            # Growing fast again (a stall that ended startup early, or more capacity):
            # back to doubling, or a window-limited connection would creep at 1.2x.
            self.startup, self._flat, self._startup_bw = True, 0, max(self._bws)
        self._bws.append(bandwidth_bps if sustained_bps is None else sustained_bps)
        rtt = self.rtt_s
        if rtt is None:
            return self.request  # nothing to size by before the first echo
        bdp = max(self._bws) / 8.0 * rtt
        memory = c.headroom * bdp
        current = self._memory_of(self.request)
        if self.startup:
            if bandwidth_bps >= c.startup_growth * self._startup_bw:
                self._startup_bw = bandwidth_bps
                self._flat = 0
            else:
                self._flat += 1
                self.startup = self._flat < c.startup_flat_intervals
            if self.startup:
                # Double, but never past startup_cap x BDP: a connection that is only
                # window-limited measures BDP close to its window, so the cap (1.8x the
                # window memory at Linux's ~0.6 window/memory ratio) barely slows it down,
                # while one that already has its window gets no more than that. The cap
                # takes this interval's rate too: the two-interval rate lags a connection
                # that doubles per RTT by half an interval, and arrivals (see
                # DrsReceiverChannel._received) never exceed the path's rate.
                fresh = max(bandwidth_bps, max(self._bws)) / 8.0 * rtt
                memory = max(memory, min(2.0 * current, c.startup_cap * fresh))
        memory = max(memory, c.max_shrink * current)
        request = memory / 2.0 if c.kernel_doubles else memory
        return int(min(c.max_request, max(c.min_request, request)))

    def _memory_of(self, request: int) -> float:
        return 2.0 * request if self.config.kernel_doubles else float(request)

    def tick(self, now: float, total_bytes: int) -> DrsDecision | None:
        """End of an interval: measure, decide, and return the SBUF to send (None if the
        interval is not over yet)."""
        if now < self._next_t:
            return None
        elapsed = now - self._last_t
        bw = (total_bytes - self._last_bytes) * 8.0 / elapsed if elapsed > 0 else 0.0
        span = now - self._prev_t
        sustained = (total_bytes - self._prev_bytes) * 8.0 / span if span > 0 else bw
        self._prev_t, self._prev_bytes = self._last_t, self._last_bytes
        self._last_t, self._last_bytes = now, total_bytes
        self.last_bandwidth_bps = bw
        self.request = self.target_request(bw, sustained)
        self.max_request = max(self.max_request, self.request)
        self._next_t = now + self.interval_s
        rtt = self.rtt_s
        bdp = int(max(self._bws) / 8.0 * rtt) if rtt is not None and self._bws else None
        return DrsDecision(now, bw, rtt, bdp, self.request, format_sbuf(now, self.request))


class LineBuffer:
    """Splits a byte stream into lines, bounded so a peer cannot grow it without end."""

    def __init__(self) -> None:
        self._buf = bytearray()

    def feed(self, data: bytes) -> list[bytes]:
        self._buf += data
        lines: list[bytes] = []
        while (nl := self._buf.find(b"\n")) >= 0:
            lines.append(bytes(self._buf[: nl + 1]))
            del self._buf[: nl + 1]
        if len(self._buf) > MAX_LINE:
            raise ValueError("DRS channel: line too long")
        return lines


class DrsReceiverChannel:
    """Receiver glue for one data connection: applies decisions to the data socket and
    talks SBUF on its DRS socket. Driven by the receiver's sampling loop (no own thread)."""

    def __init__(
        self,
        data_sock: socket.socket,
        drs_sock: socket.socket,
        config: DrsConfig,
        clock: Callable[[], float],
        force: bool = False,
    ) -> None:
        self.data_sock = data_sock
        self.drs_sock = drs_sock
        self.clock = clock
        self.force = force
        self.core = DrsReceiver(config, clock(), initial_request=config.min_request)
        self._lines = LineBuffer()
        self.granted = data_sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
        self.max_granted = self.granted
        self.last: DrsDecision | None = None
        self.closed = False
        self.error: str | None = None

    def poll(self, total_bytes: int) -> None:
        """Read any echoes, then, if an interval is over, resize and send the next SBUF."""
        if self.closed:
            return
        self._read_echoes()
        decision = self.core.tick(self.clock(), self._received(total_bytes))
        if decision is None:
            return
        self.last = decision
        try:
            # Receiver first, then tell the sender: favours throughput (paper §4).
            self.granted = buffers.set_rcvbuf(self.data_sock, decision.request, self.force)
            buffers.raise_window_clamp(self.data_sock, self.granted)
            self.max_granted = max(self.max_granted, self.granted)
            self.drs_sock.sendall(decision.message)
        except OSError as exc:
            self._fail(f"DRS channel: {exc}")

    def _received(self, app_bytes: int) -> int:
        """Bytes that arrived, as data segments x MSS from TCP_INFO. Unlike what the
        application has read (or tcpi_bytes_received), arrivals cannot exceed the path's
        rate: when a retransmission fills a hole, or a late read drains a backlog, the
        in-order byte count jumps, and sizing the buffer to that burst oversizes it
        (measured on the lab: 3.5 x BDP instead of <= 3). Falls back to the app count."""
        try:
            info = read_tcp_info(self.data_sock)
        except OSError:
            return app_bytes
        segs, mss = info.get("data_segs_in"), info.get("rcv_mss")
        if segs is None or not mss:
            return app_bytes
        return segs * mss

    def _read_echoes(self) -> None:
        while not self.closed:
            try:
                ready, _, _ = select.select([self.drs_sock], [], [], 0)
                if not ready:
                    return
                data = self.drs_sock.recv(4096)
            except OSError as exc:
                self._fail(f"DRS channel: {exc}")
                return
            if not data:
                self.closed = True
                return
            now = self.clock()
            try:
                lines = self._lines.feed(data)
            except ValueError as exc:
                self._fail(str(exc))
                return
            for line in lines:
                self.core.on_echo(line, now)

    def _fail(self, message: str) -> None:
        self.error = self.error or message
        self.closed = True


def run_echo(
    drs_sock: socket.socket,
    data_sock: socket.socket,
    stop: threading.Event,
    max_request: int,
    force: bool = False,
    on_resize: Callable[[int], None] | None = None,
) -> str | None:
    """The sender's side of the DRS channel: for each SBUF, set SO_SNDBUF (within
    max_request) and echo the line exactly as received. Stateless per message. Returns an
    error message, or None on a clean end (EOF or stop)."""
    lines = LineBuffer()
    drs_sock.settimeout(0.2)  # only so `stop` is noticed; not a limit on the peer
    while not stop.is_set():
        try:
            data = drs_sock.recv(4096)
        except TimeoutError:
            continue
        except OSError as exc:
            return f"DRS channel: {exc}"
        if not data:
            return None
        try:
            got = lines.feed(data)
        except ValueError as exc:
            return str(exc)
        for line in got:
            parsed = parse_sbuf(line)
            if parsed is None:
                return f"DRS channel: not an SBUF message: {line[:40]!r}"
            try:
                granted = buffers.set_sndbuf(data_sock, min(parsed[1], max_request), force)
                if on_resize is not None:
                    on_resize(granted)
                drs_sock.sendall(line)
            except OSError as exc:
                return f"DRS channel: {exc}"
    return None
