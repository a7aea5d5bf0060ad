"""Result types of the host audit. Frozen dataclasses: JSON is built from these, never from
loose dicts (DESIGN.md rule 2)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Severity = Literal["ok", "info", "warn", "crit"]
FixKind = Literal["sysctl", "setsockopt", "route", "other"]
HostRole = Literal["local", "peer", "both"]

SEVERITY_ORDER: dict[str, int] = {"ok": 0, "info": 1, "warn": 2, "crit": 3}


@dataclass(frozen=True)
class Fix:
    """One concrete change. `command` is the exact line a human would run."""

    id: str
    kind: FixKind
    host: HostRole
    key: str
    value: str
    command: str
    why: str = ""
    guideline: str = ""


@dataclass(frozen=True)
class Finding:
    id: str
    severity: Severity
    observed: str
    expected: str
    message: str
    guideline: str
    key: str = ""
    fixes: tuple[Fix, ...] = ()


@dataclass(frozen=True)
class ThroughputCeiling:
    """What a buffer limit allows at a given RTT: the table a non-expert needs."""

    rtt_ms: float
    receive_mbps: float
    send_mbps: float


@dataclass(frozen=True)
class HostAudit:
    hostname: str
    kernel: str
    findings: tuple[Finding, ...]
    congestion_control: str = ""
    # Raw values the diagnosis needs (e.g. "net.ipv4.tcp_rmem" -> "4096 131072 6291456").
    sysctls: tuple[tuple[str, str], ...] = ()
    ceilings: tuple[ThroughputCeiling, ...] = field(default_factory=tuple)

    def sysctl(self, key: str) -> str | None:
        return dict(self.sysctls).get(key)

    @property
    def worst(self) -> Severity:
        worst: Severity = "ok"
        for f in self.findings:
            if SEVERITY_ORDER[f.severity] > SEVERITY_ORDER[worst]:
                worst = f.severity
        return worst
