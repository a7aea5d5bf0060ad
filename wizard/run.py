"""The pipeline of `check HOST`: audit -> peer facts -> probe -> transfer -> diagnose.

Used by the CLI and the TUI alike (one implementation). Progress goes out as Events through a
callback, so the CLI can draw bars and the TUI can post messages from its worker thread; a
`cancel` event stops the run between stages.

Why one module of this size: the stages of the check in the order they run, so the pipeline
reads top to bottom; each stage's work is in its own package.
"""

from __future__ import annotations

import contextlib
import dataclasses
import socket
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Literal

from tcpwizard.advice import guard, idle_follow_up, idle_loss
from tcpwizard.advice.capacity_view import line_known
from tcpwizard.advice.diagnose import Diagnosis, Evidence, diagnose
from tcpwizard.advice.handshake_findings import handshake_findings, unaudited_peer_fixes
from tcpwizard.advice.path_advice import PathAdvice, path_advice
from tcpwizard.advice.shortfall import fell_short
from tcpwizard.advice.snippets import setsockopt_fix
from tcpwizard.checks.audit import audit
from tcpwizard.checks.facts import HostFacts, audit_facts
from tcpwizard.checks.model import BdpTarget, Finding, Fix, HostAudit, HostRole
from tcpwizard.checks.window import recommended_buffer
from tcpwizard.context import Context
from tcpwizard.documents import path_outcome
from tcpwizard.exitcodes import ExitCode, TcpWizardError, Unavailable
from tcpwizard.measure.engine.datapath import MAX_STREAMS
from tcpwizard.measure.engine.steady import cap_s as steady_cap_s
from tcpwizard.measure.engine.transfer import static_request
from tcpwizard.measure.farends import registry
from tcpwizard.measure.farends.interface import (
    FarEnd,
    FarEndChoice,
    FarEndError,
    TransferHooks,
    TransferOptions,
)
from tcpwizard.measure.farends.interface import Progress as TransferProgress
from tcpwizard.measure.model import (
    CapacityEstimate,
    IdleLoss,
    Mode,
    ModeResult,
    PathEstimate,
    TransferResult,
)
from tcpwizard.measure.model import Direction as Way
from tcpwizard.measure.observe.handshake import HandshakeFacts
from tcpwizard.measure.observe.tsg_transfers import TransferCapture, TransferRecorder
from tcpwizard.measure.probes.hop_model import PathHops
from tcpwizard.measure.probes.hops import PathOptions, trace
from tcpwizard.measure.wire import spec
from tcpwizard.measure.wire.protocol import AuthFailed, PeerUnavailable
from tcpwizard.outcome import Outcome, exit_code
from tcpwizard.report import FarEndInfo, Report, TargetInfo, severities
from tcpwizard.timing import StageClock, check_timing

Stage = Literal["audit", "peer", "probe", "transfer", "diagnose", "done"]
Direction = Literal["up", "down", "both"]


class Cancelled(TcpWizardError):
    exit_code = ExitCode.INTERRUPTED


@dataclass(frozen=True)
class CheckRequest:
    host: str
    port: int = spec.SERVE_PORT
    secret: bytes | None = None
    tcp_port: int | None = None
    modes: tuple[Mode, ...] | None = None  # None: chosen for the question (default_modes)
    streams: int = 1
    duration_s: float | None = None
    nbytes: int | None = None
    direction: Direction | None = None  # None: both ways, see spec.REVERSE_MODES
    quick: bool = False
    force_buffers: bool = False
    bdp_hint: BdpTarget | None = None  # --rtt/--bandwidth: used until the path is measured
    # Which far end to use: "auto" walks measure/farends/registry.py (serve, then iperf3,
    # then the open --tcp-port).
    far_end: FarEndChoice = "auto"
    iperf3_port: int = spec.IPERF3_PORT
    allow_predicted: bool = False  # a verdict without a transfer may exit 0-2
    url: str | None = None  # check URL: a web server's downloads (host is the URL's host)
    available: bool = False  # --avail: what cross traffic leaves free (serve far ends)
    hops: PathOptions | None = None  # --hops: probe the hops as `tcpwizard path` does
    # `tui --capture`: the transfers under tcpdump, for each one's time-sequence graph
    capture: bool = False


