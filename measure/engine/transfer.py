"""Client side of test transfers: one transfer per mode and direction against
`tcpwizard serve`, merged with the far end's report into ModeResults.

The receiver's byte count is the goodput (the sender's count includes what sits in its own
buffer); TCP_INFO comes from the sender, whichever end that is. A far end that vanishes
mid-transfer gives a ModeResult with `error` set and whatever this side measured.

Why one module of this size: the client side of every mode and the merge of both sides'
reports into one result; the rates it derives are in rates.py.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import socket
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tcpwizard.checks.window import MAX_RECOMMENDED_BUFFER
from tcpwizard.measure.engine import buffers, datapath, rates
from tcpwizard.measure.engine.attach import Opening, wanted
from tcpwizard.measure.engine.line_filled import TunedSkip
from tcpwizard.measure.engine.steady import SteadyStop
from tcpwizard.measure.farends.interface import (
    NO_HOOKS,
    Progress,
    ProgressFn,
    TransferHooks,
    TransferOptions,
)
from tcpwizard.measure.model import (
    Direction,
    Mode,
    ModeResult,
    TransferResult,
    TransferSample,
)
from tcpwizard.measure.observe import hostload
from tcpwizard.measure.observe.tcpinfo import congestion_control
from tcpwizard.measure.wire import spec
from tcpwizard.measure.wire.control import ControlClient
from tcpwizard.measure.wire.fields import message_type
from tcpwizard.measure.wire.protocol import PeerUnavailable, ProtocolError
from tcpwizard.measure.wire.session import ErrorReply
from tcpwizard.measure.wire.transfer_msgs import (
    TransferReady,
    TransferResultReply,
    TransferRunning,
    TransferStart,
)

ATTACH_MARGIN = 12.0  # serve waits 10 s for attaches; a little more before we give up


def static_request(rtt_s: float, rate_bps: float) -> int:
    """The SO_*BUF argument for a statically tuned (2 x BDP) buffer: Linux doubles the
    request, so asking for BDP yields a 2 x BDP buffer (what getsockopt then reports).
    Capped where the advice caps buffers (1 GiB of memory): setsockopt takes a C int, and
    no single socket should hold more."""
    bdp = int(rate_bps / 8.0 * rtt_s)
    return max(buffers.UNTUNED_BYTES, min(bdp, MAX_RECOMMENDED_BUFFER // 2))


def run_transfer(
    host: str,
    port: int,
    options: TransferOptions,
    hooks: TransferHooks = NO_HOOKS,
    *,
    secret: bytes | None = None,
    timeout: float = 5.0,
    control: ControlClient | None = None,
) -> TransferResult:
    """Run every mode in every direction of `options` against serve at host:port (or over
    an open `control` connection). Raises PeerUnavailable if serve cannot be reached at all;
    failures during a mode end that mode with `error` set and, since the control connection
    is then gone, the remaining modes with the same error."""
    if not 1 <= options.streams <= datapath.MAX_STREAMS:
        raise datapath.TransferError(f"streams must be 1-{datapath.MAX_STREAMS}")
    own = control is None
    ctrl = control if control is not None else ControlClient(host, port, secret, timeout)
    results: list[ModeResult] = []
    peer_cc = ""
    skip = TunedSkip(options.filled_lines)
    try:
        broken: str | None = None
        for direction in options.directions():
            for mode in options.modes_for(direction):
                if hooks.cancel is not None and hooks.cancel.is_set():
                    break  # cancelled: the modes not yet started are left out
                if skip.skip(mode, direction):
                    continue
                if broken is not None:
                    results.append(ModeResult.failed(mode, direction, options.streams, broken))
                    continue
                out = run_mode(ctrl, mode, direction, options, hooks)
                peer_cc = peer_cc or out.peer_congestion_control
                results.append(out.result)
                skip.saw(out.result)
                if not out.control_ok:
                    # serve closes the control connection after an error: nothing more
                    # can run on it, and a hung peer must not cost one timeout per mode.
                    broken = out.result.error or "lost the control connection to serve"
    finally:
        if own:
            ctrl.close()
    return gathered(results, options, peer_cc, ctrl.family, tuple(skip.left_out))


def gathered(
    results: Sequence[ModeResult],
    options: TransferOptions,
    peer_cc: str,
    family: int,
    left_out: tuple[str, ...] = (),
) -> TransferResult:
    """The modes' results as one run, beside this host's congestion control (what a new
    socket of the path's address family gets)."""
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        local_cc = congestion_control(probe)
    return TransferResult(
        modes=tuple(results),
        direction=options.direction,
        streams=options.streams,
        peer_congestion_control=peer_cc,
        local_congestion_control=local_cc,
        left_out=left_out,
    )


@dataclass(frozen=True)
class ModeOutcome:
    result: ModeResult
    peer_congestion_control: str
    control_ok: bool  # the control connection can carry another request


def run_mode(
    ctrl: ControlClient,
    mode: Mode,
    direction: Direction,
    options: TransferOptions,
    hooks: TransferHooks = NO_HOOKS,
) -> ModeOutcome:
    """One transfer over an open control connection; `cancel` ends it early (the result
    keeps what was measured until then)."""
    progress, sysctl_root, cancel = hooks.progress, hooks.sysctl_root, hooks.cancel
    local_limits = buffers.read_host_limits(sysctl_root)
    force = options.force and buffers.can_force()
    try:
        plan = datapath.plan_buffers(
            mode, local_limits, options.static_request, force, streams=options.streams
        )
    except datapath.TransferError as exc:
        # This mode cannot run (static without a BDP); the others still can.
        return ModeOutcome(ModeResult.failed(mode, direction, options.streams, str(exc)), "", True)
    stall = options.stall_timeout_s
    total_s = options.duration_s if options.nbytes is None else None
    try:
        start = TransferStart(
            mode=mode,
            direction=direction,
            streams=options.streams,
            duration_s=total_s,
            bytes=options.nbytes,
            static_request=options.static_request,
            force=options.force,
            sample_interval_s=options.sample_interval_s,
            stall_timeout_s=stall,
            until_steady=options.until_steady and total_s is not None,
        )
        opening = Opening(ctrl, wanted(plan, options.streams))
    except (PeerUnavailable, ProtocolError) as exc:
        return ModeOutcome(ModeResult.failed(mode, direction, options.streams, str(exc)), "", False)
    try:
        ready = TransferReady.from_wire(ctrl.request(start.to_wire()))
    except (PeerUnavailable, ProtocolError) as exc:
        opening.close()
        return ModeOutcome(ModeResult.failed(mode, direction, options.streams, str(exc)), "", False)
    session = ready.session
    peer_cc = ready.congestion_control
    # serve may have clamped the length to its limits; follow what it will do.
    duration = ready.duration_s
    nbytes = ready.bytes
    if duration is None and nbytes is None:
        duration = total_s
    data: list[socket.socket] = []
    drs: list[socket.socket] = []
    try:
        try:
            data, drs = opening.attach(session)
            for s in data:
                plan.postsetup(s, accepted=False)
            for d in drs:
                # SBUF lines are tiny: Nagle would hold them and inflate every RTT.
                d.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if direction == "down":
                # Our receiver starts when serve says it sends. An upload does not wait for
                # that word: its data follows the attach line on each connection and reaches
                # serve as serve starts reading, a round trip sooner (the collector takes
                # "running" before the result and stops the sender if serve refused).
                TransferRunning.from_wire(ctrl.recv(timeout=ATTACH_MARGIN))
        except (PeerUnavailable, ProtocolError) as exc:
            failed = ModeResult.failed(mode, direction, options.streams, str(exc))
            return ModeOutcome(failed, peer_cc, False)
        local, peer, err, control_ok = _run_local(
            ctrl, plan, direction, data, drs, duration, nbytes, options, progress, cancel
        )
    finally:
        for s in (*data, *drs):
            with contextlib.suppress(OSError):
                s.close()
    sender, receiver = (local, peer) if direction == "up" else (peer, local)
    result = merge(mode, direction, options.streams, sender, receiver, err)
    if progress:
        progress(Progress.done(result, duration, nbytes))
    return ModeOutcome(result, peer_cc, control_ok)


def _run_local(
    ctrl: ControlClient,
    plan: datapath.BufferPlan,
    direction: Direction,
    data: list[socket.socket],
    drs: list[socket.socket],
    duration: float | None,
    nbytes: int | None,
    options: TransferOptions,
    progress: ProgressFn | None,
    cancel: threading.Event | None = None,
) -> tuple[datapath.SideReport, datapath.SideReport | None, str | None, bool]:
    """Run our role, then collect the far end's report. The far end's report is awaited in
    a thread from the start, so a serve that dies is noticed even while we send."""
    mode = plan.mode
    live = rates.LiveRate()

    def on_sample(s: datapath.SideSample) -> None:
        if cancel is not None and cancel.is_set():
            stop.set()  # checked every sample interval (<= 250 ms)
        if progress is None:
            return
        rate = live_rate(live, s)
        progress(Progress(mode, direction, "sample", s.t, s.bytes, rate, duration, nbytes))

    if progress:
        progress(Progress(mode, direction, "start", 0.0, 0, 0.0, duration, nbytes))
    stop = threading.Event()
    peer_box: dict[str, Any] = {}
    # The longest the far end can legitimately take: the transfer, its drain, the stall.
    wait = (duration or 0.0) + datapath.MAX_DRAIN_S + 3 * options.stall_timeout_s + 10.0
    if duration is None:
        wait += spec.BYTE_LIMITED_MAX_S  # serve's max_duration bounds it on that side

    def collect() -> None:
        try:
            if direction == "up":
                TransferRunning.from_wire(ctrl.recv(timeout=ATTACH_MARGIN))
            peer_box["msg"] = ctrl.recv(timeout=wait)
        except (PeerUnavailable, ProtocolError) as exc:
            peer_box["error"] = str(exc)
            # A dead peer: stop our side now instead of waiting for stall timeouts.
            stop.set()

    collector = threading.Thread(target=collect, daemon=True)
    collector.start()
    load = hostload.sample_host()
    if direction == "up":
        local = datapath.run_sender(
            data,
            duration_s=duration,
            nbytes=nbytes,
            drs_socks=drs,
            plan=plan,
            sample_interval=options.sample_interval_s,
            stall_timeout=options.stall_timeout_s,
            stop=stop,
            on_sample=on_sample,
            steady=SteadyStop() if options.until_steady and nbytes is None else None,
        )
    else:
        local = datapath.run_receiver(
            data,
            drs_socks=drs,
            plan=plan,
            sample_interval=options.sample_interval_s,
            stall_timeout=options.stall_timeout_s,
            max_seconds=(duration or spec.BYTE_LIMITED_MAX_S)
            + datapath.MAX_DRAIN_S
            + options.stall_timeout_s,
            stop=stop,
            on_sample=on_sample,
        )
    local.host_load = load.stop()
    collector.join(timeout=wait)
    err: str | None = peer_box.get("error")
    peer: datapath.SideReport | None = None
    msg = peer_box.get("msg")
    control_ok = False
    if isinstance(msg, dict):
        error = ErrorReply.of(msg)
        if message_type(msg) == TransferResultReply.TYPE:
            control_ok = True
            try:
                peer = TransferResultReply.from_wire(msg).report
            except ProtocolError as exc:
                err = str(exc)
        elif error is not None:
            err = f"serve: {error.message}"
    elif err is None:
        err = "serve did not report the transfer in time"
    if err is not None and local.error is not None and "serve" not in local.error:
        err = f"{local.error} ({err})"
    elif err is None:
        err = local.error
    if peer is not None and peer.error and err is None:
        err = f"serve: {peer.error}"
    return local, peer, err, control_ok


def merge(
    mode: Mode,
    direction: Direction,
    streams: int,
    sender: datapath.SideReport | None,
    receiver: datapath.SideReport | None,
    error: str | None = None,
) -> ModeResult:
    """One ModeResult from the two sides' reports (either may be missing after a failure):
    goodput and receive buffers from the receiver, TCP_INFO and send buffers from the
    sender, matched by time."""
    notes: list[str] = []
    rows = receiver.samples if receiver is not None else []
    if receiver is None and sender is not None:
        rows = sender.samples
        notes.append("the receiver's report was lost: goodput is from bytes sent")
    snd_rows = sender.samples if sender is not None else []
    counted = [(x.t, x.delivered) for x in snd_rows if x.delivered is not None and x.tcp_info]
    if counted:
        counted.insert(0, (0.0, 0))  # nothing delivered when the sender started
    samples: list[TransferSample] = []
    prev_t = 0.0
    for r in rows:
        if r.t - prev_t <= 0:
            continue
        prev_t = r.t
        s = _nearest(snd_rows, r.t)
        delivered, by = _delivered(r, counted)
        samples.append(
            TransferSample(
                t_s=round(r.t, 4),
                goodput_mbps=0.0,  # set below, over a window of at least a round trip
                rcvbuf_bytes=r.rcvbuf if receiver is not None else 0,
                sndbuf_bytes=s.sndbuf if s is not None else 0,
                drs_bandwidth_mbps=None
                if r.drs_bandwidth_bps is None
                else r.drs_bandwidth_bps / 1e6,
                drs_rtt_ms=None if r.drs_rtt_s is None else r.drs_rtt_s * 1e3,
                tcp_info=s.tcp_info if s is not None else None,
                delivered_bytes=delivered,
                delivered_by=by,
            )
        )
    samples = with_window_rates(samples)
    main = receiver if receiver is not None else sender
    nbytes = main.bytes if main is not None else 0
    seconds = main.seconds if main is not None else 0.0
    mbps = nbytes * 8 / seconds / 1e6 if seconds > 0 else 0.0
    by_deadline = _delivered_while_sending(samples, sender.write_s if sender else None)
    if by_deadline is not None:
        mbps = by_deadline
    finals = sender.final_tcp_info if sender is not None else []
    retrans = sum(t.total_retrans for t in finals)
    rwnd = sndbuf_l = busy = None
    if finals and sender is not None and sender.seconds > 0:
        span = sender.seconds * 1e6
        rwnd = min(1.0, sum(t.rwnd_limited_us for t in finals) / len(finals) / span)
        sndbuf_l = min(1.0, sum(t.sndbuf_limited_us for t in finals) / len(finals) / span)
        busy = min(1.0, sum(t.busy_time_us for t in finals) / len(finals) / span)
    max_buf = receiver.max_rcvbuf if receiver is not None else 0
    rcv_auto = receiver.rcv_autotuning if receiver is not None else True
    if not rcv_auto:
        notes.append("SO_RCVBUF was set on the receiver: kernel autotuning was off for it")
    forced = any(r.forced for r in (sender, receiver) if r is not None)
    return ModeResult(
        mode=mode,
        direction=direction,
        streams=streams,
        bytes=nbytes,
        seconds=seconds,
        throughput_mbps=mbps,
        max_buffer_bytes=max_buf,
        retransmits=retrans,
        samples=tuple(samples),
        rwnd_limited=rwnd,
        sndbuf_limited=sndbuf_l,
        busy=busy,
        congestion_control=sender.congestion_control if sender is not None else "",
        forced=forced,
        error=error,
        rcv_autotuning=rcv_auto,
        bytes_sent=sender.bytes if sender is not None else None,
        notes=tuple(notes),
        sender_load=sender.host_load if sender is not None else None,
        receiver_load=receiver.host_load if receiver is not None else None,
        write_s=sender.write_s if sender is not None else None,
    )


def _delivered(r: datapath.SideSample, counted: Sequence[tuple[float, int]]) -> tuple[int, str]:
    """The bytes delivered by a sampling instant, and who counted them: the sender's
    TCP_INFO count (acknowledged and selectively acknowledged, the kernel's `delivered`)
    interpolated at that instant where the sender sampled it, else the receiver's kernel
    count, else its reads. The
    receiver's kernel counts only in-order bytes: through a loss recovery its count stands
    still while data keeps arriving, then jumps by all of it (1.8 MB in 0.1 s after a 0.7 s
    hole on a 20 Mbit/s lab path with a deep queue), and a rate over an interval that starts
    inside the hole reads above the line (24.5 on 20 Mbit/s). Every count comes from the
    sender's clock, so a rate's bytes and its time come from one clock."""
    if counted and counted[0][0] <= r.t:
        for (t0, b0), (t1, b1) in itertools.pairwise(counted):
            if t0 <= r.t <= t1 and t1 > t0:
                return round(b0 + (b1 - b0) * (r.t - t0) / (t1 - t0)), "sender"
        return counted[-1][1], "sender"  # past the sender's last sample: all it saw delivered
    return (r.delivered if r.delivered is not None else r.bytes), "receiver"


def _delivered_while_sending(
    samples: Sequence[TransferSample], write_s: float | None
) -> float | None:
    """A timed transfer's goodput, as iperf3 counts it: the bytes delivered by the time the
    sender stopped writing, over that time. What its send buffer held then arrives later at
    the full rate: counted, a mode with a 16 MB send buffer turned a 3 s test at 300 ms into
    4 s with its slow start diluted (DRS / autotune read 0.80 over own spans, 0.99-1.2 over
    equal ones). None when the samples do not reach that moment (a fixed byte count, a far
    end without the figure)."""
    if write_s is None or write_s <= 0:
        return None
    counts = rates.counts_of(samples)
    if write_s > counts[-1].t_s:
        return None
    return rates.until(counts, write_s)[-1].bytes * 8 / write_s / 1e6


def live_rate(live: rates.LiveRate, s: datapath.SideSample) -> float:
    """A live sample's rate from the bytes TCP delivered, over a round trip or more."""
    rtt = s.tcp_info.rtt_us / 1e6 if s.tcp_info is not None and s.tcp_info.rtt_us else None
    return live.add(s.t, s.delivered if s.delivered is not None else s.bytes, rtt or s.drs_rtt_s)


def with_window_rates(
    samples: Sequence[TransferSample], rtt_s: float | None = None
) -> list[TransferSample]:
    """Each sample's goodput over a window of at least a round trip (measure/engine/rates.py)
    instead of its own sampling interval, which aliases against TCP's bursts. `rtt_s`
    defaults to the sender's smallest RTT in the samples."""
    points = rates.sample_rates(samples, rtt_s)
    if len(points) != len(samples):
        return list(samples)
    return [
        dataclasses.replace(s, goodput_mbps=mbps)
        for s, (_, mbps) in zip(samples, points, strict=True)
    ]


def _nearest(rows: Sequence[datapath.SideSample], t: float) -> datapath.SideSample | None:
    if not rows:
        return None
    return min(rows, key=lambda r: abs(r.t - t))
