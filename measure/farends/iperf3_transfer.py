"""Test transfers against a stock `iperf3 -s`: iperf3's control protocol on the control
connection (measure/farends/iperf3_control.py), our own engine on the data sockets.

Up (we send): every mode sets our send buffer as planned, and iperf3's window parameter
tunes the far end's receive buffer the same way (`untuned` 64 KB, `static` 2 x BDP); the
goodput is what the server received, TCP_INFO comes from our sender.
Down (iperf3 --reverse, the server sends): our receiving socket follows the plan, `drs`
included (its receiver side needs no help from the sender); the server's own intervals
(bytes, retransmits, cwnd, and RTT when it runs with -J) fill the sender's columns.
"""

from __future__ import annotations

import contextlib
import dataclasses
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from tcpwizard.measure.engine import buffers, datapath, rates
from tcpwizard.measure.engine.steady import SteadyDetector, SteadyStop
from tcpwizard.measure.engine.transfer import gathered, live_rate, merge, with_window_rates
from tcpwizard.measure.farends.interface import (
    NO_HOOKS,
    Progress,
    TransferHooks,
    TransferOptions,
)
from tcpwizard.measure.farends.iperf3_control import (
    ClientStreamResult,
    Iperf3Error,
    Iperf3Params,
    Iperf3Session,
    ServerResults,
    stream_ids,
)
from tcpwizard.measure.model import (
    Direction,
    Mode,
    ModeResult,
    TcpInfoSample,
    TransferResult,
    TransferSample,
)
from tcpwizard.measure.observe.handshake import HandshakeFacts, read_handshake
from tcpwizard.measure.observe.tcpinfo import read_tcp_info
from tcpwizard.measure.wire import spec

# The modes iperf3 can take part in, per direction. Upload DRS needs the receiver's half
# of DRS on the far end, which only serve has.
IPERF3_MODES: dict[Direction, tuple[Mode, ...]] = {
    "up": ("untuned", "autotune", "static", "overprovisioned"),
    "down": ("untuned", "autotune", "static", "overprovisioned", "drs"),
}
END_MARGIN_S = 15.0
# A download judged from our receiver sees arrivals in bursts (a filled hole releases a
# window of data at once): its second half needs a dozen samples for a robust median.
DOWNLOAD_MIN_S = 2.0  # results exchange after the test: a few RTTs, generously


def iperf3_window(mode: Mode, plan: datapath.BufferPlan) -> int | None:
    """iperf3's -w for a mode: the same buffer the far end would have in our engine."""
    if mode in ("untuned", "static"):
        return plan.pre_rcvbuf
    if mode == "overprovisioned":
        return None  # the far end's own maximum is unknown; its autotuning goes there
    return None


def run_iperf3_transfer(
    address: str,
    port: int,
    options: TransferOptions,
    hooks: TransferHooks = NO_HOOKS,
    *,
    timeout: float = 5.0,
    on_handshake: Callable[[HandshakeFacts | None], None] | None = None,
) -> TransferResult:
    """Every mode of `options` that iperf3 can run, one iperf3 test each. Raises
    Iperf3Error when the first test cannot run at all (nothing there, not iperf3, busy,
    authentication): then nothing was measured. A later refusal ends the remaining modes
    with that error; a one-off server (`iperf3 -s -1`) answers the first test only."""
    if not 1 <= options.streams <= datapath.MAX_STREAMS:
        raise datapath.TransferError(f"streams must be 1-{datapath.MAX_STREAMS}")
    results: list[ModeResult] = []
    target = Iperf3Target(address, port, hooks, timeout, on_handshake)
    peer_cc = ""
    broken: str | None = None
    tried = False  # a test got as far as the server's answer
    for direction in options.directions():
        for mode in options.modes_for(direction):
            if hooks.cancel is not None and hooks.cancel.is_set():
                break
            if mode not in IPERF3_MODES[direction]:
                results.append(
                    ModeResult.failed(
                        mode, direction, options.streams, _unsupported(mode, direction)
                    )
                )
                continue
            if broken is not None:
                results.append(ModeResult.failed(mode, direction, options.streams, broken))
                continue
            try:
                result, cc = run_iperf3_mode(target, mode, direction, options)
            except Iperf3Error as exc:
                if not tried:
                    raise  # nothing there spoke iperf3 yet: the caller decides what that means
                result, cc = ModeResult.failed(mode, direction, options.streams, str(exc)), ""
                if exc.kind in ("busy", "auth", "refused", "not-iperf3") or (
                    exc.kind == "closed" and "refused" in str(exc)
                ):
                    broken = str(exc)
                    if results and exc.kind == "closed":
                        broken += " (a one-off server, iperf3 -s -1, runs a single test)"
            tried = True
            peer_cc = peer_cc or cc
            results.append(result)
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    return gathered(results, options, peer_cc, family)


def _unsupported(mode: Mode, direction: Direction) -> str:
    if mode == "drs" and direction == "up":
        return "drs upload needs tcpwizard serve on the far end (its receiver sizes the window)"
    return f"{mode} is not available against iperf3"