@dataclass(frozen=True)
class Event:
    stage: Stage
    message: str
    transfer: TransferProgress | None = None
    path: PathEstimate | None = None
    local: HostAudit | None = None
    peer: HostAudit | None = None


EventFn = Callable[[Event], None]
StageFn = Callable[..., None]


def resolve(host: str) -> str:
    """The first address of `host` (IPv4 or IPv6 literal or name); one-line error if none."""
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        reason = exc.args[1] if isinstance(exc, socket.gaierror) and len(exc.args) > 1 else exc
        raise Unavailable(f"cannot resolve {host!r}: {reason}") from None
    return str(infos[0][4][0])


def audit_peer(
    facts: HostFacts | None, target: BdpTarget | None, streams: int = 1
) -> tuple[HostAudit | None, str | None]:
    """The far end's audit from its facts; facts the checks cannot use (a broken or hostile
    serve) leave the check peerless instead of stopping it."""
    if facts is None:
        return None, None
    try:
        return audit_facts(facts, target, streams=streams), None
    except (TcpWizardError, ValueError, TypeError, ArithmeticError) as exc:
        return None, f"the far end's settings could not be judged: {exc}"


def measured_target(path: PathEstimate, hint: BdpTarget | None) -> BdpTarget | None:
    if path.capacity is None or path.rtt.min <= 0:
        return hint
    return BdpTarget(path.rtt.min / 1e3, path.capacity.mbps * 1e6, "measured")


def default_modes(
    req: CheckRequest, far: FarEnd | None, target: BdpTarget | None
) -> tuple[tuple[Mode, ...], tuple[Mode, ...] | None]:
    """The modes each way when none were asked for: what applications get and one tuned
    mode, chosen from what the far end can take part in. The mode an ordinary application
    gets comes first (a one-off iperf3 server answers only the first test)."""
    if req.quick:
        return spec.QUICK_MODES, None if req.direction else spec.REVERSE_MODES
    up: tuple[Mode, ...] = spec.DEFAULT_MODES
    back: tuple[Mode, ...] = spec.REVERSE_MODES
    if far is not None and not far.abilities.drs_channel:
        # Without serve's receiver DRS cannot size the far end's window: a static 2 x BDP
        # (iperf3 -w) is the tuned upload; downloads size our own receiver.
        tuned: Mode = "static" if target is not None else "overprovisioned"
        up = ("autotune", "untuned", tuned)
        back = ("autotune", "static" if target is not None else "drs")
        if far.abilities.down_sizes_itself:  # our receiver's DRS sizes itself to the path
            back = ("autotune", "drs")
    return up, None if req.direction else back


def transfer_options(
    req: CheckRequest, target: BdpTarget | None, far: FarEnd | None = None
) -> TransferOptions:
    """The transfers to run against `far` (serve's full set of modes when None)."""
    modes, reverse = (req.modes, None) if req.modes else default_modes(req, far, target)
    duration = req.duration_s
    steady = duration is None and req.nbytes is None
    if steady and far is not None and not far.abilities.steady_end:
        steady = False  # this far end cannot end a transfer early
        duration = spec.QUICK_DURATION_S if req.quick else spec.FIXED_DURATION_S
    if steady and req.quick:
        duration = spec.QUICK_DURATION_S
    elif steady:
        # Counted in round trips on a long path (measure/engine/steady.py): a measured or
        # given path's BDP says how long slow start and its overshoot's repair take.
        path = target if target is not None and target.source != "default" else None
        duration = steady_cap_s(
            spec.STEADY_CAP_S, path.rtt_s if path else None, path.bdp_bytes if path else None
        )
    return TransferOptions(
        modes=modes,
        streams=req.streams,
        direction=req.direction or "both",
        reverse_modes=reverse,
        duration_s=duration,
        nbytes=req.nbytes,
        static_request=static_request(target.rtt_s, target.rate_bps) if target else None,
        force=req.force_buffers,
        until_steady=steady,
        # --quick: both ways at once where the far end can, one transfer's time for two.
        at_once=req.quick and far is not None and far.abilities.both_at_once,
    )


