"""The data path of a test transfer, shared by the client (transfer.py) and serve
(serve/transfers.py): buffer plans per mode, the sending and receiving loops over already
connected sockets, per-interval sampling, and the per-side report that crosses the wire.

Speed matters (the engine must not be the bottleneck): one thread per stream moving 4 MiB
memoryview chunks with send()/recv_into() into preallocated buffers; the GIL is released in
the syscalls, so the streams run on as many cores as there are, and no Python work runs per
chunk beyond the call itself: TCP_INFO, buffers and DRS are read by the sampling loop, which
wakes at most every sample interval.

Why one module of this size: the sending and receiving loops, the sampler and the side
report are one format: the report is what both loops fill and what crosses the wire, and the
client and serve both run it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import select
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from tcpwizard.exitcodes import ExitCode, TcpWizardError
from tcpwizard.measure.engine import buffers, rates
from tcpwizard.measure.engine.drs import DrsConfig, DrsReceiverChannel, run_echo
from tcpwizard.measure.engine.sendcap import CAP_WAIT_S, send_room
from tcpwizard.measure.engine.steady import SteadyDetector, SteadyStop
from tcpwizard.measure.model import TCP_INFO_FIELDS, Mode, TcpInfoSample
from tcpwizard.measure.observe.hostload import HostLoad
from tcpwizard.measure.observe.tcpinfo import congestion_control, read_tcp_info
from tcpwizard.measure.wire import spec

# One send() hands the kernel up to this much. Measured on loopback (docs/bench-transfer.md):
# 4 MiB sends carried one stream at 41-43 Gbit/s in 6 of 6 runs against 27-38 with 1 MiB,
# 16 MiB gave no more; the kernel copies what the send buffer has room for either way, so
# on a slow path the size changes nothing.
SEND_CHUNK = 4 << 20
# Each stream's receive buffer (its content is discarded). recv_into returns what has
# arrived, up to this; matched to SEND_CHUNK: 16 streams hold 64 MiB.
RECV_CHUNK = 4 << 20
MAX_STREAMS = spec.MAX_STREAMS
DEFAULT_SAMPLE_INTERVAL = 0.1  # reporting grid: at most 250 ms between samples
DEFAULT_STALL_TIMEOUT = 5.0  # no TCP progress this long on a stream: the peer is gone
# After the duration the sender waits for what it buffered to be delivered. A live but slow
# connection (Reno recovering on a long lossy path) may take a while; this bounds it.
MAX_DRAIN_S = 30.0
STALL_POLL_S = 0.5  # socket timeout slice between progress checks
MODES: tuple[Mode, ...] = spec.MODES
Role = Literal["sender", "receiver"]


class TransferError(TcpWizardError):
    """A transfer could not be set up as asked (bad plan, missing BDP): the caller's
    mistake, not the peer's."""

    exit_code = ExitCode.USAGE


# ---------------------------------------------------------------------------- buffer plans


@dataclass(frozen=True)
class BufferPlan:
    """setsockopt arguments for one side's data sockets. `pre_*` go on before connect (on
    an accepted socket: right after accept), `post_*` right after connect. None: leave it
    to the kernel (autotuning stays on for that buffer)."""

    mode: Mode
    pre_sndbuf: int | None = None
    pre_rcvbuf: int | None = None
    post_sndbuf: int | None = None
    post_rcvbuf: int | None = None
    drs: bool = False
    force: bool = False
    max_request: int = 0  # DRS: the most either buffer may be set to
    drs_from_bdp: bool = False  # DRS starts from a measured BDP, not the stock buffer

    @property
    def rcv_autotuning(self) -> bool:
        return self.pre_rcvbuf is None and self.post_rcvbuf is None

    def presetup(self, sock: socket.socket) -> None:
        """Before connect: window scaling is negotiated in the SYN from the buffer in
        place now, so DRS opens it to the largest size here (drsFTP §3.4)."""
        if self.pre_sndbuf is not None:
            buffers.set_sndbuf(sock, self.pre_sndbuf, self.force)
        if self.pre_rcvbuf is not None:
            buffers.set_rcvbuf(sock, self.pre_rcvbuf, self.force)

    def postsetup(self, sock: socket.socket, accepted: bool) -> None:
        """After connect (client) or on the accepted socket (serve)."""
        if accepted:
            self.presetup(sock)
        if self.post_sndbuf is not None:
            buffers.set_sndbuf(sock, self.post_sndbuf, self.force)
        if self.post_rcvbuf is not None:
            buffers.set_rcvbuf(sock, self.post_rcvbuf, self.force)
        if accepted and not self.rcv_autotuning:
            # An accepted socket's window clamp was fixed from the listener's default
            # buffer; without this a larger SO_RCVBUF would never show in the window.
            top = max(self.pre_rcvbuf or 0, self.post_rcvbuf or 0, self.max_request)
            buffers.raise_window_clamp(sock, 2 * top)


