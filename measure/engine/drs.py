"""Dynamic Right-Sizing in user space (Engelhart, Gardner, Feng: drsFTP, §3-4).

The receiver measures bandwidth as bytes received per interval and sends
``SBUF <timestamp> <buffer-size>`` on a DRS channel (a TCP connection beside the data
connection, same endpoints). The sender sets SO_SNDBUF to buffer-size within its limits and
echoes the line unchanged -- it keeps no per-message state, so several SBUFs may be in flight.
The receiver takes the RTT from the echoed timestamp, computes BDP = bandwidth x RTT and sets
SO_RCVBUF for 2 x BDP *before* sending the next SBUF (the new drsFTP favours throughput over
memory frugality).

Choices this implementation makes where the paper leaves room (documented in docs/transfer.md):
- RTT samples come from the kernel too: the handshake's RTT (TCP_INFO min_rtt, there before
  the first byte) and the receiver's own estimate (TCP_INFO rcv_rtt, from timestamps). Startup
  cannot wait for SBUF echoes: the first one comes back a round trip after the first
  interval, by when slow start has doubled twice. Without a DRS channel (a far end that only
  speaks TCP, like iperf3) these are the only RTT source: receiver-only DRS.
- The BDP's RTT is the minimum of the recent samples, not the last one: echoes include
  queueing and scheduling delay (the paper saw 180 ms against ping's 77 ms), and feeding that
  back would make the buffer chase its own queue.
- The BDP's RTT is that minimum only while the connection runs at the best rate it has
  shown: its own queue can stand only there. Below that rate (by more than the ACK
  clock's jitter) with the sender held by our window (the bytes of one smoothed RTT fill
  the window offered: Little's law), the delay above the minimum is not ours -- delay
  jitter, another flow's queue -- and the window must carry it: the BDP takes the
  smoothed RTT from then on (`carry_rtt_s`). Without that the window shrank with the
  rate it held down (60 ms x 80 Mbit/s, +-10 ms jitter each way: DRS 0.63-0.90 of
  autotune; 40 ms x 100 Mbit/s, +-8 ms: 97 down to 20 Mbit/s within 5 s).
- Bandwidth is the maximum over the last few intervals: one interval after a loss shows
  a dip, and sizing the buffer to the dip would then hold the connection down (measured
  on the lab: 35 instead of 48 Mbit/s at 50 Mbit/s x 50 ms).
- "2 x BDP" is in the kernel's units: Linux doubles every SO_RCVBUF request and reports the
  doubled size, so the request is BDP and getsockopt reads 2 x BDP.
- Startup starts from the BDP a probe measured when the transfer has one (both buffers, each
  stream's share: engine.drs_start_request): that window carries slow start to the path's
  rate from the first round trip without letting cwnd overshoot, and it grows only once
  the bytes of a path RTT fill it (the sender is held by our window), doubling per RTT.
- Without a BDP, startup keeps pace with slow start, as the in-kernel DRS did: once per
  RTT the window is sized to 2 x the bytes received in the last (path) RTT, times that
  RTT's growth (at most 2x) -- the sender's window doubles each RTT and a new window
  reaches it half an RTT later, so "2x the last RTT" alone would be caught up with before
  the next update (DrsConfig.clean_growth can restrict this to clean doublings: less slow-
  start overshoot, a slower ramp). The memory behind that window assumes Linux's ~0.6
  window per byte of buffer. Startup ends when the receiver's own RTT (rcv_rtt) stands 25
  % above the path's (a queue is building: HyStart's delay test, checked on every poll),
  or after three RTTs without a quarter more bandwidth (BBR's full-pipe check); growth of
  a quarter in one interval starts it again. After startup the buffer settles at 2 x BDP.
- Shrinking never drops data the receiver has offered: TCP may not take back a window it
  advertised, so shrinking SO_RCVBUF below it makes the kernel prune what then arrives (the
  sender times out, cwnd 1). The window is shrunk first (TCP_WINDOW_CLAMP), and the buffer
  follows only once the window still open (TCP_INFO rcv_wnd) plus unread data fits the new
  buffer; then the clamp is lifted again so the buffer alone bounds the window.
- The measurement interval adapts: one smoothed RTT during startup, two after, bounded to
  [25 ms, 250 ms]
  (the paper's compile-time constant is listed there as future work).

Why one module of this size: a third of it is the design notes above; the receiver's state
machine and the SBUF channel share that state, and the algorithm reads as one unit beside
the paper.
"""