def _app_fixes(
    result: TransferResult | None, target: BdpTarget | None, ram: int | None
) -> tuple[Fix, ...]:
    """setsockopt advice for applications that size their own buffers (the untuned mode
    stands for them), for whichever end receives and sends."""
    if result is None or target is None:
        return ()
    size = recommended_buffer(target, ram) // 2  # Linux doubles the request
    fixes: list[Fix] = []
    for m in result.modes:
        if m.mode != "untuned":
            continue
        receiver: HostRole = "peer" if m.direction == "up" else "local"
        sender: HostRole = "local" if m.direction == "up" else "peer"
        fixes.append(setsockopt_fix("SO_RCVBUF", size, receiver))
        fixes.append(setsockopt_fix("SO_SNDBUF", size, sender))
    return tuple(dict.fromkeys(fixes))


def verdict_outcome(
    diag: Diagnosis, local: HostAudit, peer: HostAudit | None, measured: bool = True
) -> Outcome:
    """What a diagnosis says, for its exit code: the verdict's limit and wizard gap, and
    both audits' findings for when no limit is named (a prediction is never OK)."""
    v = diag.verdict
    return Outcome(
        limits=(v.limiting_factor,),
        current_mbps=v.wizard_gap.current_mbps,
        tuned_mbps=v.wizard_gap.tuned_mbps,
        findings=severities(local, peer),
        unmeasured=not measured,
    )


def reach_of(req: CheckRequest, address: str, ctx: Context) -> registry.Reach:
    """Where the far end is and how the registry's far ends may reach it."""
    return registry.Reach(
        host=req.host,
        address=address,
        sysctl_root=ctx.sysctl_root,
        serve_port=req.port,
        secret=req.secret,
        iperf3_port=req.iperf3_port,
        tcp_port=req.tcp_port,
        url=req.url,
        both_ways=req.quick and req.direction is None and not req.modes,
    )


def choose_far_end(req: CheckRequest, address: str, ctx: Context) -> tuple[FarEnd, list[str]]:
    """The best far end that answers, in the registry's order (serve, iperf3, open TCP
    port; a URL names a web server). An explicit choice runs exactly that one. iperf3
    cannot be asked whether it is there without costing a one-off server its test, so it
    is tried by the first transfer."""
    return registry.choose(reach_of(req, address, ctx), req.far_end)


@dataclass
class _Run:
    """What the stages have found so far (one check's working state)."""

    req: CheckRequest
    ctx: Context
    address: str
    far: FarEnd
    notes: list[str]
    local: HostAudit | None = None
    facts: HostFacts | None = None
    peer: HostAudit | None = None
    path: PathEstimate | None = None
    target: BdpTarget | None = None
    transfer: TransferResult | None = None
    error: str | None = None
    hops: tuple[PathHops, PathAdvice] | None = None
    capture: TransferCapture | None = None
    # The far end's answer to "your settings", asked while this host's audit ran.
    facts_asked: tuple[HostFacts | None, str | None] | None = None


def _stage_audit_and_reach(req: CheckRequest, ctx: Context, address: str, stage: StageFn) -> _Run:
    """This host's audit while the far end is reached: reaching it takes round trips (a
    connect, a hello), the audit reads this host's own files meanwhile."""
    stage("audit", "auditing this host")
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="audit") as pool:
        local = pool.submit(audit, ctx, address, req.bdp_hint)
        far, notes = choose_far_end(req, address, ctx)
        try:
            # The far end's settings travel while this host's audit still reads its files
            # (a round trip and the far end's own audit: 0.2 s at 100 ms).
            facts = far.facts()
            own = local.result()
        except BaseException:
            far.close()
            raise
    run = _Run(req, ctx, address, far, notes)
    run.local = own
    run.facts_asked = facts
    stage("audit", "local audit done", local=run.local)
    return run


def _stage_peer(run: _Run, stage: StageFn) -> None:
    stage("peer", f"asking {run.req.host} ({run.far.describe()}) for its settings")
    facts, why_not = run.facts_asked if run.facts_asked is not None else run.far.facts()
    if why_not:
        run.notes.append(why_not)
    run.peer, why_bad = audit_peer(facts, run.req.bdp_hint, run.req.streams)
    if why_bad:
        run.notes.append(why_bad)
    run.facts = facts if not why_bad else None
    stage("peer", "peer audit done" if run.peer else why_not or why_bad or "", peer=run.peer)


def _stage_hops(run: _Run, opts: PathOptions, stage: StageFn) -> None:
    """The hops with `path`'s own code, before the transfers: a PMTU black hole is named
    even when the transfers then stall."""
    stage("probe", f"hops: probing the path to {run.req.host} (at most {opts.max_time_s:g} s)")
    if opts.syn_port is None:  # the SYNs per hop go where the transfers will
        opts = dataclasses.replace(opts, syn_port=run.far.port)
    hops = trace(run.req.host, opts)
    run.hops = hops, path_advice(hops)


