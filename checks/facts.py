"""A host's raw facts (every sysctl the audit read, interface, route, cached metrics, RAM), so
the far end's audit can be re-judged by the client against the path it measured — `serve`
cannot know the BDP, the client can.

serve gathers facts by running the real audit and shipping what it read; the client replays
the same checks over a reader backed by those values.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal, Union

from tcpwizard.checks.audit import audit, total_ram_bytes
from tcpwizard.checks.hostread import HostReader, RecordedHost
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
    # NIC/CPU facts (checks/hostread.py keys); empty from far ends that predate them.
    host_values: tuple[tuple[str, str], ...] = ()


def gather_facts(sysctl_root: str, target: str | None, sys_root: str = "/sys") -> HostFacts:
    network = gather_network(target, sys_root)
    ram = total_ram_bytes()
    page = os.sysconf("SC_PAGE_SIZE")
    recorded = audit(
        SysctlReader(sysctl_root),
        target,
        network=network,
        ram_bytes=ram,
        page_size=page,
        host=HostReader(sys_root),
    )
    return HostFacts(recorded.sysctls, network, ram, page, target, recorded.host_facts)


def audit_facts(
    facts: HostFacts, bdp: BdpTarget | None, role: HostRole = "peer", streams: int = 1
) -> HostAudit:
    """The audit of the host the facts came from, judged against `bdp` and `streams`; its
    fixes are addressed to `role` (the far end's fixes must say `peer`)."""
    result = audit(
        MappingReader(dict(facts.sysctls)),
        facts.target_address,
        bdp,
        network=facts.network,
        ram_bytes=facts.ram_bytes,
        page_size=facts.page_size,
        host=RecordedHost(dict(facts.host_values), "not reported by the far end"),
        streams=streams,
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
        "host": dict(facts.host_values),
    }


# types.UnionType (X | Y) is Python 3.10+; this module also runs on 3.9 far ends (zipapp).
_UNION_ORIGINS = (Union, getattr(types, "UnionType", Union))


class FactsError(ValueError):
    pass


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
MAX_TEXT = 4096
MAX_HOST_FACTS = 5000  # a 256-CPU host with as many NIC IRQs stays well below
MAX_INT = 2**63


def clean_text(value: Any, what: str) -> str:
    """Text from the far end, safe to print: no control characters (terminal escapes)."""
    if not isinstance(value, str) or len(value) > MAX_TEXT:
        raise FactsError(f"{what}: expected text of at most {MAX_TEXT} characters")
    return _CONTROL.sub("?", value)


_CONTROL_BUT_LINES = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
MAX_FACT_TEXT = 1 << 16  # `tc -j qdisc` of a 64-queue NIC runs to ~16 KB


def _clean_fact(value: Any, key: str) -> str:
    """A host fact's text (program output keeps its lines and tabs), safe to print."""
    if not isinstance(value, str) or len(value) > MAX_FACT_TEXT:
        raise FactsError(
            f"host fact {key[:60]}: expected text of at most {MAX_FACT_TEXT} characters"
        )
    return _CONTROL_BUT_LINES.sub("?", value)


def _typed(value: Any, hint: Any, what: str) -> Any:
    """`value` if it has the type `hint` names (int, float, str, bool, Literal, X | None)."""
    options = typing.get_args(hint) if typing.get_origin(hint) in _UNION_ORIGINS else (hint,)
    if value is None and type(None) in options:
        return None
    number = isinstance(value, int | float) and not isinstance(value, bool)
    for opt in options:
        if typing.get_origin(opt) is Literal and value in typing.get_args(opt):
            return value
        if opt is bool and isinstance(value, bool):
            return value
        if opt is int and number and isinstance(value, int) and -MAX_INT < value < MAX_INT:
            return value
        if opt is float and number and math.isfinite(value):
            return float(value)
        if opt is str and isinstance(value, str):
            return clean_text(value, what)
    raise FactsError(f"{what}: unexpected value {str(value)[:40]!r}")


def _build(cls: type[Any], data: Any, **given: Any) -> Any:
    """An instance of the dataclass `cls` from untrusted JSON, every field type-checked."""
    if data is None:
        return None
    if not isinstance(data, dict):
        raise FactsError(f"{cls.__name__}: expected an object")
    hints = typing.get_type_hints(cls)
    fields: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.name in given:
            fields[f.name] = given[f.name]
        elif f.name in data:
            fields[f.name] = _typed(data[f.name], hints[f.name], f"{cls.__name__}.{f.name}")
        elif f.default is dataclasses.MISSING:
            raise FactsError(f"{cls.__name__}: {f.name} missing")
    return cls(**fields)


def facts_from_json(data: Any) -> HostFacts:
    """Rebuild facts sent by serve; anything malformed is a FactsError, never a crash."""
    if not isinstance(data, dict) or data.get("facts_version") != FACTS_VERSION:
        raise FactsError("not a tcpwizard host-facts object of a known version")
    raw = data.get("sysctls")
    if not isinstance(raw, dict) or len(raw) > 1000:
        raise FactsError("sysctls must map names to strings")
    sysctls = {clean_text(k, "sysctl name"): clean_text(v, f"sysctl {k}") for k, v in raw.items()}
    net = data.get("network")
    if not isinstance(net, dict):
        raise FactsError("network facts missing")
    iface_raw = net.get("interface")
    iface = None
    if isinstance(iface_raw, dict):
        route = _build(RouteInfo, iface_raw.get("route"))
        iface = _build(InterfaceInfo, iface_raw, route=route)
    metrics_raw = net.get("metrics")
    metrics = None
    if isinstance(metrics_raw, list):
        if len(metrics_raw) > 10000 or not all(isinstance(m, dict) for m in metrics_raw):
            raise FactsError("metrics must be a list of objects")
        metrics = tuple(_build(MetricsEntry, m) for m in metrics_raw)
    network = NetworkFacts(
        iface,
        clean_text(net.get("interface_missing_reason", ""), "interface_missing_reason"),
        metrics,
        clean_text(net.get("metrics_missing_reason", ""), "metrics_missing_reason"),
    )
    ram = _typed(data.get("ram_bytes"), int, "ram_bytes")
    page = _typed(data.get("page_size"), int, "page_size")
    if ram <= 0 or page <= 0:
        raise FactsError("ram_bytes and page_size must be positive")
    target = data.get("target_address")
    if target is not None:
        target = clean_text(target, "target_address")
    host_raw = data.get("host", {})
    if not isinstance(host_raw, dict) or len(host_raw) > MAX_HOST_FACTS:
        raise FactsError("host facts must map names to strings")
    host = {clean_text(k, "host fact name"): _clean_fact(v, k) for k, v in host_raw.items()}
    return HostFacts(
        tuple(sorted(sysctls.items())),
        network,
        ram,
        page,
        target if isinstance(target, str) else None,
        tuple(sorted(host.items())),
    )
