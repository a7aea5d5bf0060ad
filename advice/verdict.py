"""The verdict: exactly one limiting factor, with confidence, evidence and the wizard gap."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from tcpwizard.checks.model import Fix, HostRole

LimitingFactor = Literal[
    "receiver-window",
    "sender-buffer",
    "window-scaling",
    "congestion",
    "path-capacity",
    "application",
    "interface",
    "cached-metrics",
    "unknown",
]

LIMITING_FACTORS: tuple[str, ...] = (
    "receiver-window",
    "sender-buffer",
    "window-scaling",
    "congestion",
    "path-capacity",
    "application",
    "interface",
    "cached-metrics",
    "unknown",
)


@dataclass(frozen=True)
class WizardGap:
    """What the user gets now vs what a tuned host gets on this path (Mbit/s)."""

    current_mbps: float | None
    tuned_mbps: float | None
    tuned_measured: bool  # True: a tuned transfer ran; False: predicted from the window law

    @property
    def ratio(self) -> float | None:
        if not self.current_mbps or not self.tuned_mbps:
            return None
        return self.tuned_mbps / self.current_mbps


@dataclass(frozen=True)
class Verdict:
    limiting_factor: LimitingFactor
    confidence: float  # 0..1
    host_to_fix: HostRole | None
    explanation: str
    evidence: tuple[str, ...]
    wizard_gap: WizardGap
    fixes: tuple[Fix, ...] = ()