def with_hops(report: Report, hops: PathHops, adv: PathAdvice) -> Report:
    """The hops section, its fixes beside the check's, and the worse exit code of the two
    (a PMTU black hole is critical whatever the transfers said)."""
    fixes = tuple(dict.fromkeys(report.fixes + tuple(x for f in adv.findings for x in f.fixes)))
    code = exit_code(Outcome(given=report.exit_code, parts=(exit_code(path_outcome(hops, adv)),)))
    return dataclasses.replace(report, hops=hops, hops_advice=adv, fixes=fixes, exit_code=code)


def _stage_probe(run: _Run, stage: StageFn, emit: EventFn) -> None:
    stage("probe", "measuring RTT and bottleneck capacity")
    budget = spec.QUICK_PROBE_BUDGET_S if run.req.quick else spec.PROBE_BUDGET_S
    try:
        # Within the configured line rate from the start: buffers are sized from it.
        probed = run.far.probe(budget, progress=lambda m: emit(Event("probe", m)))
        run.path = guard.guard_path(probed, guard.bounds_for(None, None))
    except AuthFailed:
        raise
    except PeerUnavailable as exc:
        if not run.far.abilities.transfers:
            # Nothing answered: the path is unknown, but the audit of the route stands.
            run.error = f"{run.req.host} did not answer any probe: {exc}"
            run.notes.append(run.error)
        else:
            run.notes.append(f"probe: {exc}; the transfers will show the path")
    run.target = run.req.bdp_hint
    if run.path is not None:
        run.notes.extend(run.path.notes)
        run.target = measured_target(run.path, run.req.bdp_hint)
        stage("probe", "path measured", path=run.path)


def _stage_available(run: _Run, stage: StageFn, why: str = "", direction: Way = "up") -> None:
    """The available bandwidth beside the capacity that way (serve's reflector only), asked
    for (--avail) or because a transfer fell short (advice/shortfall.py); the verdict
    `cross-traffic` needs it."""
    path = run.path
    cap = path.capacity_for(direction) if path else None
    if path is None or cap is None or not run.far.abilities.reflector:
        note = "available bandwidth: needs tcpwizard serve and a measured capacity"
        if not why and note not in run.notes:  # asked for: say why not, once
            run.notes.append(note)
        return
    way = "" if direction == "up" else " on the way back"
    stage("probe", f"measuring what cross traffic leaves free{way} (periodic streams)")
    if why:
        run.notes.append(f"available bandwidth{way} measured: {why}")
    try:
        av = run.far.available(
            cap.mbps * 1e6, path.rtt.min / 1e3, idle_loss.random_share(path), direction
        )
    except (OSError, PeerUnavailable) as exc:
        run.notes.append(f"available bandwidth{way} not measured: {exc}")
        return
    if av.note:
        run.notes.append(f"available bandwidth{way}: {av.note}")
    if direction == "up":
        run.path = dataclasses.replace(path, available=av)
    else:
        run.path = dataclasses.replace(path, available_down=av)


def _stage_idle_loss(run: _Run, stage: StageFn) -> None:
    """More round-trip probes at idle where the transfers' losses need telling apart from
    random loss (advice/idle_follow_up.py); `--quick` sends only a short one (fits_quick)
    and leaves a longer one open with a note."""
    if run.path is None:
        return

    def echo(count: int, why: str) -> IdleLoss:
        stage("probe", f"{count} more round-trip probes at idle: {why}")
        return run.far.idle_echo(count)

    run.path, notes = idle_follow_ups(run.req, run.path, run.transfer, echo)
    run.notes.extend(notes)