def plan_buffers(
    mode: Mode,
    limits: buffers.HostBufferLimits,
    static_request: int | None = None,
    force: bool = False,
    streams: int = 1,
) -> BufferPlan:
    """The buffer strategy of each mode on this host. `static_request` is the SO_*BUF
    argument for `static` (the kernel doubles it, so BDP gives a 2 x BDP buffer); DRS
    starts each of its `streams` from its share of that BDP when it is known."""
    rmax = limits.max_request(receive=True, force=force)
    wmax = limits.max_request(receive=False, force=force)
    if mode == "untuned":
        u = buffers.UNTUNED_BYTES
        return BufferPlan(mode, pre_sndbuf=u, pre_rcvbuf=u, force=force)
    if mode == "autotune":
        return BufferPlan(mode)
    if mode == "static":
        if not static_request or static_request <= 0:
            raise TransferError("static mode needs the path's BDP (probe it, or --rtt/--bandwidth)")
        return BufferPlan(mode, pre_sndbuf=static_request, pre_rcvbuf=static_request, force=force)
    if mode == "overprovisioned":
        return BufferPlan(mode, pre_sndbuf=wmax, pre_rcvbuf=rmax, force=force)
    if mode == "drs":
        # Forced (the root what-if): DRS sizes itself to the path, whatever the sysctls
        # allow today; that is the tuned rate the wizard gap compares with.
        top = min(rmax, wmax) if not force else buffers.FORCE_CEILING // 2
        start = drs_start_request(static_request, streams, top)
        return BufferPlan(
            mode,
            pre_sndbuf=start,  # the sender follows the receiver's SBUFs from here
            pre_rcvbuf=rmax,  # open large for the SYN's window scale...
            post_rcvbuf=start,  # ...then bring it to the start; DRS sizes it from here
            drs=True,
            force=force,
            max_request=top,
            drs_from_bdp=bool(static_request and static_request > 0),
        )
    raise TransferError(f"unknown transfer mode {mode!r}")


