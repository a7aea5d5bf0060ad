"""What every check is made of: its own metadata (id, keys read, why, guideline, severity
rule) and an `evaluate` that turns an AuditEnv into one Finding with its fixes."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import ClassVar

from tcpwizard.checks.hostread import HostReader, RecordedHost
from tcpwizard.checks.model import SEVERITY_ORDER, BdpTarget, Finding, Fix, InterfaceInfo, Severity
from tcpwizard.checks.netinfo import NetworkFacts
from tcpwizard.checks.sysctl import SysctlReader
from tcpwizard.checks.window import parse_kernel_version
from tcpwizard.units import format_bytes, format_rate

# The two guideline sources the fixes follow (see shared reference documents).
SECTION5 = "Weigle & Feng 2002, §5"
TIERNEY = "Tierney, TCP tuning slides"


@dataclass
class AuditEnv:
    """Everything a check may look at. Sysctl reads are memoised and recorded so the
    HostAudit can carry the raw values the diagnosis needs."""

    reader: SysctlReader
    target: BdpTarget
    network: NetworkFacts
    ram_bytes: int | None
    page_size: int
    target_address: str | None = None
    read_values: dict[str, str] = field(default_factory=dict)
    # Facts beyond sysctls (NIC, IRQs, CPUs); a RecordedHost replays a far end's.
    host: HostReader = field(default_factory=RecordedHost)
    streams: int = 1  # parallel streams the target is to be filled with (--streams)

    def text(self, key: str) -> str:
        if key not in self.read_values:
            self.read_values[key] = self.reader.read(key)
        return self.read_values[key]

    def optional(self, key: str) -> str | None:
        if key in self.read_values:
            return self.read_values[key]
        value = self.reader.read_optional(key)
        if value is not None:
            self.read_values[key] = value
        return value

    def ints(self, key: str, count: int) -> tuple[int, ...]:
        values = self.reader.read_ints(key, count)
        self.read_values[key] = " ".join(str(v) for v in values)
        return values

    def integer(self, key: str) -> int:
        return self.ints(key, 1)[0]

    @property
    def kernel_release(self) -> str:
        return self.optional("kernel.osrelease") or ""

    @property
    def kernel(self) -> tuple[int, int]:
        return parse_kernel_version(self.kernel_release)

    @property
    def adv_win_scale(self) -> int:
        value = self.optional("net.ipv4.tcp_adv_win_scale")
        return int(value) if value and value.lstrip("-").isdigit() else 1

    @property
    def per_stream(self) -> BdpTarget:
        """Each of the N streams' share of the target: what one socket must carry."""
        t = self.target
        return t if self.streams <= 1 else BdpTarget(t.rtt_s, t.rate_bps / self.streams, t.source)

    def describe_target(self) -> str:
        t = self.target
        origin = {"flags": "given", "default": "default", "measured": "measured"}[t.source]
        text = (
            f"{format_rate(t.rate_bps)} x {t.rtt_s * 1000:g} ms "
            f"(BDP {format_bytes(t.bdp_bytes)}, {origin})"
        )
        if self.streams > 1:
            s = self.per_stream
            text += (
                f" in {self.streams} streams of {format_rate(s.rate_bps)} "
                f"(BDP {format_bytes(s.bdp_bytes)} each)"
            )
        return text


def cap_severity(severity: Severity, cap: Severity) -> Severity:
    return cap if SEVERITY_ORDER[severity] > SEVERITY_ORDER[cap] else severity


def ratio_severity(
    ratio: float, target: BdpTarget, cap: Severity = "crit", default_cap: Severity = "warn"
) -> Severity:
    """How bad a ceiling is against the target: reaching it is ok, at least half of it a
    warning, less a critical limit. A default (guessed) target never yields more than
    `default_cap`: we do not call a host critical for a path we only assumed."""
    severity: Severity = "ok" if ratio >= 1.0 else "warn" if ratio >= 0.5 else "crit"
    severity = cap_severity(severity, cap)
    if target.source == "default":
        severity = cap_severity(severity, default_cap)
    return severity


def sysctl_fix(
    check_id: str,
    key: str,
    value: str,
    why: str,
    guideline: str,
    answers: tuple[str, ...] = (),
) -> Fix:
    shown = f'"{value}"' if " " in value else value
    return Fix(
        id=f"{check_id}:{key}",
        kind="sysctl",
        host="local",
        key=key,
        value=value,
        command=f"sysctl -w {key}={shown}",
        why=why,
        guideline=guideline,
        answers=answers,
    )


class Check(ABC):
    """A self-describing audit check. Subclasses set the metadata and implement evaluate."""

    id: ClassVar[str]
    title: ClassVar[str]
    keys: ClassVar[tuple[str, ...]]  # sysctls (or other facts) it reads
    why: ClassVar[str]
    guideline: ClassVar[str]
    severity_rule: ClassVar[str]
    # The limiting factors (advice.model.LimitingFactor) this check's fixes answer.
    answers: ClassVar[tuple[str, ...]] = ()

    @abstractmethod
    def evaluate(self, env: AuditEnv) -> Finding: ...

    def finding(
        self,
        severity: Severity,
        observed: str,
        expected: str,
        message: str,
        fixes: tuple[Fix, ...] = (),
        key: str | None = None,
    ) -> Finding:
        return Finding(
            id=self.id,
            severity=severity,
            observed=observed,
            expected=expected,
            message=message,
            guideline=self.guideline,
            key=key if key is not None else (self.keys[0] if self.keys else ""),
            fixes=fixes if severity != "ok" else (),
            title=self.title,
        )

    def egress(self, env: AuditEnv) -> InterfaceInfo | Finding:
        """The egress interface, or the finding that skips this check for want of one."""
        iface = env.network.interface
        if iface is None:
            reason = env.network.interface_missing_reason or "unknown"
            return self.finding("info", "no egress interface", "-", f"Skipped: {reason}.")
        return iface

    def fix(self, key: str, value: str) -> Fix:
        return sysctl_fix(self.id, key, value, self.why, self.guideline, self.answers)

    def command_fix(
        self, key: str, value: str, command: str, *, name: str | None = None, why: str | None = None
    ) -> Fix:
        """A fix that is a command, not a sysctl (ip link, ethtool, tc, echo > /sys/...).
        `name` ends the fix's id where the key does not; `why` stands for the check's own
        reason where the fix has one of its own (a missing module, not the setting)."""
        return Fix(
            id=f"{self.id}:{key if name is None else name}",
            kind="other",
            host="local",
            key=key,
            value=value,
            command=command,
            why=self.why if why is None else why,
            guideline=self.guideline,
            answers=self.answers,
        )


class EgressCheck(Check):
    """A check of the egress interface: `judge` sees it; without one the check is skipped."""

    def evaluate(self, env: AuditEnv) -> Finding:
        iface = self.egress(env)
        if isinstance(iface, Finding):
            return iface
        return self.judge(env, iface)

    @abstractmethod
    def judge(self, env: AuditEnv, iface: InterfaceInfo) -> Finding: ...