def idle_follow_ups(
    req: CheckRequest,
    path: PathEstimate,
    transfer: TransferResult | None,
    echo: Callable[[int, str], IdleLoss],
) -> tuple[PathEstimate, list[str]]:
    """The path with the follow-ups' counts, and their notes: a first follow-up, and one
    more (not in `--quick`) where the first lost more than planned and another within the
    follow-ups' budget (2 s of probes) could still decide (idle_follow_up.FOLLOW_UP_ROUNDS)."""
    rounds = 1 if req.quick else idle_follow_up.FOLLOW_UP_ROUNDS
    notes: list[str] = []
    for turn in range(rounds):
        count, why = follow_up(req, path, transfer, again=turn > 0)
        had = path.idle_loss
        sent = had.sent if had is not None and turn else 0
        if not count or sent + count > idle_loss.MAX_FOLLOW_UP:
            if why and not turn:
                notes.append(why)
            break
        try:
            more = echo(count, why)
        except (OSError, PeerUnavailable) as exc:
            notes.append(f"{why} (no more round-trip probes: {exc})")
            break
        notes.append(f"{more.sent} more round-trip probes at idle lost {more.lost}: {why}")
        if had is not None and turn:
            more = IdleLoss(had.sent + more.sent, had.lost + more.lost, more.method)
        path = dataclasses.replace(path, idle_loss=more)
    return path, notes


def follow_up(
    req: CheckRequest,
    path: PathEstimate | None,
    transfer: TransferResult | None,
    again: bool = False,
) -> tuple[int, str]:
    """How many idle probes to send after the transfers and why; (0, a note) when `--quick`
    leaves a longer follow-up open, (0, "") when none could change the verdict. `again`:
    a second round (idle_follow_up.wanted)."""
    count, why = idle_follow_up.wanted(path, transfer, again)
    if count and req.quick and not idle_follow_up.fits_quick(count):
        return 0, f"{why} ({count} more round-trip probes would tell; --quick leaves it open)"
    return count, why


def _stage_transfer(
    run: _Run, stage: StageFn, emit: EventFn, cancel: threading.Event | None
) -> None:
    if run.error is not None:
        return
    if not run.far.abilities.transfers:
        run.notes.extend(run.far.missing())
        return
    stage("transfer", f"test transfers with the {run.far.describe()}")
    options = transfer_options(run.req, run.target, run.far)
    if not run.req.modes:
        options = dataclasses.replace(options, filled_lines=sure_lines(run.path))
    recorder = TransferRecorder(run.address, run.far.port, "--capture") if run.req.capture else None

    def progress(p: TransferProgress) -> None:
        if recorder is not None:
            recorder.note(p)
        emit(Event("transfer", p.mode, transfer=p))

    def go(opts: TransferOptions) -> TransferResult:
        hooks = TransferHooks(progress=progress, sysctl_root=run.ctx.sysctl_root, cancel=cancel)
        return run.far.transfer(opts, hooks)

    with recorder if recorder is not None else contextlib.nullcontext():
        try:
            if _size_from_transfers(run, options):
                run.transfer = _two_phases(run, options, go)
            else:
                run.transfer = go(options)
        except FarEndError as exc:
            _far_end_failed(run, exc)
        except PeerUnavailable as exc:
            run.notes.append(f"test transfer failed: {exc}")
    if recorder is not None:
        run.capture = recorder.result()
    if run.transfer is not None:
        run.notes.extend(run.transfer.left_out)


def sure_lines(path: PathEstimate | None) -> tuple[tuple[Way, float], ...]:
    """Per direction, the capacity (Mbit/s, IP layer) a probe through the far end's
    reflector measured sure enough to say a transfer filled it (advice/capacity_view.py
    line_known): what autotuning must reach that way before a tuned mode is left out as
    unable to show more."""
    if path is None or not path.peer:
        return ()
    ways: tuple[tuple[Way, CapacityEstimate | None], ...] = (
        ("up", path.capacity),
        ("down", path.capacity_down),
    )
    return tuple((way, cap.mbps) for way, cap in ways if cap is not None and line_known(cap))


# A peerless capacity estimate below this confidence does not size a static buffer.
SURE_ENOUGH = 0.5


def _size_from_transfers(run: _Run, options: TransferOptions) -> bool:
    """Whether the static mode should be sized from an autotune transfer run first: the
    far end reflects no probe, so the capacity is a peerless guess (or none), and a static
    buffer sized from a wrong guess would measure nothing."""
    if run.far.abilities.reflector or run.req.bdp_hint is not None:
        return False
    wants_static = "static" in options.modes or "static" in (options.reverse_modes or ())
    if not wants_static or run.path is None:
        return wants_static and run.path is None
    cap = run.path.capacity
    return cap is None or (not run.path.peer and cap.confidence < SURE_ENOUGH)