from __future__ import annotations

import array
import fcntl
import math
import select
import socket
import termios
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, replace

from tcpwizard.measure.engine import buffers
from tcpwizard.measure.observe.tcpinfo import TcpInfo, read_tcp_info

SBUF = b"SBUF"
MAX_LINE = 128  # "SBUF <float> <int>" is far shorter; anything longer is garbage


@dataclass(frozen=True)
class DrsConfig:
    headroom: float = 2.0  # buffer memory = headroom x BDP (paper: 2x for slow start)
    interval_rtts: float = 2.0  # measurement interval in smoothed RTTs
    startup_interval_rtts: float = 1.0  # the same during startup
    min_interval_s: float = 0.025
    max_interval_s: float = 0.25
    initial_interval_s: float = 0.05  # before any RTT sample
    rtt_window: int = 64  # samples the min-RTT filter looks at (seconds of them, like BBR)
    bw_window: int = 8  # intervals the max-bandwidth filter looks at
    min_request: int = buffers.UNTUNED_BYTES  # never below stock FTP's buffer
    max_request: int = 4 * 1024 * 1024  # the host's limit (setsockopt argument)
    startup_growth: float = 1.25  # bandwidth growth per interval that keeps startup going
    startup_flat_intervals: int = 3  # intervals without that growth that end startup
    startup_gain: float = 2.0  # startup window = this x bytes of the last RTT x growth
    max_growth: float = 2.0  # slow start at most doubles per RTT
    # Growth below this is not extrapolated. 1.0: any growth is, which keeps pace with slow
    # start (time to 90 % as autotune's at 100 ms) at the price of some slow-start overshoot
    # (~800 retransmits per run there, autotune ~2000). 1.8 extrapolates only a clean
    # doubling: a tenth of the retransmits, but per-interval rates are noisy enough that
    # the ramp then took 1.1-1.5x autotune's time (lab bench, load ~5).
    clean_growth: float = 1.0
    window_share: float = 0.6  # advertised window per byte of buffer memory (Linux ~0.6)
    # Startup grows the window past 2 x BDP only while the bytes of one path RTT fill this
    # share of the window the buffer offers: the sender is then held by our window. Derived
    # from the two cases it separates: window-limited, a min-RTT's bytes are the whole
    # window (1.0, less the ACK clock's jitter); held by the path with a 2 x BDP buffer,
    # they are the BDP in a window of 2 x 0.6 x BDP (0.83).
    window_limited_share: float = 0.92
    safe_share: float = 0.5  # the share a shrink counts on (the kernel's lowest default)
    max_shrink: float = 0.5  # a new target is at least this share of the last one
    # Startup ends early once the receiver's own RTT (TCP_INFO rcv_rtt) stands this far above
    # the path's: a queue is building at the bottleneck, the pipe is full, and a window that
    # kept on doubling would let the sender overflow that queue (HyStart's delay test).
    queue_rtt_factor: float = 1.25
    # ...and at least this much above it: rcv_rtt comes from TCP timestamps (1 ms ticks) and
    # the sender's scheduling, so on a short path a quarter of the RTT is noise.
    queue_rtt_floor_s: float = 0.005
    kernel_doubles: bool = True  # Linux stores 2x the request
    # Under loss that recurs, a repair holds the data that arrives behind a hole in the
    # buffer until the retransmission fills it: one RTT for the retransmission's trip plus
    # the RACK reordering window (a quarter of the min RTT) before it is sent. The window
    # must cover that on top of the bytes in flight, or the sender is held by our window
    # and the rate DRS measures next is our own window's (measured on the lab before this
    # term: 100 Mbit/s x 30 ms, 0.5 % random loss, BBR: DRS 0.35-0.57 of autotune as the
    # buffer shrank to 0.9-1.5 BDP).
    repair_rtts: float = 1.25
    # Recurring: repairs in at least this many of the last `bw_window` intervals counted
    # (after startup, 2 RTTs each; from a measured BDP's start, startup's too): one more
    # than loss that does not recur gives. One episode (a burst, the tail of slow start's
    # overshoot) repairs within two intervals; BBR's bandwidth probe through a shallow
    # queue once in four (every 8 RTTs): 2 of 8. Random loss of 0.2 % hits most intervals
    # of a few hundred packets.
    repair_intervals: int = 3


