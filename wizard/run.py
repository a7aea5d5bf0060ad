"""The pipeline of `check HOST`: audit -> peer facts -> probe -> transfer -> diagnose.

Used by the CLI and the TUI alike (one implementation). Progress goes out as Events through a
callback, so the CLI can draw bars and the TUI can post messages from its worker thread; a
`cancel` event stops the run between stages.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from tcpwizard.advice.diagnose import Diagnosis, Evidence, diagnose
from tcpwizard.advice.snippets import setsockopt_fix
from tcpwizard.checks.audit import audit
from tcpwizard.checks.facts import FactsError, HostFacts, audit_facts, facts_from_json
from tcpwizard.checks.model import BdpTarget, Fix, HostAudit, HostRole
from tcpwizard.checks.window import recommended_buffer
from tcpwizard.cli import DEFAULT_PORT
from tcpwizard.context import Context
from tcpwizard.exitcodes import ExitCode, TcpWizardError, Unavailable
from tcpwizard.measure.control import ControlClient
from tcpwizard.measure.model import Mode, PathEstimate, TransferResult
from tcpwizard.measure.probe import probe
from tcpwizard.measure.protocol import AuthFailed, PeerUnavailable, ProtocolError
from tcpwizard.measure.transfer import Progress as TransferProgress
from tcpwizard.measure.transfer import TransferOptions, run_transfer, static_request
from tcpwizard.report import Report, TargetInfo, exit_code_for

Stage = Literal["audit", "peer", "probe", "transfer", "diagnose", "done"]
Direction = Literal["up", "down", "both"]

# The modes that answer "why slow, how fast could it be" fastest: what a stock application
# gets (untuned 64 KB), what an autotuning one gets, and a tuned one (DRS) for the gap.
DEFAULT_MODES: tuple[Mode, ...] = ("untuned", "autotune", "drs")
# --quick measures only what applications get; a tuned mode needs a few seconds on a long
# path to mean anything, so the quick gap is predicted from the window law instead.
QUICK_MODES: tuple[Mode, ...] = ("autotune",)
DEFAULT_DURATION_S = 3.0
QUICK_DURATION_S = 1.5
# Without --direction, check measures both ways: every mode from here to the far end, and
# autotune back, which is enough to catch a limit only the way back has (this host's
# receive window, the far end's send buffer) for a few seconds more.
REVERSE_MODES: tuple[Mode, ...] = ("autotune",)
PROBE_BUDGET_S = 3.0
QUICK_PROBE_BUDGET_S = 1.0


class Cancelled(TcpWizardError):
    exit_code = ExitCode.INTERRUPTED


@dataclass(frozen=True)
class CheckRequest:
    host: str
    port: int = DEFAULT_PORT
    secret: bytes | None = None
    tcp_port: int | None = None
    modes: tuple[Mode, ...] | None = None  # None: chosen for the question (see DEFAULT_MODES)
    streams: int = 1
    duration_s: float | None = None
    nbytes: int | None = None
    direction: Direction | None = None  # None: both ways, see REVERSE_MODES
    quick: bool = False
    force_buffers: bool = False
    bdp_hint: BdpTarget | None = None  # --rtt/--bandwidth: used until the path is measured


@dataclass(frozen=True)
class Event:
    stage: Stage
    message: str
    transfer: TransferProgress | None = None
    path: PathEstimate | None = None
    local: HostAudit | None = None
    peer: HostAudit | None = None


EventFn = Callable[[Event], None]


def resolve(host: str) -> str:
    """The first address of `host` (IPv4 or IPv6 literal or name); one-line error if none."""
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        reason = exc.args[1] if isinstance(exc, socket.gaierror) and len(exc.args) > 1 else exc
        raise Unavailable(f"cannot resolve {host!r}: {reason}") from None
    return str(infos[0][4][0])


def _peer_facts(req: CheckRequest, address: str) -> tuple[HostFacts | None, str | None]:
    """The far end's facts, or why there are none (no serve: a peerless check)."""
    try:
        with ControlClient(address, req.port, req.secret, timeout=3.0) as client:
            raw = client.peer_audit()
    except AuthFailed:
        raise
    except PeerUnavailable as exc:
        return None, f"no tcpwizard serve at {req.host} port {req.port} ({exc})"
    except ProtocolError as exc:
        return None, f"the far end's serve did not give its audit ({exc})"
    facts = raw.get("facts")
    if raw.get("source") != "tcpwizard.checks" or facts is None:
        return None, "the far end sent no usable audit (an older serve?)"
    try:
        return facts_from_json(facts), None
    except FactsError as exc:
        return None, f"the far end's audit is malformed: {exc}"


def _audit_peer(
    facts: HostFacts | None, target: BdpTarget | None
) -> tuple[HostAudit | None, str | None]:
    """The far end's audit from its facts; facts the checks cannot use (a broken or hostile
    serve) leave the check peerless instead of stopping it."""
    if facts is None:
        return None, None
    try:
        return audit_facts(facts, target), None
    except (TcpWizardError, ValueError, TypeError, ArithmeticError) as exc:
        return None, f"the far end's settings could not be judged: {exc}"


def measured_target(path: PathEstimate, hint: BdpTarget | None) -> BdpTarget | None:
    if path.capacity is None or path.rtt.min <= 0:
        return hint
    return BdpTarget(path.rtt.min / 1e3, path.capacity.mbps * 1e6, "measured")


