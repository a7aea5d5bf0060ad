"""The whole result of one run, as frozen dataclasses: every output format (text, JSON,
Prometheus, Nagios, TUI) renders a Report. Parts that a run did not produce are None."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from tcpwizard.advice.model import Verdict
from tcpwizard.advice.path_advice import PathAdvice
from tcpwizard.checks.model import SEVERITY_ORDER, Finding, Fix, HostAudit, Severity
from tcpwizard.exitcodes import ExitCode
from tcpwizard.measure.model import PathEstimate, TransferResult
from tcpwizard.measure.observe.handshake import HandshakeFacts
from tcpwizard.measure.observe.tsg_transfers import TransferCapture
from tcpwizard.measure.probes.hop_model import PathHops
from tcpwizard.outcome import Outcome, exit_code
from tcpwizard.timing import CheckTiming

# Bump when a field is removed or changes meaning; adding fields keeps the version.
SCHEMA_VERSION = 1


@dataclass(frozen=True)
class TargetInfo:
    host: str
    address: str | None
    port: int | None


@dataclass(frozen=True)
class FarEndInfo:
    """Which program answered at the far end, and what it could not give."""

    kind: str  # "serve", "iperf3", "tcp-port"
    port: int | None
    description: str
    missing: tuple[str, ...] = ()


@dataclass(frozen=True)
class Report:
    """The document of `check` (kind "check"; `probe` wraps one too)."""

    kind: ClassVar[str] = "check"
    host: HostAudit
    verdict: Verdict
    fixes: tuple[Fix, ...]
    exit_code: ExitCode
    target: TargetInfo | None = None
    peer: HostAudit | None = None
    path: PathEstimate | None = None
    transfer: TransferResult | None = None
    notes: tuple[str, ...] = ()
    error: str | None = None  # why the run could not complete (exit_code is then 3)
    # False: no test transfer moved data, so the verdict is a prediction.
    measured: bool = False
    far_end: FarEndInfo | None = None
    peer_handshake: HandshakeFacts | None = None
    peer_handshake_findings: tuple[Finding, ...] = ()
    # `check --hops`: the hops of the path and what they mean (docs/path.md).
    hops: PathHops | None = None
    hops_advice: PathAdvice | None = None
    # `tui --capture`: each test transfer's packets as time-sequence graph series (the TUI
    # draws them; not in the JSON, which `check --plot DIR` complements with PNG and SVG).
    capture: TransferCapture | None = None
    # How long the check took, stage by stage, against the floor its measurements need.
    timing: CheckTiming | None = None


def severities(host: HostAudit, peer: HostAudit | None = None) -> tuple[str, ...]:
    """The severities of both audits' findings (what decides when no limit is named)."""
    found = host.findings + (peer.findings if peer is not None else ())
    return tuple(f.severity for f in found)


def problems(audit: HostAudit, at_least: Severity = "warn") -> tuple[str, ...]:
    floor = SEVERITY_ORDER[at_least]
    return tuple(
        f"{f.id}: {f.observed}" for f in audit.findings if SEVERITY_ORDER[f.severity] >= floor
    )


def local_report(
    audit: HostAudit, target: TargetInfo | None = None, notes: tuple[str, ...] = ()
) -> Report:
    """A report from the local audit alone: no path measurement, so the verdict is unknown
    and the evidence lists the problems the audit found."""
    found = problems(audit)
    if found:
        explanation = (
            f"Local audit only: {len(found)} setting(s) on this host limit TCP on a long "
            "path. Without a path measurement the one limiting factor cannot be named."
        )
    else:
        explanation = (
            "Local audit only: no setting on this host limits TCP for the target path. "
            "Without a path measurement the limiting factor cannot be named."
        )
    return Report(
        host=audit,
        verdict=Verdict.unknown(explanation, found),
        fixes=audit.fixes,
        exit_code=exit_code(Outcome(findings=severities(audit))),
        target=target,
        notes=audit.notes + notes,
    )
