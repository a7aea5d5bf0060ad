"""The verdict: which one factor limits throughput, how sure we are, which host to fix and
the wizard gap. Frozen; JSON is built from these (DESIGN.md, 'Verdict vocabulary')."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from tcpwizard.checks.model import HostRole

LimitingFactor = Literal[
    "receiver-window",
    "sender-buffer",
    "window-scaling",
    "congestion",
    "path-capacity",
    "application",
    "interface",
    "cached-metrics",
    "cross-traffic",
    "policer",
    "middlebox",
    "host-cpu",
    "bufferbloat",
    "unknown",
]
LIMITING_FACTORS: tuple[str, ...] = get_args(LimitingFactor)


@dataclass(frozen=True)
class WizardGap:
    """Current vs tuned throughput; `measured` says whether tuned_mbps was measured (e.g. with
    SO_RCVBUFFORCE) or only computed from buffer limits."""

    current_mbps: float | None = None
    tuned_mbps: float | None = None
    measured: bool = False
    # Which measured mode gave tuned_mbps (e.g. "drs", "static"); None when computed.
    tuned_mode: str | None = None


@dataclass(frozen=True)
class ConfidenceBasis:
    """What a verdict's confidence rests on: its rule's own, and the scenario matrix's runs
    whose verdict named the same factor (advice/calibration.py)."""

    rule_confidence: float
    runs: int
    right: int


@dataclass(frozen=True)
class Verdict:
    limiting_factor: LimitingFactor
    confidence: float  # 0..1
    host_to_fix: HostRole | None
    explanation: str
    evidence: tuple[str, ...] = ()
    wizard_gap: WizardGap = WizardGap()
    basis: ConfidenceBasis | None = None  # None: the rule's own confidence, not calibrated

    @classmethod
    def observed(
        cls,
        factor: LimitingFactor,
        confidence: float,
        host: HostRole | None,
        explanation: str,
        evidence: list[str],
        current: float,
        tuned: float | None = None,
    ) -> Verdict:
        """A verdict on a connection watched, not tested (`conns`, a capture): its rate
        is the current side of the gap, and a tuned side is computed, never measured."""
        return cls(
            factor, confidence, host, explanation, tuple(evidence), WizardGap(current, tuned)
        )

    @classmethod
    def unknown(cls, explanation: str, evidence: tuple[str, ...] = ()) -> Verdict:
        """No measurement of the path: nothing can be named as the limit."""
        return cls("unknown", 0.0, None, explanation, evidence, WizardGap())
