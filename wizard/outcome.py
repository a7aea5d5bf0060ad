"""The one place a result becomes an exit code.

Every document (a check, a probe, conns, a capture, the hops, a transfer, calc, history, a
fix, an error) states what it found as an `Outcome`, in the words the exit codes speak
(README, "Exit codes"); `exit_code` alone turns that into the code, and the same call with
the Nagios thresholds gives the plugin's status. Failures that end a command early keep
the codes their errors carry (`exitcodes.describe_failure`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tcpwizard.exitcodes import ExitCode, UsageError, exit_for_severities
from tcpwizard.units import parse_percent, parse_rate

# Neither names a limit: the path itself is the ceiling, or no factor could be named.
NO_LIMIT = frozenset({"path-capacity", "unknown"})
# A named limit that costs at least this share of the tuned throughput is critical: the
# tool's own definition of "severe" (half of what the path allows, docs/check.md).
CRITICAL_SHARE = 0.5


@dataclass(frozen=True)
class Threshold:
    """A Nagios threshold: a rate floor (`100mbit`) or a gap ceiling (`gap:50%`)."""

    kind: str  # "rate" (bit/s floor) or "gap" (fraction ceiling)
    value: float

    @classmethod
    def parse(cls, text: str) -> Threshold:
        if text.lower().startswith("gap:"):
            return cls("gap", parse_percent(text[4:]))
        try:
            return cls("rate", parse_rate(text))
        except UsageError:
            raise UsageError(
                f"threshold {text!r}: use a rate (100mbit) or a gap share (gap:50%)"
            ) from None

    def breached(self, current_mbps: float | None, gap: float | None) -> bool:
        if self.kind == "rate":
            return current_mbps is not None and current_mbps * 1e6 < self.value
        return gap is not None and gap >= self.value


@dataclass(frozen=True)
class Thresholds:
    warning: Threshold | None = None
    critical: Threshold | None = None

    @classmethod
    def parse(cls, warning: str | None, critical: str | None) -> Thresholds:
        return cls(
            Threshold.parse(warning) if warning else None,
            Threshold.parse(critical) if critical else None,
        )


NO_THRESHOLDS = Thresholds()


@dataclass(frozen=True)
class Outcome:
    """What a document found. Every field defaults to "nothing of the kind"."""

    # Decided already: a failure's own code, or a document's code read back (Nagios).
    given: ExitCode | None = None
    # The run could not complete, or there was nothing to judge.
    incomplete: bool = False
    # The limiting factors the verdicts name (one for a check, one per connection).
    limits: tuple[str, ...] = ()
    # The wizard gap of the verdict: the throughput now and what tuning gives.
    current_mbps: float | None = None
    tuned_mbps: float | None = None
    # Severities of what the audits or the hops found ("ok", "info", "warn", "crit"):
    # they decide when no verdict names a limit.
    findings: tuple[str, ...] = ()
    # A verdict without a measurement is never healthy.
    unmeasured: bool = False
    # Changes left for the user (a dry run, an apply that skipped some).
    pending: bool = False
    # The codes of parts judged on their own (the hops of `check --hops`, the fixes of
    # `check --fix`): a warning or critical part raises the code, and a critical part
    # explains a run that could not complete.
    parts: tuple[ExitCode, ...] = ()

    @property
    def missing_share(self) -> float | None:
        """The share of the tuned throughput that is missing now."""
        if self.current_mbps is None or not self.tuned_mbps:
            return None
        return (self.tuned_mbps - self.current_mbps) / self.tuned_mbps


def _worst(severities: Sequence[str]) -> ExitCode:
    return exit_for_severities(list(severities))


def _own(o: Outcome) -> ExitCode:
    if o.given is not None:
        return o.given
    if o.incomplete:
        return ExitCode.UNKNOWN
    if any(limit not in NO_LIMIT for limit in o.limits):
        share = o.missing_share
        severe = share is not None and share >= CRITICAL_SHARE
        return ExitCode.CRITICAL if severe else ExitCode.WARNING
    if "path-capacity" in o.limits:
        return ExitCode.OK
    code = _worst(o.findings)
    if o.unmeasured or o.pending:
        code = max(code, ExitCode.WARNING)
    return code


def _with_part(code: ExitCode, part: ExitCode) -> ExitCode:
    if part not in (ExitCode.WARNING, ExitCode.CRITICAL):
        return code
    if code == ExitCode.UNKNOWN:
        return ExitCode.CRITICAL if part == ExitCode.CRITICAL else code
    return max(code, part)


def exit_code(outcome: Outcome, thresholds: Thresholds = NO_THRESHOLDS) -> ExitCode:
    """OK 0: healthy; WARNING 1: a named limit, a warning, changes pending; CRITICAL 2: a
    limit costing half or more of the tuned throughput, or a critical finding; UNKNOWN 3:
    could not complete. Thresholds (Nagios) move a verdict's code, never an UNKNOWN."""
    code = _own(outcome)
    for part in outcome.parts:
        code = _with_part(code, part)
    if code not in (ExitCode.OK, ExitCode.WARNING, ExitCode.CRITICAL):
        return code
    current, gap = outcome.current_mbps, outcome.missing_share
    if thresholds.critical and thresholds.critical.breached(current, gap):
        return ExitCode.CRITICAL
    if thresholds.warning and thresholds.warning.breached(current, gap) and code < ExitCode.WARNING:
        return ExitCode.WARNING
    return code
