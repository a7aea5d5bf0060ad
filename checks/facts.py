"""A host's raw facts (every sysctl the audit read, interface, route, cached metrics, RAM), so
the far end's audit can be re-judged by the client against the path it measured — `serve`
cannot know the BDP, the client can.

serve gathers facts by running the real audit and shipping what it read; the client replays
the same checks over a reader backed by those values.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import psutil

from tcpwizard.checks.audit import audit
from tcpwizard.checks.model import BdpTarget, Fix, HostAudit, HostRole, InterfaceInfo, RouteInfo
from tcpwizard.checks.netinfo import NetworkFacts, gather_network
from tcpwizard.checks.sysctl import SysctlMissing, SysctlReader
from tcpwizard.checks.tcp_metrics import MetricsEntry

FACTS_VERSION = 1


class MappingReader(SysctlReader):
    """A SysctlReader over recorded values: a key that was not recorded is missing."""

    def __init__(self, values: Mapping[str, str]) -> None:
        super().__init__("/nonexistent")
        self.values = dict(values)

    def exists(self, key: str) -> bool:
        return key in self.values

    def read(self, key: str) -> str:
        try:
            return self.values[key]
        except KeyError:
            raise SysctlMissing(key, "not reported by the far end") from None


@dataclass(frozen=True)
class HostFacts:
    sysctls: tuple[tuple[str, str], ...]
    network: NetworkFacts
    ram_bytes: int
    page_size: int
    target_address: str | None  # the address the facts' route/metrics were looked up for


def gather_facts(sysctl_root: str, target: str | None, sys_root: str = "/sys") -> HostFacts:
    network = gather_network(target, sys_root)
    ram = psutil.virtual_memory().total
    page = os.sysconf("SC_PAGE_SIZE")
    recorded = audit(
        SysctlReader(sysctl_root), target, network=network, ram_bytes=ram, page_size=page
    )
    return HostFacts(recorded.sysctls, network, ram, page, target)


def audit_facts(facts: HostFacts, bdp: BdpTarget | None, role: HostRole = "peer") -> HostAudit:
    """The audit of the host the facts came from, judged against `bdp`; its fixes are
    addressed to `role` (the far end's fixes must say `peer`)."""
    result = audit(
        MappingReader(dict(facts.sysctls)),
        facts.target_address,
        bdp,
        network=facts.network,
        ram_bytes=facts.ram_bytes,
        page_size=facts.page_size,
    )
    if role == "local":
        return result
    findings = tuple(
        replace(f, fixes=tuple(_readdress(x, role) for x in f.fixes)) for f in result.findings
    )
    return replace(result, findings=findings)


def _readdress(fix: Fix, role: HostRole) -> Fix:
    return replace(fix, host=role) if fix.host == "local" else fix


def facts_json(facts: HostFacts) -> dict[str, Any]:
    return {
        "facts_version": FACTS_VERSION,
        "sysctls": dict(facts.sysctls),
        "network": dataclasses.asdict(facts.network),
        "ram_bytes": facts.ram_bytes,
        "page_size": facts.page_size,
        "target_address": facts.target_address,
    }


class FactsError(ValueError):
    pass


def _build(cls: type[Any], data: Any) -> Any:
    if data is None:
        return None
    if not isinstance(data, dict):
        raise FactsError(f"{cls.__name__}: expected an object")
    names = {f.name for f in dataclasses.fields(cls)}
    try:
        return cls(**{k: v for k, v in data.items() if k in names})
    except TypeError as exc:
        raise FactsError(f"{cls.__name__}: {exc}") from None


def facts_from_json(data: Any) -> HostFacts:
    """Rebuild facts sent by serve; anything malformed is a FactsError, never a crash."""
    if not isinstance(data, dict) or data.get("facts_version") != FACTS_VERSION:
        raise FactsError("not a tcpwizard host-facts object of a known version")
    sysctls = data.get("sysctls")
    if not isinstance(sysctls, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in sysctls.items()
    ):
        raise FactsError("sysctls must map names to strings")
    net = data.get("network")
    if not isinstance(net, dict):
        raise FactsError("network facts missing")
    iface_raw = net.get("interface")
    iface = None
    if isinstance(iface_raw, dict):
        route = _build(RouteInfo, iface_raw.get("route"))
        iface = _build(InterfaceInfo, {**iface_raw, "route": route})
    metrics_raw = net.get("metrics")
    metrics = (
        tuple(_build(MetricsEntry, m) for m in metrics_raw)
        if isinstance(metrics_raw, list)
        else None
    )
    network = NetworkFacts(
        iface,
        str(net.get("interface_missing_reason", "")),
        metrics,
        str(net.get("metrics_missing_reason", "")),
    )
    ram, page = data.get("ram_bytes"), data.get("page_size")
    if not isinstance(ram, int) or not isinstance(page, int):
        raise FactsError("ram_bytes and page_size must be integers")
    target = data.get("target_address")
    return HostFacts(
        tuple(sorted(sysctls.items())),
        network,
        ram,
        page,
        target if isinstance(target, str) else None,
    )