@dataclass(frozen=True)
class DrsDecision:
    """What the receiver does at the end of one interval."""

    t: float
    bandwidth_bps: float
    rtt_s: float | None
    bdp_bytes: int | None
    request: int  # the SO_RCVBUF target, also the SBUF buffer-size
    message: bytes


@dataclass(frozen=True)
class BufferStep:
    """What to do to the data socket now, in this order: set TCP_WINDOW_CLAMP to `clamp`,
    set SO_RCVBUF to `rcvbuf`, then lift the clamp to the granted buffer. None: leave it."""

    clamp: int | None = None
    rcvbuf: int | None = None
    open_clamp: bool = False


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
    counts, RTT samples and echoed lines with timestamps, and applies the decisions (tick)
    and socket steps (step) it returns."""

    def __init__(
        self,
        config: DrsConfig,
        now: float,
        initial_request: int | None = None,
        from_bdp: bool = False,
    ) -> None:
        self.config = config
        self.request = initial_request or config.min_request  # the target
        # The initial request is a measured BDP (a probe's), not a stock guess: startup
        # then trusts it until the sender shows it is too small.
        self.from_bdp = from_bdp and initial_request is not None
        self.start_request = self.request
        self.applied = self.request  # the SO_RCVBUF argument in force on the socket
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
        self._last_transfer = 0  # every stream's bytes at the last tick (several streams)
        self._prev_transfer = 0
        self._prev_bw: float | None = None  # the last interval's rate, for the growth factor
        self._next_t = now + config.initial_interval_s
        self._clamp: int | None = None  # TCP_WINDOW_CLAMP while a shrink waits
        self._clamp_t = now
        self.max_request = self.request
        self.last_bandwidth_bps = 0.0
        self.waiting_shrinks = 0  # steps a shrink was held back for data in flight
        self._repairs: deque[bool] = deque(maxlen=config.bw_window)  # per interval
        self._ooo: int | None = None  # TCP_INFO rcv_ooopack at the last tick
        self._best_bw = 0.0  # the best rate (two intervals) the connection has shown
        self.carry_rtt_s: float | None = None  # the RTT our window must carry (not ours)

    @property
    def rtt_s(self) -> float | None:
        return min(self._rtts) if self._rtts else None

    @property
    def srtt_s(self) -> float | None:
        return self._srtt

    @property
    def bdp_rtt_s(self) -> float | None:
        """The RTT the BDP is sized by: the path's, or the larger one our window carries."""
        rtt = self.rtt_s
        if rtt is None or self.carry_rtt_s is None:
            return rtt
        return max(rtt, self.carry_rtt_s)

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

    def on_rtt(self, rtt: float, now: float) -> bool:
        """One RTT sample (seconds) from any source; False if it is not usable."""
        if not math.isfinite(rtt) or rtt <= 0:
            return False
        first = self._srtt is None
        self._rtts.append(rtt)
        # Smoothed like TCP's SRTT (RFC 6298, alpha 1/8): the interval and the bytes in
        # flight per RTT follow it, the BDP takes the minimum.
        self._srtt = rtt if self._srtt is None else 0.875 * self._srtt + 0.125 * rtt
        if first:
            # Until now the interval was a guess; the first one should span an RTT.
            self._next_t = max(self._next_t, self._last_t + self.interval_s)
        return True

    def on_echo(self, line: bytes, now: float) -> float | None:
        """An SBUF came back: its RTT (seconds), or None for a line that is not ours."""
        parsed = parse_sbuf(line)
        if parsed is None:
            return None
        rtt = now - parsed[0]
        if rtt < 0 or not self.on_rtt(rtt, now):
            return None
        return rtt

    def target_request(
        self,
        bandwidth_bps: float,
        sustained_bps: float | None = None,
        offered: int | None = None,
        transfer_bps: float | None = None,
    ) -> int:
        """Take one interval's bandwidth (and the rate over the last two intervals, which
        the BDP filter uses: a burst after loss recovery fills one interval, not two);
        return the next SO_RCVBUF target. `offered`: the window last advertised (TCP_INFO
        rcv_wnd), None where the kernel does not say; `transfer_bps`: the whole transfer's
        rate over the same two intervals when it runs several streams."""
        c = self.config
        current = self._memory_of(self.request)
        rate = bandwidth_bps if sustained_bps is None else sustained_bps
        if self._held_below_best(rate, offered, current, transfer_bps):
            self.carry_rtt_s = self._srtt
        prev, self._prev_bw = self._prev_bw, bandwidth_bps
        if not self.startup and self._bws and bandwidth_bps >= c.startup_growth * max(self._bws):
            # Growing fast again (a stall that ended startup early, or more capacity):
            # back to the startup rule, or a window-limited connection would creep.
            self.startup, self._flat, self._startup_bw = True, 0, max(self._bws)
        self._bws.append(rate)
        rtt = self.rtt_s
        bdp_rtt = self.bdp_rtt_s
        if rtt is None or bdp_rtt is None:
            return self.request  # nothing to size by before the first RTT sample
        bdp = max(self._bws) / 8.0 * bdp_rtt
        memory = c.headroom * bdp
        if self.repairing:
            memory += c.repair_rtts / c.window_share * bdp
        if self.startup:
            if bandwidth_bps >= c.startup_growth * self._startup_bw:
                self._startup_bw = bandwidth_bps
                self._flat = 0
            else:
                self._flat += 1
                self.startup = self._flat < c.startup_flat_intervals
        if self.startup:
            # Bytes per RTT of the path (the minimum: a window sized by the RTT the queue
            # inflates lets the queue grow, which inflates the RTT).
            per_rtt = bandwidth_bps / 8.0 * rtt
            memory = max(memory, current)
            held = per_rtt >= c.window_limited_share * c.window_share * current
            if not self.from_bdp:
                # From a stock buffer: grow the window the way the bytes per RTT grew over
                # the last RTT, the sender's window one update from now (slow start would
                # catch up with any window sized to the last RTT).
                growth = c.max_growth if not prev else min(c.max_growth, bandwidth_bps / prev)
                window = c.startup_gain * per_rtt * (growth if growth >= c.clean_growth else 1.0)
                memory = max(memory, window / c.window_share)
            elif held:
                # From a measured BDP's buffer, only once our window holds the sender (the
                # BDP was low, or the path got faster): then double it per RTT, as slow
                # start would. Not while the sender stays below it: extrapolating the
                # growth of its last slow-start round (2x when the rate reaches the
                # bottleneck) opened a window of 4x the BDP, and cwnd overshot the
                # bottleneck's queue into it (hundreds of retransmits, a 5x BDP peak).
                memory = max(memory, c.startup_gain * per_rtt / c.window_share)
        else:
            memory = max(memory, c.max_shrink * current)
        request = memory / 2.0 if c.kernel_doubles else memory
        return int(min(c.max_request, max(c.min_request, request)))

    def _held_below_best(
        self, rate: float, offered: int | None, memory: float, transfer_bps: float | None
    ) -> bool:
        """Our window holds the sender below the best rate the transfer has shown: then no
        queue of ours stands (that needs the best rate), and the RTT above the path's is
        not ours. The transfer's rate, not this stream's, with several streams: a stream
        below its own best may only be yielding to its siblings, whose queue is ours too
        (8 streams at 25 ms x 100 Mbit/s: DRS's buffers grew 1.5 x and it fell to 0.93 of
        autotune when each stream judged alone)."""
        c = self.config
        pace = rate if transfer_bps is None else transfer_bps
        best, self._best_bw = self._best_bw, max(self._best_bw, pace)
        # Below the best by more than the ACK clock's jitter (the share that counts as
        # equal in the held test below): while a queue of ours stands the bottleneck never
        # idles, and every interval carries its line rate, the best any interval shows.
        if self._srtt is None or pace >= c.window_limited_share * best:
            return False
        window = offered if offered else c.window_share * memory
        return rate / 8.0 * self._srtt >= c.window_limited_share * window

    @property
    def repairing(self) -> bool:
        """Loss repairs recur: the window carries a repair's arrivals on top of the BDP."""
        return sum(self._repairs) >= self.config.repair_intervals

    def _count_repairs(self, ooo_packets: int | None) -> None:
        # rcv_ooopack (Linux 5.4+) counts segments that arrived out of order: a hole.
        # A stock start's slow start overshoots: its repairs are one episode, not counted.
        # From a measured BDP the window holds slow start near the BDP (no overshoot on
        # the targets' paths: 0 retransmits), so loss there is the path's.
        counted = not self.startup or self.from_bdp
        if ooo_packets is not None and self._ooo is not None and counted:
            self._repairs.append(ooo_packets > self._ooo)
        self._ooo = ooo_packets

    def _memory_of(self, request: int) -> float:
        return 2.0 * request if self.config.kernel_doubles else float(request)

    def on_queue_rtt(self, rtt: float) -> bool:
        """A fresh RTT of the data (rcv_rtt), checked between ticks: during startup, one well
        above the path's minimum means the pipe is full. Startup ends there and the target
        comes down to 2 x BDP at the best rate seen, which the window clamp enforces at once
        (step) instead of a round trip later. True if it ended startup."""
        c = self.config
        base = self.bdp_rtt_s  # the path's RTT, or the delay not ours that it carries
        if not self.startup or base is None or not self._bws:
            return False
        if rtt <= max(c.queue_rtt_factor * base, base + c.queue_rtt_floor_s):
            return False
        self.startup, self._flat = False, 0
        best = max(max(self._bws), self._prev_bw or 0.0)
        # No max_shrink floor here: the window must stop now; if the best rate was still
        # short of the path's, the next interval grows by a quarter and startup resumes.
        memory = c.headroom * best / 8.0 * base
        request = memory / 2.0 if c.kernel_doubles else memory
        # Never below a measured BDP's start: that window lets the sender queue a fifth of
        # the BDP at most, so a higher RTT early on is not ours to shrink for (the first
        # rcv_rtt after an idle control exchange echoes a stale timestamp, and the kernel
        # smooths it down over many RTTs); a start that was too large comes down once
        # startup is over, at most halving per interval.
        floor = self.start_request if self.from_bdp else c.min_request
        self.request = int(min(c.max_request, max(floor, request)))
        return True

    def tick(
        self,
        now: float,
        total_bytes: int,
        ooo_packets: int | None = None,
        offered: int | None = None,
        transfer_bytes: int | None = None,
    ) -> DrsDecision | None:
        """End of an interval: measure, decide, and return the SBUF to send (None if the
        interval is not over yet). `ooo_packets`: the kernel's count of segments that
        arrived out of order so far; `offered`: the window last advertised (None where the
        kernel does not say); `transfer_bytes`: every stream's bytes so far, when there are
        several."""
        if now < self._next_t:
            return None
        self._count_repairs(ooo_packets)
        elapsed = now - self._last_t
        bw = (total_bytes - self._last_bytes) * 8.0 / elapsed if elapsed > 0 else 0.0
        span = now - self._prev_t
        sustained = (total_bytes - self._prev_bytes) * 8.0 / span if span > 0 else bw
        transfer_bps = None
        if transfer_bytes is not None:
            moved = transfer_bytes - self._prev_transfer
            transfer_bps = moved * 8.0 / span if span > 0 else None
            self._prev_transfer, self._last_transfer = self._last_transfer, transfer_bytes
        self._prev_t, self._prev_bytes = self._last_t, self._last_bytes
        self._last_t, self._last_bytes = now, total_bytes
        self.last_bandwidth_bps = bw
        self.request = self.target_request(bw, sustained, offered, transfer_bps)
        self.max_request = max(self.max_request, self.request)
        self._next_t = now + self.interval_s
        rtt = self.bdp_rtt_s
        bdp = int(max(self._bws) / 8.0 * rtt) if rtt is not None and self._bws else None
        return DrsDecision(now, bw, rtt, bdp, self.request, format_sbuf(now, self.request))

    def step(self, now: float, offered: int | None, unread: int = 0) -> BufferStep:
        """Move the socket towards the target without dropping data. `offered` is the
        window last advertised (TCP_INFO rcv_wnd): the sender may have that much in flight
        and TCP never takes it back. None when the kernel does not say: then a shrink
        waits two smoothed RTTs after the clamp (the old window's data has landed)."""
        target = self.request
        if target >= self.applied:
            was_clamped = self._clamp is not None
            self._clamp = None
            if target == self.applied and not was_clamped:
                return BufferStep()
            self.applied = target
            return BufferStep(rcvbuf=target, open_clamp=True)
        # What the smaller buffer surely holds; the clamp stays a little under it so a
        # window at the clamp plus a little unread data still passes the check below.
        fits = int(self.config.safe_share * self._memory_of(target))
        clamp = fits * 7 // 8
        if self._clamp != clamp:
            if self._clamp is None or clamp < self._clamp:
                # A lower clamp starts the wait again; a higher one (the target rose a
                # little) keeps it: what was in flight is bounded by the lower one.
                self._clamp_t = now
            self._clamp = clamp
            self.waiting_shrinks += 1
            return BufferStep(clamp=clamp)
        if offered is None:
            landed = now - self._clamp_t >= 2.0 * (self._srtt or self.config.max_interval_s)
        else:
            landed = offered + unread <= fits
        if not landed:
            self.waiting_shrinks += 1
            return BufferStep()
        self._clamp = None
        self.applied = target
        return BufferStep(rcvbuf=target, open_clamp=True)


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