def _two_phases(
    run: _Run, options: TransferOptions, go: Callable[[TransferOptions], TransferResult]
) -> TransferResult:
    """Autotune first (both ways, as asked), then the other modes with the static buffer
    sized from the fastest rate autotune reached and the RTT it saw."""
    first_modes = tuple(m for m in options.modes if m == "autotune") or ("autotune",)
    back = options.reverse_modes
    first = go(
        dataclasses.replace(
            options,
            modes=first_modes,
            reverse_modes=tuple(m for m in back if m == "autotune") or None if back else None,
        )
    )
    target = _target_from(first, run.path) or run.target
    rest = dataclasses.replace(
        options,
        modes=tuple(m for m in options.modes if m != "autotune"),
        reverse_modes=tuple(m for m in back if m != "autotune") or None if back else None,
        static_request=static_request(target.rtt_s, target.rate_bps) if target else None,
    )
    if target is not None:
        run.notes.append(
            f"static buffers sized from the autotune transfers: {target.rate_bps / 1e6:.1f} "
            f"Mbit/s x {target.rtt_s * 1e3:.1f} ms"
        )
    if not rest.modes and not rest.reverse_modes:
        return first
    try:
        second = go(rest)
    except FarEndError as exc:
        failed = [
            ModeResult.failed(m, d, options.streams, exc.later())
            for d in rest.directions()
            for m in rest.modes_for(d)
        ]
        second = dataclasses.replace(first, modes=tuple(failed))
    order = {d: i for i, d in enumerate(("up", "down"))}
    modes = sorted((*first.modes, *second.modes), key=lambda m: order[m.direction])
    return dataclasses.replace(first, modes=tuple(modes))


def _target_from(result: TransferResult, path: PathEstimate | None) -> BdpTarget | None:
    """The path as the transfers showed it: the best rate any of them moved (a floor of
    the capacity, with a quarter of headroom), over the RTT (the probe's minimum, or
    the smallest TCP_INFO RTT the transfers saw)."""
    rates = [m.throughput_mbps for m in result.modes if m.error is None and m.bytes > 0]
    rtts = [
        s.tcp_info.rtt_us / 1e6
        for m in result.modes
        for s in m.samples
        if s.tcp_info is not None and s.tcp_info.rtt_us > 0
    ]
    rtt = path.rtt.min / 1e3 if path is not None and path.rtt.min > 0 else min(rtts, default=0)
    if not rates or rtt <= 0:
        return None
    return BdpTarget(rtt, max(rates) * 1.25e6, "measured")


def _far_end_failed(run: _Run, exc: FarEndError) -> None:
    """The far end failed its first transfer (iperf3 is asked that way). Nothing of its
    kind there: in auto mode its registry fallback takes over and the check goes on
    peerless; a busy or locked server is the answer itself."""
    reach = reach_of(run.req, run.address, run.ctx)
    swap = registry.fall_back(run.far, exc, reach, run.req.far_end)
    if swap is not None:
        run.far, why = swap
        run.notes.append(why)
        run.notes.extend(run.far.missing())
        if run.path is None:
            run.error = f"{run.req.host} did not answer any probe"
        return
    run.error = str(exc)
    run.notes.append(f"no test transfer: {exc}")


def _handshake_evidence(
    run: _Run,
) -> tuple[HandshakeFacts | None, tuple[Finding, ...], tuple[Fix, ...]]:
    """The far end's handshake options, as findings (and fixes) when no audit covers it."""
    hs = run.far.handshake()
    if hs is None:
        return None, (), ()
    rtt = run.path.rtt.min / 1e3 if run.path is not None else None
    found = handshake_findings(hs, rtt)
    fixes: tuple[Fix, ...] = ()
    if run.peer is None:
        fixes = tuple(f for x in found for f in x.fixes)
        if run.target is not None:
            fixes += unaudited_peer_fixes(run.target)
    return hs, found, fixes