@dataclass(frozen=True)
class Iperf3Target:
    """Where the iperf3 server is, and what every test against it reports to."""

    address: str
    port: int
    hooks: TransferHooks = NO_HOOKS
    timeout: float = 5.0
    on_handshake: Callable[[HandshakeFacts | None], None] | None = None


def run_iperf3_mode(
    target: Iperf3Target, mode: Mode, direction: Direction, options: TransferOptions
) -> tuple[ModeResult, str]:
    """One iperf3 test for one mode; returns the result and the server's congestion
    control. Raises Iperf3Error when the test could not start."""
    limits = buffers.read_host_limits(target.hooks.sysctl_root)
    force = options.force and buffers.can_force()
    try:
        plan = datapath.plan_buffers(
            mode, limits, options.static_request, force, streams=options.streams
        )
    except datapath.TransferError as exc:
        return ModeResult.failed(mode, direction, options.streams, str(exc)), ""
    duration = options.duration_s if options.nbytes is None else None
    params = Iperf3Params(
        duration_s=duration or 0.0,
        streams=options.streams,
        reverse=direction == "down",
        window=iperf3_window(mode, plan),
        nbytes=options.nbytes,
    )
    stop = threading.Event()
    with Iperf3Session(target.address, target.port, params, target.timeout) as session:
        ctrl = session.open()
        if target.on_handshake is not None:
            target.on_handshake(
                read_handshake(ctrl, port=target.port, sysctl_root=target.hooks.sysctl_root)
            )
        data = session.attach(plan.presetup)
        for s in data:
            plan.postsetup(s, accepted=False)
        on_sample = _sampler(mode, direction, duration, options.nbytes, target.hooks, stop)
        if target.hooks.progress:
            target.hooks.progress(
                Progress(mode, direction, "start", 0.0, 0, 0.0, duration, options.nbytes)
            )
        if direction == "up":
            local = datapath.run_sender(
                data,
                duration_s=duration,
                nbytes=options.nbytes,
                plan=plan,
                sample_interval=options.sample_interval_s,
                stall_timeout=options.stall_timeout_s,
                stop=stop,
                on_sample=on_sample,
                end="drain",
                steady=SteadyStop() if options.until_steady and duration is not None else None,
            )
            server, err = _finish(session, local, sender=True)
            result = _upload_result(mode, options.streams, local, server, err)
        else:
            local, server, err = _receive(session, data, plan, duration, options, stop, on_sample)
            result = _download_result(mode, options.streams, local, server, err, data)
    if target.hooks.progress:
        target.hooks.progress(Progress.done(result, duration, options.nbytes))
    return result, server.congestion if server else ""


def _sampler(
    mode: Mode,
    direction: Direction,
    duration: float | None,
    nbytes: int | None,
    hooks: TransferHooks,
    stop: threading.Event,
) -> datapath.Sampler:
    live = rates.LiveRate()
    progress, cancel = hooks.progress, hooks.cancel

    def on_sample(s: datapath.SideSample) -> None:
        if cancel is not None and cancel.is_set():
            stop.set()
        if progress is None:
            return
        rate = live_rate(live, s)
        progress(Progress(mode, direction, "sample", s.t, s.bytes, rate, duration, nbytes))

    return on_sample


def _finish(
    session: Iperf3Session, local: datapath.SideReport, sender: bool
) -> tuple[ServerResults | None, str | None]:
    """TEST_END and the results exchange; what went wrong instead, if anything."""
    share = local.bytes // max(1, local.streams)
    ours = [ClientStreamResult(i, share, 0, local.seconds) for i in stream_ids(local.streams)]
    try:
        session.end()
        return session.results(ours, sender, local.congestion_control), None
    except Iperf3Error as exc:
        return None, str(exc)