def _transfer_options(req: CheckRequest, target: BdpTarget | None) -> TransferOptions:
    modes = req.modes or (QUICK_MODES if req.quick else DEFAULT_MODES)
    duration = req.duration_s
    if duration is None and req.nbytes is None:
        duration = QUICK_DURATION_S if req.quick else DEFAULT_DURATION_S
    return TransferOptions(
        modes=modes,
        streams=req.streams,
        direction=req.direction or "both",
        reverse_modes=None if req.direction or req.modes else REVERSE_MODES,
        duration_s=duration,
        nbytes=req.nbytes,
        static_request=static_request(target.rtt_s, target.rate_bps) if target else None,
        force=req.force_buffers,
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


def check_exit_code(diag: Diagnosis, local: HostAudit, peer: HostAudit | None) -> ExitCode:
    """Healthy path: OK. A named limit: WARNING, or CRITICAL when half or more of the tuned
    throughput is missing. Nothing measured: the audit's worst finding."""
    v = diag.verdict
    if v.limiting_factor == "path-capacity":
        return ExitCode.OK
    gap = v.wizard_gap
    if v.limiting_factor == "unknown" or gap.current_mbps is None or not gap.tuned_mbps:
        return exit_code_for(local, peer) if v.limiting_factor == "unknown" else ExitCode.WARNING
    missing = 1.0 - gap.current_mbps / gap.tuned_mbps
    return ExitCode.CRITICAL if missing >= 0.5 else ExitCode.WARNING


def run_check(
    req: CheckRequest,
    ctx: Context,
    on_event: EventFn | None = None,
    cancel: threading.Event | None = None,
) -> Report:
    emit = on_event or (lambda _e: None)

    def stage(name: Stage, message: str, **kw: object) -> None:
        if cancel is not None and cancel.is_set():
            raise Cancelled("cancelled")
        emit(Event(name, message, **kw))  # type: ignore[arg-type]

    if not 1 <= req.streams <= 8:
        raise TcpWizardError("--streams must be 1-8", ExitCode.USAGE)
    address = resolve(req.host)
    target_info = TargetInfo(host=req.host, address=address, port=req.port)
    notes: list[str] = []

    stage("audit", "auditing this host")
    local = audit(ctx, address, req.bdp_hint)
    stage("audit", "local audit done", local=local)

    stage("peer", f"asking {req.host} port {req.port} for its settings")
    # Every probe and transfer goes to the one address the route audit was made for.
    facts, why_not = _peer_facts(req, address)
    if why_not:
        notes.append(why_not)
    peer, why_bad = _audit_peer(facts, req.bdp_hint)
    if why_bad:
        notes.append(why_bad)
        facts = None
    stage("peer", "peer audit done" if peer else why_not or why_bad or "", peer=peer)

    stage("probe", "measuring RTT and bottleneck capacity")
    path: PathEstimate | None = None
    error: str | None = None
    try:
        path = probe(
            address,
            req.port,
            secret=req.secret,
            tcp_port=req.tcp_port,
            budget_s=QUICK_PROBE_BUDGET_S if req.quick else PROBE_BUDGET_S,
            progress=lambda m: emit(Event("probe", m)),
        )
    except AuthFailed:
        raise
    except PeerUnavailable as exc:
        # Nothing answered: the path is unknown, but the audit of the route to it stands.
        error = f"{req.host} did not answer any probe: {exc}"
        notes.append(error)
    target = req.bdp_hint
    if path is not None:
        notes.extend(path.notes)
        target = measured_target(path, req.bdp_hint)
        stage("probe", "path measured", path=path)

    transfer: TransferResult | None = None
    if path is None:
        pass
    elif facts is not None or path.peer:
        stage("transfer", "test transfers")
        try:
            transfer = run_transfer(
                address,
                req.port,
                _transfer_options(req, target),
                secret=req.secret,
                progress=lambda p: emit(Event("transfer", p.mode, transfer=p)),
                sysctl_root=ctx.sysctl_root,
                cancel=cancel,
            )
        except PeerUnavailable as exc:
            notes.append(f"test transfer failed: {exc}")
    else:
        notes.append("no test transfer without tcpwizard serve on the far end")

    stage("diagnose", "naming the limiting factor")
    # Re-judge both hosts against the path as measured, so fixes are sized from its BDP.
    local = audit(ctx, address, target)
    peer, why_bad = _audit_peer(facts, target)
    if why_bad:
        notes.append(why_bad)
    app = _app_fixes(transfer, target, local.ram_bytes)
    evidence = Evidence(
        local,
        peer,
        path,
        transfer,
        local_fixes=local.fixes + tuple(f for f in app if f.host == "local"),
        peer_fixes=(peer.fixes if peer else ()) + tuple(f for f in app if f.host == "peer"),
    )
    diag = diagnose(evidence)
    report = Report(
        host=local,
        verdict=diag.verdict,
        fixes=diag.fixes,
        exit_code=ExitCode.UNKNOWN if error else check_exit_code(diag, local, peer),
        target=target_info,
        peer=peer,
        path=path,
        transfer=transfer,
        notes=tuple(dict.fromkeys(local.notes + tuple(notes))),
        error=error,
    )
    stage("done", diag.verdict.limiting_factor)
    return report
