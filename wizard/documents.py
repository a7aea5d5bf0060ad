"""The documents the commands print, besides a check's `Report` and `conns`' `ConnsReport`:
each holds its result and the exit code `outcome.exit_code` decided for it from what the
result says (`of`). The formats that render them are in output/registry.py."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from tcpwizard.exitcodes import ExitCode
from tcpwizard.outcome import Outcome, exit_code

if TYPE_CHECKING:
    from tcpwizard.advice.apply import ApplyReport, Plan
    from tcpwizard.advice.capture import CaptureReport
    from tcpwizard.advice.path_advice import PathAdvice
    from tcpwizard.buffer_advice import BufferAdvice
    from tcpwizard.checks.plan import BufferPlan
    from tcpwizard.history import HistoryRow
    from tcpwizard.measure.model import PathEstimate, TransferResult
    from tcpwizard.measure.probes.hop_model import PathHops
    from tcpwizard.report import Report


@dataclass(frozen=True)
class ProbeDocument:
    """`probe`: the path as measured, and this host's verdict against it (the report)."""

    kind: ClassVar[str] = "probe"
    host: str
    estimate: PathEstimate
    report: Report

    @property
    def exit_code(self) -> ExitCode:
        return self.report.exit_code


@dataclass(frozen=True)
class TransferDocument:
    kind: ClassVar[str] = "transfer"
    host: str
    port: int
    result: TransferResult
    exit_code: ExitCode

    @classmethod
    def of(cls, host: str, port: int, result: TransferResult) -> TransferDocument:
        # Partial results are shown; a mode that could not finish makes the run unknown.
        failed = any(m.error for m in result.modes)
        return cls(host, port, result, exit_code(Outcome(incomplete=failed)))


@dataclass(frozen=True)
class CalcDocument:
    kind: ClassVar[str] = "calc"
    plan: BufferPlan
    exit_code: ExitCode

    @classmethod
    def of(cls, plan: BufferPlan) -> CalcDocument:
        return cls(plan, exit_code(Outcome()))  # arithmetic: always complete, nothing judged


@dataclass(frozen=True)
class HistoryDocument:
    """`history HOST`: the recorded checks, oldest first (none: unknown)."""

    kind: ClassVar[str] = "history"
    host: str
    rows: tuple[HistoryRow, ...]
    plot: bool
    exit_code: ExitCode

    @classmethod
    def of(cls, host: str, rows: tuple[HistoryRow, ...], plot: bool = True) -> HistoryDocument:
        return cls(host, rows, plot, exit_code(Outcome(incomplete=not rows)))


@dataclass(frozen=True)
class BufferDocument:
    """`history HOST --buffer`: the buffer to ask for (None: no measured BDP, unknown)."""

    kind: ClassVar[str] = "buffer"
    host: str
    advice: BufferAdvice | None
    exit_code: ExitCode

    @classmethod
    def of(cls, host: str, advice: BufferAdvice | None) -> BufferDocument:
        return cls(host, advice, exit_code(Outcome(incomplete=advice is None)))


@dataclass(frozen=True)
class FixPlanDocument:
    """A fix's plan before anything changes: the dry run, or that nothing needs fixing."""

    kind: ClassVar[str] = "fix-plan"
    plan: Plan
    dry_run: bool
    exit_code: ExitCode

    @property
    def nothing_to_do(self) -> bool:
        return not self.plan.has_changes and not self.plan.manual

    @classmethod
    def of(cls, plan: Plan, dry_run: bool) -> FixPlanDocument:
        pending = plan.has_changes or bool(plan.manual)
        return cls(plan, dry_run, exit_code(Outcome(pending=pending)))


@dataclass(frozen=True)
class FixResultDocument:
    """What `fix --yes` or `fix --rollback` changed, and what it had to skip."""

    kind: ClassVar[str] = "fix-result"
    report: ApplyReport
    exit_code: ExitCode

    @classmethod
    def of(cls, report: ApplyReport) -> FixResultDocument:
        return cls(report, exit_code(Outcome(pending=not report.complete)))


@dataclass(frozen=True)
class PathDocument:
    kind: ClassVar[str] = "path"
    hops: PathHops
    advice: PathAdvice
    exit_code: ExitCode

    @classmethod
    def of(cls, hops: PathHops, advice: PathAdvice) -> PathDocument:
        return cls(hops, advice, exit_code(path_outcome(hops, advice)))


def path_outcome(hops: PathHops, advice: PathAdvice) -> Outcome:
    """The hops judged on their own (`path`, and the hops part of `check --hops`)."""
    return Outcome(incomplete=not hops.reached, findings=tuple(f.severity for f in advice.findings))


@dataclass(frozen=True)
class CaptureDocument:
    """`check --pcap`: the busiest flow's verdict (none moved enough data: unknown)."""

    kind: ClassVar[str] = "capture"
    report: CaptureReport
    exit_code: ExitCode

    @classmethod
    def of(cls, report: CaptureReport) -> CaptureDocument:
        d = report.diagnosis
        limits = (d.verdict.limiting_factor,) if d is not None else ()
        return cls(report, exit_code(Outcome(incomplete=d is None, limits=limits)))


@dataclass(frozen=True)
class ErrorDocument:
    """A run that failed: monitoring still gets a valid document (JSON with the message and
    the code, `tcpwizard_up 0`, an UNKNOWN line); the text format is the one line."""

    kind: ClassVar[str] = "error"
    host: str | None
    port: int | None
    message: str
    exit_code: ExitCode
    line: str = ""  # what stderr says ("" for nothing)