def _receive(
    session: Iperf3Session,
    data: list[socket.socket],
    plan: datapath.BufferPlan,
    duration: float | None,
    options: TransferOptions,
    stop: threading.Event,
    on_sample: datapath.Sampler,
) -> tuple[datapath.SideReport, ServerResults | None, str | None]:
    """Receive while a second thread ends the test on time and exchanges the results; the
    receiver keeps reading meanwhile, so the server never blocks on a full window."""
    box: dict[str, object] = {}
    started = time.monotonic()
    received = [0]

    def sample(s: datapath.SideSample) -> None:
        received[0] = s.bytes
        # The sender is iperf3's: the receiver judges the rate (bytes that arrived, per
        # round trip of our own RTT estimate) and ends the test once it is steady.
        if detector is not None and detector.feed(s.t, s.bytes, _rcv_rtt_s(data)):
            settled.set()
        on_sample(s)

    detector = (
        SteadyDetector(SteadyStop(min_s=DOWNLOAD_MIN_S), 0.0)
        if options.until_steady and duration is not None
        else None
    )
    settled = threading.Event()

    def over() -> bool:
        if options.nbytes is not None:
            return received[0] >= options.nbytes
        if settled.is_set():
            return True
        return duration is not None and time.monotonic() - started >= duration

    def control() -> None:
        # The client ends an iperf3 test, by time or by bytes received.
        while not stop.is_set() and not over():
            time.sleep(0.01)
        stub = datapath.SideReport("receiver", len(data))
        box["result"] = _finish(session, stub, sender=False)
        for s in data:  # the server closes them after IPERF_DONE; we need not wait
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RD)

    ctl = threading.Thread(target=control, daemon=True)
    ctl.start()
    max_s = (duration or spec.BYTE_LIMITED_MAX_S) + datapath.MAX_DRAIN_S + options.stall_timeout_s
    local = datapath.run_receiver(
        data,
        plan=plan,
        sample_interval=options.sample_interval_s,
        stall_timeout=options.stall_timeout_s,
        max_seconds=max_s,
        stop=stop,
        on_sample=sample,
    )
    stop.set()
    ctl.join(timeout=END_MARGIN_S + session.timeout)
    got = box.get("result")
    server, err = got if isinstance(got, tuple) else (None, "iperf3 did not end the test")
    return local, server, err


def _as_delivered(local: datapath.SideReport) -> datapath.SideReport:
    """Each sample's bytes as TCP delivered them, where the sample knows."""
    rows = [
        s if s.delivered is None else dataclasses.replace(s, bytes=s.delivered)
        for s in local.samples
    ]
    return dataclasses.replace(local, samples=rows)


def _upload_result(
    mode: Mode,
    streams: int,
    local: datapath.SideReport,
    server: ServerResults | None,
    err: str | None,
) -> ModeResult:
    # Goodput rows from what the network delivered: the app's 1 MiB writes would show as
    # steps of a whole chunk per sample.
    base = merge(mode, "up", streams, _as_delivered(local), None, err or local.error)
    notes = [n for n in base.notes if "receiver's report" not in n]
    if server is None or server.seconds <= 0:
        notes.append("the iperf3 server's count is missing: goodput is from bytes sent")
        return dataclasses.replace(base, notes=tuple(notes))
    notes.append("goodput: bytes the iperf3 server received, over its own test time")
    return dataclasses.replace(
        base,
        bytes=server.bytes,
        seconds=server.seconds,
        throughput_mbps=server.bytes * 8 / server.seconds / 1e6,
        notes=tuple(notes),
    )


def _download_result(
    mode: Mode,
    streams: int,
    local: datapath.SideReport,
    server: ServerResults | None,
    err: str | None,
    data: list[socket.socket],
) -> ModeResult:
    # Goodput rows from what TCP received in order: our app's reads lag behind whenever
    # the reader is not scheduled, and catch up in bursts.
    base = merge(mode, "down", streams, None, _as_delivered(local), err or local.error)
    if server is None:
        return base
    mss = _rcv_mss(data)
    # The server's RTT now stands beside each sample: the windows can be a round trip.
    samples = tuple(with_window_rates([_with_server(s, server, mss) for s in base.samples]))
    notes = (*base.notes, *server.notes)
    return dataclasses.replace(
        base,
        samples=samples,
        retransmits=server.retransmits or 0,
        congestion_control=server.congestion,
        bytes_sent=server.bytes,
        notes=notes,
    )


def _rcv_rtt_s(data: list[socket.socket]) -> float | None:
    """The receiver's RTT estimate (TCP_INFO rcv_rtt), for the steady-rate rounds."""
    try:
        rtt = read_tcp_info(data[0]).get("rcv_rtt") if data else None
    except OSError:
        return None
    return rtt / 1e6 if rtt else None


def _rcv_mss(data: list[socket.socket]) -> int:
    for s in data:
        try:
            mss = read_tcp_info(s).get("rcv_mss")
        except OSError:
            continue
        if mss:
            return mss
    return 1448


def _with_server(s: TransferSample, server: ServerResults, mss: int) -> TransferSample:
    """The server's interval covering this sample, as the sender's TCP_INFO would read:
    RTT and cwnd (iperf3 reports cwnd in bytes), retransmits so far. The chrono counters are
    not in iperf3's output and stay 0."""
    done = [iv for iv in server.intervals if iv.end_s <= s.t_s + 1e-6]
    cover = next((iv for iv in server.intervals if iv.start_s <= s.t_s < iv.end_s), None)
    iv = cover or (done[-1] if done else None)
    if iv is None:
        return s
    retrans = sum(x.retransmits or 0 for x in done)
    return dataclasses.replace(
        s,
        tcp_info=TcpInfoSample(
            rtt_us=iv.rtt_us or 0,
            rttvar_us=0,
            snd_cwnd=(iv.snd_cwnd or 0) // max(1, mss),
            total_retrans=retrans,
            delivery_rate_bps=0,
            busy_time_us=0,
            rwnd_limited_us=0,
            sndbuf_limited_us=0,
            snd_mss=mss,
        ),
    )