def run_check(
    req: CheckRequest,
    ctx: Context,
    on_event: EventFn | None = None,
    cancel: threading.Event | None = None,
) -> Report:
    emit = on_event or (lambda _e: None)
    clock = StageClock()

    def stage(name: Stage, message: str, **kw: object) -> None:
        if cancel is not None and cancel.is_set():
            raise Cancelled("cancelled")
        clock.mark(name)
        emit(Event(name, message, **kw))  # type: ignore[arg-type]

    if not 1 <= req.streams <= MAX_STREAMS:
        raise TcpWizardError(f"--streams must be 1-{MAX_STREAMS}", ExitCode.USAGE)
    address = resolve(req.host)
    # Every probe and transfer goes to the one address the route audit was made for.
    run = _stage_audit_and_reach(req, ctx, address, stage)
    far = run.far
    try:
        _stage_peer(run, stage)
        if req.hops is not None:
            _stage_hops(run, req.hops, stage)
        _stage_probe(run, stage, emit)
        ways: tuple[Way, ...] = ("up", "down")
        if req.direction == "up" or req.direction == "down":
            ways = (req.direction,)
        if req.available:
            for way in ways:
                _stage_available(run, stage, direction=way)
        _stage_transfer(run, stage, emit, cancel)
        for way in () if req.available else ways:
            if why := fell_short(run.path, run.transfer, way):
                if not req.quick:
                    _stage_available(run, stage, why, way)
                elif (note := f"{why} (--quick leaves it open: add --avail)") not in run.notes:
                    run.notes.append(note)  # two more seconds would undo what --quick is for
        _stage_idle_loss(run, stage)
    finally:
        run.far.close()  # a far end swapped in mid-run (a fallback) closes the same way
        if run.far is not far:
            far.close()
    stage("diagnose", "naming the limiting factor")
    report = _diagnose(run, stage)
    at_once = req.quick and run.far.abilities.both_at_once
    timing = check_timing(clock, run.path, run.transfer, at_once)
    report = dataclasses.replace(report, timing=timing)
    return with_hops(report, *run.hops) if run.hops is not None else report


def _diagnose(run: _Run, stage: StageFn) -> Report:
    """Re-judge both hosts against the path as measured, so fixes are sized from its BDP."""
    req, notes = run.req, run.notes
    local = audit(run.ctx, run.address, run.target, streams=req.streams)
    peer, why_bad = audit_peer(run.facts, run.target, req.streams)
    if why_bad:
        notes.append(why_bad)
    hs, hs_findings, hs_fixes = _handshake_evidence(run)
    app = _app_fixes(run.transfer, run.target, local.ram_bytes)
    # Every rate within physics before it is judged or shown (advice/guard.py).
    bounds = guard.bounds_for(
        local.interface.speed_mbps if local.interface else None,
        local.interface.mtu if local.interface else None,
    )
    transfer = guard.guard_transfer(run.transfer, bounds)
    path = guard.guard_path(run.path, bounds, transfer)
    evidence = Evidence(
        local,
        peer,
        path,
        transfer,
        local_fixes=local.fixes + tuple(f for f in app if f.host == "local"),
        peer_fixes=(peer.fixes if peer else ())
        + hs_fixes
        + tuple(f for f in app if f.host == "peer"),
        peer_handshake=hs,
        syn_hops=run.hops[0].syn if run.hops is not None else None,
        peer_silent=run.far.silent(),
    )
    diag = diagnose(evidence)
    measured = evidence.measured
    incomplete = bool(run.error) or (not measured and not req.allow_predicted)
    outcome = verdict_outcome(diag, local, peer, measured)
    code = exit_code(dataclasses.replace(outcome, incomplete=incomplete))
    if not measured and not run.error:
        notes.insert(0, f"not measured: {_why_unmeasured(run)}")
    report = Report(
        host=local,
        verdict=guard.guard_verdict(diag.verdict, bounds),
        fixes=diag.fixes,
        exit_code=code,
        target=TargetInfo(host=req.host, address=run.address, port=run.far.port),
        peer=peer,
        path=path,
        transfer=transfer,
        notes=tuple(dict.fromkeys(local.notes + tuple(notes))),
        error=run.error,
        measured=measured,
        far_end=FarEndInfo(run.far.kind, run.far.port, run.far.describe(), run.far.missing()),
        peer_handshake=hs,
        peer_handshake_findings=hs_findings,
        capture=run.capture,
    )
    stage("done", diag.verdict.limiting_factor)
    return report


def _why_unmeasured(run: _Run) -> str:
    if not run.far.abilities.transfers:
        return "no transfer: the far end runs neither tcpwizard serve nor iperf3"
    if run.transfer is None:
        return "no transfer could run"
    errors = [m.error for m in run.transfer.modes if m.error]
    return f"every test transfer failed ({errors[0]})" if errors else "no transfer moved data"