def drs_start_request(bdp: int | None, streams: int, top: int) -> int:
    """The SO_*BUF argument DRS starts each stream with: its share of the BDP a probe
    measured (the kernel doubles it: drsFTP's 2 x BDP), so the window carries slow start
    from the first round trip instead of growing behind it; without a BDP the stock
    buffer, and DRS grows from there. The measured BDP then takes over (measure/engine/drs.py)."""
    if not bdp or bdp <= 0:
        return buffers.UNTUNED_BYTES
    return max(buffers.UNTUNED_BYTES, min(top, bdp // max(1, streams)))


# ---------------------------------------------------------------------------- reports


@dataclass(frozen=True)
class SideSample:
    """One sampling instant on one side. Bytes are cumulative over all streams; buffers
    are summed over streams; tcp_info (sender side) is aggregated over streams."""

    t: float
    bytes: int
    rcvbuf: int
    sndbuf: int
    drs_bandwidth_bps: float | None = None
    drs_rtt_s: float | None = None
    tcp_info: TcpInfoSample | None = None
    # Sender: bytes the network delivered (TCP_INFO delivered x MSS), which, unlike what the
    # app wrote, does not run ahead by the send buffer. Receiver: bytes TCP received in
    # order (tcpi_bytes_received), which a late read of the app does not delay. On the
    # wire as the report's "delivered" list, parallel to its rows (docs/protocol.md).
    delivered: int | None = None


@dataclass
class SideReport:
    role: Role
    streams: int
    bytes: int = 0
    seconds: float = 0.0
    samples: list[SideSample] = field(default_factory=list)
    error: str | None = None
    max_rcvbuf: int = 0
    max_sndbuf: int = 0
    final_tcp_info: list[TcpInfoSample] = field(default_factory=list)
    congestion_control: str = ""
    forced: bool = False
    rcv_autotuning: bool = True
    # This host's CPU and drops over the transfer (measure/observe/hostload.py); optional on the
    # wire: an older peer neither sends nor reads it.
    host_load: HostLoad | None = None
    # A timed sender: when it stopped writing (seconds since its start). What its send
    # buffer still held was delivered after that; optional on the wire.
    write_s: float | None = None

    def to_json(self) -> dict[str, Any]:
        rows = thin(self.samples, 240)
        extra: dict[str, Any] = {}
        if self.host_load is not None:
            extra["host_load"] = self.host_load.to_json()
        if self.write_s is not None:
            extra["write_s"] = self.write_s
        return {
            **extra,
            "role": self.role,
            "streams": self.streams,
            "bytes": self.bytes,
            "seconds": self.seconds,
            "error": self.error,
            "max_rcvbuf": self.max_rcvbuf,
            "max_sndbuf": self.max_sndbuf,
            "congestion_control": self.congestion_control,
            "forced": self.forced,
            "rcv_autotuning": self.rcv_autotuning,
            "final_tcp_info": [_ti_json(t) for t in self.final_tcp_info],
            "final_snd_wnd": [t.snd_wnd for t in self.final_tcp_info],
            # Compact rows: a 30 s test at 100 ms is 300 rows, well inside one 64 KiB line
            # once thinned (see thin()).
            "samples": [
                [
                    round(s.t, 4),
                    s.bytes,
                    s.rcvbuf,
                    s.sndbuf,
                    s.drs_bandwidth_bps,
                    s.drs_rtt_s,
                    _ti_json(s.tcp_info) if s.tcp_info else None,
                ]
                for s in rows
            ],
            # Apart from the rows, so a peer that reads 7-column rows still reads them.
            "delivered": [s.delivered for s in rows],
            # The same for the window the receiver offered, per row (None: no TCP_INFO).
            "snd_wnd": [s.tcp_info.snd_wnd if s.tcp_info else None for s in rows],
        }

    @classmethod
    def from_json(cls, obj: object) -> SideReport:
        """Parse a peer's report; raises ValueError on anything malformed."""
        if not isinstance(obj, dict):
            raise ValueError("report is not an object")
        try:
            role = obj["role"]
            if role not in ("sender", "receiver"):
                raise ValueError(f"bad role {role!r}")
            rep = cls(
                role=role,
                streams=int(obj["streams"]),
                bytes=int(obj["bytes"]),
                seconds=float(obj["seconds"]),
                error=None if obj.get("error") is None else str(obj["error"]),
                max_rcvbuf=int(obj["max_rcvbuf"]),
                max_sndbuf=int(obj["max_sndbuf"]),
                congestion_control=str(obj.get("congestion_control", "")),
                forced=bool(obj.get("forced", False)),
                rcv_autotuning=bool(obj.get("rcv_autotuning", True)),
                final_tcp_info=[
                    info
                    for info in _windows_into(
                        [_ti_from(t) for t in obj.get("final_tcp_info", [])],
                        obj.get("final_snd_wnd"),
                    )
                    if info is not None
                ],
            )
            if obj.get("host_load") is not None:
                rep.host_load = HostLoad.from_json(obj["host_load"])
            if obj.get("write_s") is not None:
                rep.write_s = float(obj["write_s"])
                if not math.isfinite(rep.write_s) or rep.write_s < 0:
                    raise ValueError("bad write_s")
            for row in obj["samples"]:
                t, b, rb, sb, bw, rtt, ti = row
                rep.samples.append(
                    SideSample(
                        float(t),
                        int(b),
                        int(rb),
                        int(sb),
                        None if bw is None else float(bw),
                        None if rtt is None else float(rtt),
                        None if ti is None else _ti_from(ti),
                    )
                )
            rep.samples = _with_delivered(rep.samples, obj.get("delivered"))
            rep.samples = _with_windows(rep.samples, obj.get("snd_wnd"))
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"malformed transfer report: {exc}") from None
        if not math.isfinite(rep.seconds) or rep.seconds < 0 or rep.bytes < 0:
            raise ValueError("malformed transfer report: negative or infinite totals")
        return rep


def _with_windows(rows: list[SideSample], windows: object) -> list[SideSample]:
    """The rows' TCP_INFO with the peer's offered windows (absent from older peers: 0,
    unread)."""
    infos = _windows_into([r.tcp_info for r in rows], windows)
    return [dataclasses.replace(r, tcp_info=i) for r, i in zip(rows, infos, strict=True)]


def _windows_into(
    infos: Sequence[TcpInfoSample | None], windows: object
) -> list[TcpInfoSample | None]:
    """`infos` with the offered windows sent beside them (None: an older peer's, unread)."""
    if windows is None:
        return list(infos)
    if not isinstance(windows, list) or len(windows) != len(infos):
        raise ValueError("snd_wnd does not match the rows")
    out: list[TcpInfoSample | None] = []
    for info, w in zip(infos, windows, strict=True):
        if w is not None and (not isinstance(w, int) or isinstance(w, bool) or w < 0):
            raise ValueError("bad snd_wnd")
        out.append(info if info is None or w is None else dataclasses.replace(info, snd_wnd=w))
    return out


def _with_delivered(rows: list[SideSample], delivered: object) -> list[SideSample]:
    """The rows with the peer's delivered counts (absent from older peers: rows unchanged)."""
    if delivered is None:
        return rows
    if not isinstance(delivered, list) or len(delivered) != len(rows):
        raise ValueError("delivered does not match the rows")
    out = []
    for row, d in zip(rows, delivered, strict=True):
        if d is not None and (not isinstance(d, int) or isinstance(d, bool) or d < 0):
            raise ValueError("bad delivered count")
        out.append(dataclasses.replace(row, delivered=d))
    return out


# A row's fields: every TCP_INFO field but the offered window, which goes apart from the
# rows (SideReport.to_json) so that a peer that reads 9-field rows still reads them.
ROW_FIELDS = tuple(f for f in TCP_INFO_FIELDS if f != "snd_wnd")


def _ti_json(ti: TcpInfoSample) -> list[int]:
    return [int(getattr(ti, f)) for f in ROW_FIELDS]


def _ti_from(row: object) -> TcpInfoSample:
    if not isinstance(row, list) or len(row) != len(ROW_FIELDS):
        raise ValueError("bad tcp_info row")
    return TcpInfoSample(**{f: int(v) for f, v in zip(ROW_FIELDS, row, strict=True)})


def thin(samples: Sequence[SideSample], limit: int) -> list[SideSample]:
    """At most `limit` samples, evenly spaced, always keeping the last."""
    if len(samples) <= limit:
        return list(samples)
    step = len(samples) / limit
    picked = [samples[int(i * step)] for i in range(limit - 1)]
    picked.append(samples[-1])
    return picked


def aggregate_tcp_info(infos: Sequence[TcpInfoSample]) -> TcpInfoSample | None:
    """Streams summed (cwnd, retransmits, rate, offered windows) or averaged (RTT, chrono
    counters)."""
    if not infos:
        return None
    n = len(infos)
    return TcpInfoSample(
        rtt_us=sum(i.rtt_us for i in infos) // n,
        rttvar_us=sum(i.rttvar_us for i in infos) // n,
        snd_cwnd=sum(i.snd_cwnd for i in infos),
        total_retrans=sum(i.total_retrans for i in infos),
        delivery_rate_bps=sum(i.delivery_rate_bps for i in infos),
        busy_time_us=sum(i.busy_time_us for i in infos) // n,
        rwnd_limited_us=sum(i.rwnd_limited_us for i in infos) // n,
        sndbuf_limited_us=sum(i.sndbuf_limited_us for i in infos) // n,
        snd_mss=max(i.snd_mss for i in infos),
        snd_wnd=sum(i.snd_wnd for i in infos),
    )


# ---------------------------------------------------------------------------- running


@dataclass
class _Stream:
    sock: socket.socket
    count: int = 0
    first: float | None = None
    end: float | None = None
    last_data: float | None = None  # receiver: when the last byte arrived (EOF may lag it)
    wrote_until: float | None = None  # sender: when it stopped writing new data
    error: str | None = None


class _StallWatch:
    """A stream is stalled when TCP makes no progress for `limit` seconds: on the sender no
    new bytes acknowledged, on the receiver no new data segments arriving. The application's
    own reads and writes are not the measure: a slow but live connection (loss recovery on
    a long path, RTO backoff) blocks them for seconds without the peer being gone."""

    def __init__(
        self, sock: socket.socket, clock: Callable[[], float], limit: float, counter: str
    ) -> None:
        self.sock, self.clock, self.limit, self.counter = sock, clock, limit, counter
        self.value = self._read()
        self.last_move = clock()

    def _read(self) -> int | None:
        try:
            value = read_tcp_info(self.sock).get(self.counter)
        except OSError:
            return None
        return int(value) if value is not None else None

    def moved(self) -> None:
        self.last_move = self.clock()

    def recent(self, now: float) -> bool:
        return now - self.last_move < self.limit

    def check(self) -> None:
        """After a timeout slice: raises TimeoutError once TCP itself has been still for
        the whole limit (or TCP_INFO is unreadable and the limit is over)."""
        value = self._read()
        if value is not None and value != self.value:
            self.value = value
            self.moved()
            return
        if not self.recent(self.clock()):
            raise TimeoutError


class DrainTooSlow(OSError):
    """The connection was alive but had not delivered its send buffer MAX_DRAIN_S after
    the duration."""


def _describe(exc: BaseException, stall: float) -> str:
    if isinstance(exc, DrainTooSlow):
        return f"still delivering {MAX_DRAIN_S:g} s after the duration (a very slow path)"
    if isinstance(exc, TimeoutError):
        return f"no progress for {stall:g} s: the peer stopped taking part"
    if isinstance(exc, (ConnectionResetError, BrokenPipeError, ConnectionAbortedError)):
        return "the peer closed the connection in the middle of the transfer"
    return f"socket error: {exc}"


def _safe_tcp_info(sock: socket.socket) -> TcpInfoSample | None:
    try:
        return read_tcp_info(sock).to_sample()
    except OSError:
        return None


def _safe_buffers(sock: socket.socket) -> tuple[int, int]:
    try:
        return buffers.get_buffers(sock)
    except OSError:
        return (0, 0)


Sampler = Callable[[SideSample], None]


def run_sender(
    socks: Sequence[socket.socket],
    *,
    duration_s: float | None,
    nbytes: int | None,
    drs_socks: Sequence[socket.socket] = (),
    plan: BufferPlan | None = None,
    clock: Callable[[], float] = time.monotonic,
    sample_interval: float = DEFAULT_SAMPLE_INTERVAL,
    stall_timeout: float = DEFAULT_STALL_TIMEOUT,
    max_seconds: float | None = None,
    stop: threading.Event | None = None,
    on_sample: Sampler | None = None,
    end: Literal["eof", "drain"] = "eof",
    steady: SteadyStop | None = None,
) -> SideReport:
    """Send on every socket until `duration_s` is over or `nbytes` (split over streams)
    have gone, then wait for the receiver to close (so the final TCP_INFO covers the whole
    transfer). With end="drain" (a far end that closes only when told on its own control
    connection, like iperf3) wait instead until every byte is acknowledged, and keep the
    sockets open. With `steady`, sending also ends once the rate has stopped growing
    (measure/engine/steady.py; the duration is then the cap). Never raises for peer failures:
    they land in report.error."""
    if duration_s is None and nbytes is None:
        raise TransferError("a transfer needs a duration or a byte count")
    stop = stop or threading.Event()
    enough = threading.Event()  # the rate is steady: stop sending, drain as usual
    streams = [_Stream(s) for s in socks]
    report = SideReport("sender", len(socks))
    report.congestion_control = congestion_control(socks[0]) if socks else ""
    payload = memoryview(bytearray(SEND_CHUNK))
    start = clock()
    limit_t = start + (duration_s if duration_s is not None else math.inf)
    if max_seconds is not None:
        limit_t = min(limit_t, start + max_seconds)
    shares: list[int | None] = [None] * len(socks)
    if nbytes is not None:
        base, extra = divmod(nbytes, len(socks))
        shares = [base + (1 if i < extra else 0) for i in range(len(socks))]

    watches = [_StallWatch(s, clock, stall_timeout, "bytes_acked") for s in socks]

    def send_one(i: int) -> None:
        st = streams[i]
        sock = st.sock
        left = shares[i]
        watch = watches[i]
        try:
            sock.settimeout(min(stall_timeout, STALL_POLL_S))
            st.first = clock()
            rebound = st.first  # when to size the unsent bound from the rate again
            chunk = SEND_CHUNK
            while not stop.is_set() and not enough.is_set() and clock() < limit_t:
                if clock() >= rebound:
                    room = send_room(sock, st.count)  # as an application is held: sendcap.py
                    if room == 0:
                        watch.check()
                        time.sleep(CAP_WAIT_S)
                        continue
                    chunk = min(SEND_CHUNK, room or SEND_CHUNK)
                    bound_unsent(sock)
                    rebound = clock() + UNSENT_EVERY_S
                try:
                    if left is not None:
                        if left <= 0:
                            break
                        n = sock.send(payload[: min(chunk, left)])
                        left -= n
                    else:
                        n = sock.send(payload[:chunk])
                except TimeoutError:
                    watch.check()
                    continue
                watch.moved()
                st.count += n
            st.wrote_until = clock()
            drain_end = max(clock(), limit_t) + MAX_DRAIN_S
            if end == "drain":
                _wait_acked(sock, watch, clock, drain_end, stop)
            else:
                sock.shutdown(socket.SHUT_WR)
                # The receiver closes after EOF: then every byte is acknowledged.
                while not stop.is_set():
                    try:
                        if not sock.recv(4096):
                            break
                    except TimeoutError:
                        watch.check()
                        if clock() > drain_end:
                            raise DrainTooSlow from None
            st.end = clock()
        except OSError as exc:
            st.error = _describe(exc, stall_timeout)
            st.end = clock()

    echo_errors: list[str] = []
    threads = [threading.Thread(target=send_one, args=(i,), daemon=True) for i in range(len(socks))]
    echo_stop = threading.Event()
    if plan is not None and plan.drs:
        for i, d in enumerate(drs_socks):

            def echo(i: int = i, d: socket.socket = d) -> None:
                err = run_echo(d, socks[i], echo_stop, plan.max_request, plan.force)
                if err:
                    echo_errors.append(err)

            threads.append(threading.Thread(target=echo, daemon=True))
    for t in threads:
        t.start()
    data_threads = threads[: len(socks)]
    next_sample = start + sample_interval
    detector = None
    if steady is not None:
        detector = SteadyDetector(steady.for_congestion_control(report.congestion_control), start)
    # Bounded even if a thread misbehaves: past the drain allowance, or stalled.
    hard_end = min(limit_t, start + 86400.0) + MAX_DRAIN_S + 2 * stall_timeout + 1.0
    while any(t.is_alive() for t in data_threads) and clock() < hard_end:
        # Wait on a thread that is still running: joining a finished one returns at once
        # and would spin this loop while a slower stream finishes.
        _join_any(data_threads, max(0.0, min(next_sample - clock(), 0.25)))
        now = clock()
        if now >= next_sample:
            next_sample = now + sample_interval
            report.samples.append(_sample(streams, now - start, tcp_info=True))
            if on_sample:
                on_sample(report.samples[-1])
            if detector is not None and not enough.is_set():
                acked, rtt, srtt = _acked(streams)
                # Both: the rate held (round by round) and the settled part the verdicts
                # read has samples enough after any repair (over the sampling windows).
                if detector.feed(now, acked, rtt, srtt) and _settled_stands(report.samples):
                    enough.set()
            for t in data_threads:
                if t.is_alive():
                    break
            else:
                break
    stop.set()
    echo_stop.set()
    for t in threads:
        t.join(timeout=1.0)
    report.samples.append(_sample(streams, clock() - start, tcp_info=True))
    ends = [s.end for s in streams if s.end is not None]
    report.seconds = (max(ends) if ends else clock()) - start
    wrote = [s.wrote_until for s in streams if s.wrote_until is not None]
    if nbytes is None and wrote:
        report.write_s = max(wrote) - start
    report.final_tcp_info = [ti for s in streams if (ti := _safe_tcp_info(s.sock))]
    return _finish(report, streams, plan, echo_errors)


def _finish(
    report: SideReport,
    streams: Sequence[_Stream],
    plan: BufferPlan | None,
    side_errors: Sequence[str],
) -> SideReport:
    """The bookkeeping both roles end with. A side channel's error (DRS, SBUF echo) only
    stops the adaptation; it is an error of the transfer only with a broken data stream."""
    report.bytes = sum(s.count for s in streams)
    report.max_sndbuf = max((x.sndbuf for x in report.samples), default=0)
    report.max_rcvbuf = max((x.rcvbuf for x in report.samples), default=0)
    errors = [s.error for s in streams if s.error]
    if errors:
        errors += side_errors
    report.error = errors[0] if errors else report.error
    if plan is not None:
        report.forced = plan.force and buffers.can_force()
        report.rcv_autotuning = plan.rcv_autotuning
    return report


# What a sender may keep written but not yet sent (TCP_NOTSENT_LOWAT), in time at the rate
# the network delivers: the send buffer still grows for the window, but the data queued
# behind it stays within this much, so a transfer ends this long plus a round trip after
# its last write. Without it, a slow lossy path took up to 35 s to drain an autotuned
# buffer after a 5 s test (Reno at 2 % loss, 231 ms, docs/check.md#time). A tenth of a
# second is a sampling interval, tens of thread wakeups: the pipe never runs dry.
UNSENT_S = 0.1
# Never below one GSO skb (the kernel's size goal), so slow paths still send full skbs.
# A buffer set large before the first byte (DRS, static) starts from this bound too: it
# would otherwise fill at once with what a slow path then takes tens of seconds to send.
UNSENT_FLOOR = 65536
# How often the sender sizes the bound again: in slow start the rate doubles every round
# trip, and at the floor the kernel wakes the writer every 32 KB (half the bound), which a
# thread keeps up with only to a few Gbit/s; sized every 10 ms the bound follows the rate.
UNSENT_EVERY_S = 0.01
INT_MAX = 2**31 - 1  # setsockopt takes a C int
TCP_NOTSENT_LOWAT = getattr(socket, "TCP_NOTSENT_LOWAT", 25)


def bound_unsent(sock: socket.socket) -> None:
    """Hold the stream's unsent data to UNSENT_S of the rate it delivers."""
    try:
        rate = read_tcp_info(sock).get("delivery_rate") or 0  # bytes per second
        lowat = min(INT_MAX, max(UNSENT_FLOOR, int(rate * UNSENT_S)))
        sock.setsockopt(socket.IPPROTO_TCP, TCP_NOTSENT_LOWAT, lowat)
    except OSError:
        return  # a closed stream: nothing left to bound


def _wait_acked(
    sock: socket.socket,
    watch: _StallWatch,
    clock: Callable[[], float],
    deadline: float,
    stop: threading.Event,
) -> None:
    """Until the send queue is empty (every byte acknowledged), the connection stalls, or
    the drain allowance is over."""
    while not stop.is_set():
        try:
            info = read_tcp_info(sock)
        except OSError:
            return
        if not info.get("unacked") and not info.get("notsent_bytes"):
            return
        if clock() > deadline:
            raise DrainTooSlow
        watch.check()
        time.sleep(0.005)


def _settled_stands(samples: Sequence[SideSample]) -> bool:
    """rates.counts_stand over the sender's delivered counts so far."""
    counts = [rates.Count(0.0, 0)]
    counts += [rates.Count(s.t, s.delivered) for s in samples if s.delivered is not None]
    srtts = [s.tcp_info.rtt_us for s in samples if s.tcp_info is not None and s.tcp_info.rtt_us]
    return rates.counts_stand(counts, min(srtts) / 1e6 if srtts else None)


def _acked(streams: Sequence[_Stream]) -> tuple[int, float | None, float | None]:
    """Bytes the network delivered so far over all streams, the smallest path RTT and the
    smallest smoothed RTT (TCP_INFO): what the steady-rate test measures. Not what the app
    wrote, which runs ahead by the send buffer, nor bytes_acked, which jumps when a
    retransmission fills a hole: delivered segments (SACKed ones included) x MSS, as BBR
    counts them."""
    total, rtts, srtts = 0, [], []
    for st in streams:
        try:
            info = read_tcp_info(st.sock)
        except OSError:
            continue
        total += (info.get("delivered") or 0) * (info.get("snd_mss") or 0)
        # The path's RTT, not the queue's: a round of the inflated RTT would let a
        # bufferbloated transfer run on for no news.
        rtt_us = info.get("min_rtt") or info.get("rtt")
        if rtt_us:
            rtts.append(rtt_us / 1e6)
        if info.get("rtt"):
            srtts.append(info["rtt"] / 1e6)
    return total, min(rtts) if rtts else None, min(srtts) if srtts else None


def _join_any(threads: Sequence[threading.Thread], timeout: float) -> None:
    for t in threads:
        if t.is_alive():
            t.join(timeout=timeout)
            return


def _sample(
    streams: Sequence[_Stream],
    t: float,
    *,
    tcp_info: bool = False,
    channels: Sequence[DrsReceiverChannel] = (),
) -> SideSample:
    """One sampling instant, for either role (as ndt-server's one measurer): bytes and
    buffers summed over streams, the sender's TCP_INFO aggregated, the receiver's DRS
    estimate."""
    bufs = [_safe_buffers(s.sock) for s in streams]
    infos = [ti for s in streams if (ti := _safe_tcp_info(s.sock))] if tcp_info else []
    bw: float | None = None
    rtt: float | None = None
    if channels:
        bw = sum(c.core.last_bandwidth_bps for c in channels)
        rtts = [r for c in channels if (r := c.core.rtt_s) is not None]
        rtt = min(rtts) if rtts else None
    return SideSample(
        t=t,
        bytes=sum(s.count for s in streams),
        rcvbuf=sum(b[1] for b in bufs),
        sndbuf=sum(b[0] for b in bufs),
        drs_bandwidth_bps=bw,
        drs_rtt_s=rtt,
        tcp_info=aggregate_tcp_info(infos),
        delivered=_acked(streams)[0] if tcp_info else _received(streams),
    )


def _received(streams: Sequence[_Stream]) -> int | None:
    total = 0
    for st in streams:
        try:
            got = read_tcp_info(st.sock).get("bytes_received")
        except OSError:
            return None
        if got is None:
            return None
        total += got
    return total


def run_receiver(
    socks: Sequence[socket.socket],
    *,
    drs_socks: Sequence[socket.socket] = (),
    plan: BufferPlan | None = None,
    drs_config: DrsConfig | None = None,
    clock: Callable[[], float] = time.monotonic,
    sample_interval: float = DEFAULT_SAMPLE_INTERVAL,
    stall_timeout: float = DEFAULT_STALL_TIMEOUT,
    max_seconds: float = 60.0,
    stop: threading.Event | None = None,
    on_sample: Sampler | None = None,
) -> SideReport:
    """Receive on every socket until each sees EOF; timed from the first byte on any
    stream to the last EOF (a parallel transfer ends with its slowest stream). With a DRS
    plan, runs the receiver's DRS controller per stream from the sampling loop."""
    stop = stop or threading.Event()
    streams = [_Stream(s) for s in socks]
    report = SideReport("receiver", len(socks))
    report.congestion_control = congestion_control(socks[0]) if socks else ""
    start = clock()

    def recv_one(i: int) -> None:
        st = streams[i]
        sock = st.sock
        buf = bytearray(RECV_CHUNK)
        view = memoryview(buf)
        watch = _StallWatch(sock, clock, stall_timeout, "data_segs_in")
        try:
            sock.settimeout(min(stall_timeout, STALL_POLL_S))
            n = -1
            while n and not stop.is_set():
                try:
                    n = sock.recv_into(view)
                except TimeoutError:
                    watch.check()
                    continue
                watch.moved()
                if n:
                    st.last_data = clock()
                if st.first is None:
                    st.first = st.last_data
                st.count += n
            st.end = clock()
        except OSError as exc:
            st.error = _describe(exc, stall_timeout)
            st.end = clock()
        finally:
            # Closing tells the sender every byte is in (it waits for this EOF).
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    channels: list[DrsReceiverChannel] = []
    if plan is not None and plan.drs:
        cfg = drs_config or DrsConfig(max_request=plan.max_request)
        # A data socket without a DRS socket (a far end with no SBUF channel, like iperf3)
        # still gets receiver-only DRS: its own buffer, RTT from TCP_INFO.
        drs_of = list(drs_socks) + [None] * (len(socks) - len(drs_socks))
        channels = [
            DrsReceiverChannel(s, d, cfg, clock, plan.force, plan.drs_from_bdp)
            for s, d in zip(socks, drs_of, strict=False)
        ]
    threads = [threading.Thread(target=recv_one, args=(i,), daemon=True) for i in range(len(socks))]
    for t in threads:
        t.start()
    next_sample = start + sample_interval
    hard_end = start + max_seconds + stall_timeout
    t0: float | None = None
    while any(t.is_alive() for t in threads):
        now = clock()
        if now > hard_end:
            report.error = report.error or "transfer ran past its time limit"
            stop.set()
            break
        wake = next_sample
        together = sum(s.count for s in streams) if len(streams) > 1 else None
        for i, ch in enumerate(channels):
            if streams[i].end is None:
                ch.poll(streams[i].count, together)
                wake = min(wake, ch.core.next_due())
        firsts = [s.first for s in streams if s.first is not None]
        if t0 is None and firsts:
            t0 = min(firsts)
        now = clock()
        if now >= next_sample:
            next_sample = now + sample_interval
            if t0 is not None:
                report.samples.append(_sample(streams, now - t0, channels=channels))
                if on_sample:
                    on_sample(report.samples[-1])
        wait = max(0.001, min(wake, next_sample) - clock())
        live = [c.drs_sock for c in channels if c.drs_sock is not None and not c.closed]
        if live:
            # Wake on an echo at once: the RTT is measured when we read it, so a late
            # read would inflate every estimate by our own polling delay.
            try:
                select.select(live, [], [], wait)
            except (OSError, ValueError):
                time.sleep(wait)
        else:
            _join_any(threads, wait)
    for t in threads:
        t.join(timeout=stall_timeout)
    firsts = [s.first for s in streams if s.first is not None]
    # Timed to the last byte: a far end that closes only after its own bookkeeping (iperf3
    # exchanges results first) would otherwise stretch the transfer.
    ends = [s.last_data or s.end for s in streams if s.end is not None]
    t0 = min(firsts) if firsts else None
    if t0 is not None and ends:
        report.samples.append(_sample(streams, max(ends) - t0, channels=channels))
        report.seconds = max(ends) - t0
    return _finish(report, streams, plan, [c.error for c in channels if c.error])