def _unread(sock: socket.socket) -> int:
    """Bytes received but not yet read (FIONREAD); they hold buffer memory too."""
    buf = array.array("i", [0])
    try:
        fcntl.ioctl(sock.fileno(), termios.FIONREAD, buf, True)
    except OSError:
        return 0
    return int(buf[0])


# A receive buffer must hold several full segments whatever the BDP says: below a segment
# or two the window cannot open past the sender's silly-window avoidance and the
# connection crawls (loopback's 64 KB segments stalled at a 4 KB floor).
MIN_SEGMENTS = 8


def _floored_for_segments(config: DrsConfig, sock: socket.socket) -> DrsConfig:
    try:
        mss = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG)
    except OSError:
        return config
    floor = min(MIN_SEGMENTS * mss, config.max_request)
    return config if config.min_request >= floor else replace(config, min_request=floor)


class DrsReceiverChannel:
    """Receiver glue for one data connection: applies decisions to the data socket and,
    with a DRS socket, talks SBUF on it (the sender's buffer follows). Without one
    (`drs_sock=None`: a far end that only speaks TCP) it is receiver-only DRS: RTT from
    TCP_INFO, no SBUF. Driven by the receiver's sampling loop (no own thread)."""

    def __init__(
        self,
        data_sock: socket.socket,
        drs_sock: socket.socket | None,
        config: DrsConfig,
        clock: Callable[[], float],
        force: bool = False,
        from_bdp: bool = False,
    ) -> None:
        self.data_sock = data_sock
        self.drs_sock = drs_sock
        self.clock = clock
        self.force = force
        now = clock()
        config = _floored_for_segments(config, data_sock)
        self.granted = data_sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
        # The controller starts from the buffer the socket has, so a floor above it (or a
        # socket set up smaller than the floor) is applied at the first step.
        on_socket = self.granted // 2 if config.kernel_doubles else self.granted
        # `from_bdp`: the socket was set up from a measured BDP (engine.drs_start_request).
        self.core = DrsReceiver(config, now, initial_request=on_socket, from_bdp=from_bdp)
        self._lines = LineBuffer()
        self.max_granted = self.granted
        self.last: DrsDecision | None = None
        self.closed = drs_sock is None  # no SBUF channel (any more)
        self.error: str | None = None
        self._rcv_rtt_us = 0
        info = self._info()
        if info is not None:
            # The handshake's RTT is known before the first byte: startup can step per
            # RTT from the start instead of guessing an interval.
            for key in ("min_rtt", "rtt"):
                us = info.get(key)
                if us:
                    self.core.on_rtt(us / 1e6, now)
                    break

    def poll(self, total_bytes: int, transfer_bytes: int | None = None) -> None:
        """Read any echoes; if an interval is over, decide the next buffer and send the
        SBUF; then move the socket towards the target (see DrsReceiver.step).
        `transfer_bytes`: every stream's bytes, when the transfer runs several."""
        if not self.closed:
            self._read_echoes()
        info = self._info()
        now = self.clock()
        decision: DrsDecision | None = None
        if info is not None and (us := info.get("rcv_rtt")):
            self.core.on_queue_rtt(us / 1e6)
        offered = info.get("rcv_wnd") if info is not None else None
        if self.core.due(now):
            if info is not None:
                self._feed_rcv_rtt(info, now)
            ooo = info.get("rcv_ooopack") if info is not None else None
            received = self._received(info, total_bytes)
            decision = self.core.tick(now, received, ooo, offered, transfer_bytes)
        step = self.core.step(now, offered, _unread(self.data_sock) if offered else 0)
        try:
            self._apply(step)
        except OSError as exc:
            self._fail(f"DRS: {exc}")
            return
        if decision is None:
            return
        self.last = decision
        if self.drs_sock is not None and not self.closed:
            try:
                # Receiver first, then tell the sender: favours throughput (paper §4).
                self.drs_sock.sendall(decision.message)
            except OSError as exc:
                self._fail(f"DRS channel: {exc}")

    def _apply(self, step: BufferStep) -> None:
        if step.clamp is not None:
            buffers.set_window_clamp(self.data_sock, step.clamp)
        if step.rcvbuf is not None:
            self.granted = buffers.set_rcvbuf(self.data_sock, step.rcvbuf, self.force)
            self.max_granted = max(self.max_granted, self.granted)
        if step.open_clamp:
            buffers.raise_window_clamp(self.data_sock, self.granted)

    def _info(self) -> TcpInfo | None:
        try:
            return read_tcp_info(self.data_sock)
        except OSError:
            return None

    def _feed_rcv_rtt(self, info: TcpInfo, now: float) -> None:
        # rcv_rtt changes only when the kernel measured again; repeating an old value
        # would only weigh it more in the smoothed RTT.
        us = info.get("rcv_rtt") or 0
        if us and us != self._rcv_rtt_us:
            self._rcv_rtt_us = us
            self.core.on_rtt(us / 1e6, now)

    @staticmethod
    def _received(info: TcpInfo | None, app_bytes: int) -> int:
        """Bytes that arrived, as data segments x MSS from TCP_INFO. Unlike what the
        application has read (or tcpi_bytes_received), arrivals cannot exceed the path's
        rate: when a retransmission fills a hole, or a late read drains a backlog, the
        in-order byte count jumps, and sizing the buffer to that burst oversizes it
        (measured on the lab: 3.5 x BDP instead of <= 3). Falls back to the app count.

        The segment count is a floor, not always the count: a GSO packet that came in
        through a virtio-net header (a TUN or a virtio NIC in a VM) carries gso_segs 0 and
        the kernel counts it as one segment. Then the in-order count is the better one,
        and it never exceeds the arrivals when the segments are counted right: the larger
        of the two. (The lab's GSO delay line at 1.4 Gbit/s: 123 Mbit/s counted while
        1,170 arrived, and the buffer shrank to the floor.)"""
        if info is None:
            return app_bytes
        segs, mss = info.get("data_segs_in"), info.get("rcv_mss")
        in_order = info.get("bytes_received") or app_bytes
        if segs is None or not mss:
            return in_order
        return max(segs * mss, in_order)

    def _read_echoes(self) -> None:
        sock = self.drs_sock
        while sock is not None and not self.closed:
            try:
                ready, _, _ = select.select([sock], [], [], 0)
                if not ready:
                    return
                data = sock.recv(4096)
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
        # The channel (or a setsockopt) failed: the data keeps flowing; only the SBUF
        # side stops. The receiver's own sizing goes on.
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
