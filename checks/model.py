"""Result types of the host audit. Frozen dataclasses: JSON is built from these, never from
loose dicts (DESIGN.md rule 2)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Severity = Literal["ok", "info", "warn", "crit"]
FixKind = Literal["sysctl", "setsockopt", "route", "other"]
# "path": a device between the hosts (a policer, a middlebox, a bottleneck queue).
HostRole = Literal["local", "peer", "both", "path"]
TargetSource = Literal["flags", "default", "measured"]

SEVERITY_ORDER: dict[str, int] = {"ok": 0, "info": 1, "warn": 2, "crit": 3}


def worst_severity(severities: list[Severity]) -> Severity:
    worst: Severity = "ok"
    for s in severities:
        if SEVERITY_ORDER[s] > SEVERITY_ORDER[worst]:
            worst = s
    return worst


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
    # The limiting factors this fix answers: a verdict naming one of them prints it.
    answers: tuple[str, ...] = ()


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
    title: str = ""


@dataclass(frozen=True)
class ThroughputCeiling:
    """What a buffer limit allows at a given RTT: the table a non-expert needs.

    receive/send: an application that leaves buffers to kernel autotuning (most do);
    receive_app/send_app: an application that sets SO_RCVBUF/SO_SNDBUF itself (iperf3 -w,
    GridFTP, DRS), which is bounded by net.core.rmem_max/wmem_max instead."""

    rtt_ms: float
    receive_mbps: float
    send_mbps: float
    receive_app_mbps: float = 0.0
    send_app_mbps: float = 0.0


@dataclass(frozen=True)
class BdpTarget:
    """The path the buffers are judged against: from --rtt/--bandwidth, a measurement, or
    the documented default (DEFAULT_TARGET in tcpwizard.checks.window)."""

    rtt_s: float
    rate_bps: float
    source: TargetSource

    @property
    def bdp_bytes(self) -> int:
        return round(self.rate_bps * self.rtt_s / 8)


@dataclass(frozen=True)
class RouteInfo:
    """The route a packet to the target takes, with the metrics that clamp TCP."""

    destination: str  # the matching prefix, e.g. "default" or "10.0.0.0/8"
    gateway: str | None
    window: int | None  # RTAX_WINDOW: the largest window TCP may advertise (bytes)
    rtt_ms: float | None  # RTAX_RTT: the initial RTT estimate
    initcwnd: int | None
    initrwnd: int | None


@dataclass(frozen=True)
class InterfaceInfo:
    """The egress interface for the target (or the default route)."""

    name: str
    mtu: int
    txqueuelen: int
    qdisc: str | None
    speed_mbps: int | None  # None: the driver does not say (virtual devices)
    duplex: Literal["full", "half", "unknown"]
    is_loopback: bool
    rx_packets: int
    tx_packets: int
    rx_dropped: int
    tx_dropped: int
    rx_errors: int
    tx_errors: int
    source_address: str | None = None
    route: RouteInfo | None = None


@dataclass(frozen=True)
class HostAudit:
    hostname: str
    kernel: str
    findings: tuple[Finding, ...]
    congestion_control: str = ""
    # Raw values the diagnosis needs (e.g. "net.ipv4.tcp_rmem" -> "4096 131072 6291456").
    sysctls: tuple[tuple[str, str], ...] = ()
    ceilings: tuple[ThroughputCeiling, ...] = field(default_factory=tuple)
    target: BdpTarget | None = None
    interface: InterfaceInfo | None = None
    target_address: str | None = None
    ram_bytes: int | None = None
    notes: tuple[str, ...] = ()
    # NIC/CPU facts the 100G checks read (checks/hostread.py keys), for a far end's replay.
    host_facts: tuple[tuple[str, str], ...] = ()
    streams: int = 1  # the parallel streams the target was judged for (--streams)

    def sysctl(self, key: str) -> str | None:
        return dict(self.sysctls).get(key)

    @property
    def fixes(self) -> tuple[Fix, ...]:
        """Every fix of every finding, in finding order, without duplicates."""
        seen: set[str] = set()
        out: list[Fix] = []
        for f in self.findings:
            for fix in f.fixes:
                if fix.command not in seen:
                    seen.add(fix.command)
                    out.append(fix)
        return tuple(out)

    @property
    def worst(self) -> Severity:
        return worst_severity([f.severity for f in self.findings])
