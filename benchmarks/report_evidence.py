"""A saved `check --json` report read back into the verdict's Evidence, so stored reports
(the scenario matrix keeps every one) can be judged again by the rules as they are now.

The JSON contract (wizard/output/json_format.py) is built field by field from the report's
dataclasses; this reads it the other way, generically by field name and type, with the few
reshaped objects (a host's interface, the BDP target, the available bandwidth) spelled out.
What the contract leaves out cannot come back: a finding's fixes beyond their ids, the
receiving socket's own view of a download (`ReceiverView`), the routers' quotes of the SYN
and whether a silent far end stopped answering. Rules that need those judge without them.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from typing import Any, TypeVar

from tcpwizard.advice.evidence import Evidence
from tcpwizard.checks.model import BdpTarget, Finding, Fix, HostAudit, InterfaceInfo, RouteInfo
from tcpwizard.measure.model import Direction, PathEstimate, RttStats, TransferResult
from tcpwizard.measure.observe.handshake import HandshakeFacts
from tcpwizard.measure.observe.synopts import SynOptions
from tcpwizard.measure.probes.availbw import AvailBandwidth

T = TypeVar("T")
# Names the models import only for the type checker, needed to resolve their hints here.
_ONLY_TYPE_CHECKED = {"AvailBandwidth": AvailBandwidth}


class ReportError(ValueError):
    """The file is not a report this version can read back."""


def _convert(hint: Any, value: Any) -> Any:
    """`value` from JSON as the type `hint` says: nested dataclasses, tuples (a JSON object
    for a tuple of pairs), optionals; plain values as they are."""
    if value is None:
        return None
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in typing.get_args(hint) if a is not type(None)]
        return _convert(inner[0], value) if len(inner) == 1 else value
    if origin is tuple:
        item = typing.get_args(hint)[0]
        items = value.items() if isinstance(value, Mapping) else value
        return tuple(_convert(item, v) for v in items)
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return from_fields(hint, value)
    if hint is float and isinstance(value, int):
        return float(value)
    return value


def from_fields(cls: type[T], obj: Mapping[str, Any], **given: Any) -> T:
    """An instance of the dataclass `cls` from the JSON object of its fields by name; a
    field the object lacks takes its default, `given` overrides."""
    if not isinstance(obj, Mapping):
        raise ReportError(f"{cls.__name__}: expected an object, got {type(obj).__name__}")
    hints = typing.get_type_hints(cls, localns=_ONLY_TYPE_CHECKED)
    kwargs = dict(given)
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        if f.name in kwargs or f.name not in obj:
            continue
        kwargs[f.name] = _convert(hints[f.name], obj[f.name])
    try:
        return cls(**kwargs)
    except TypeError as e:
        raise ReportError(f"{cls.__name__}: {e}") from None


def _interface(obj: Mapping[str, Any] | None) -> InterfaceInfo | None:
    """The contract sums each direction's counters; the sum is kept on the receive side."""
    if obj is None:
        return None
    route = obj.get("route")
    return from_fields(
        InterfaceInfo,
        obj,
        is_loopback=obj["loopback"],
        rx_packets=obj["packets"],
        tx_packets=0,
        rx_dropped=obj["drops"],
        tx_dropped=0,
        rx_errors=obj["errors"],
        tx_errors=0,
        route=None if route is None else from_fields(RouteInfo, route),
    )


def _target(obj: Mapping[str, Any] | None) -> BdpTarget | None:
    if obj is None:
        return None
    return BdpTarget(obj["rtt_ms"] / 1e3, obj["bandwidth_mbps"] * 1e6, obj["source"])


def _finding(obj: Mapping[str, Any], fixes: Mapping[str, Fix]) -> Finding:
    found = tuple(fixes[i] for i in obj.get("fix_ids", ()) if i in fixes)
    return from_fields(Finding, obj, fixes=found)


def host_audit(obj: Mapping[str, Any], fixes: Mapping[str, Fix]) -> HostAudit:
    """A host's audit; a finding keeps those of its fixes that the report printed."""
    return from_fields(
        HostAudit,
        obj,
        findings=tuple(_finding(f, fixes) for f in obj.get("findings", ())),
        target=_target(obj.get("target_bdp")),
        interface=_interface(obj.get("interface")),
    )


def _available(av: Mapping[str, Any] | None, direction: Direction) -> AvailBandwidth | None:
    if av is None:
        return None
    return AvailBandwidth(
        av["mbps"] * 1e6,
        av["low_mbps"] * 1e6,
        av["high_mbps"] * 1e6,
        av["capacity_mbps"] * 1e6,
        av["elapsed_s"],
        av["streams"],
        av["loaded_streams"],
        av["packets"],
        av.get("note", ""),
        direction,
    )


def path_estimate(obj: Mapping[str, Any]) -> PathEstimate:
    return from_fields(
        PathEstimate,
        obj,
        rtt=from_fields(RttStats, obj["rtt_ms"]),
        available=_available(obj.get("available"), "up"),
        available_down=_available(obj.get("available_down"), "down"),
    )


def transfer_result(obj: Mapping[str, Any]) -> TransferResult:
    cc = obj.get("congestion_control") or {}
    return from_fields(
        TransferResult,
        obj,
        local_congestion_control=cc.get("local", ""),
        peer_congestion_control=cc.get("peer", ""),
    )


def handshake(obj: Mapping[str, Any] | None, local: HostAudit) -> HandshakeFacts | None:
    """What the far end agreed to; what this host offered is read from its own sysctls."""
    if obj is None:
        return None
    offered = {k: local.sysctl(f"net.ipv4.tcp_{k}") != "0" for k in ("window_scaling", "sack")}
    rtt = obj.get("rtt_ms")
    return from_fields(
        HandshakeFacts,
        obj,
        rtt_us=None if rtt is None else round(rtt * 1e3),
        local_scaling_offered=offered["window_scaling"],
        local_sack_offered=offered["sack"],
        local_timestamps_offered=local.sysctl("net.ipv4.tcp_timestamps") != "0",
        received_syn=SynOptions.from_wire(obj.get("received_syn")),
    )


def evidence(report: Mapping[str, Any]) -> Evidence:
    """The Evidence a saved check report was judged on, as far as the contract keeps it.
    The fixes are those the report printed (the verdict's; enough to judge again, since
    fixes follow the verdict and never choose it)."""
    if not isinstance(report, Mapping):
        raise ReportError("not a check report: the file holds no JSON object")
    try:
        fixes = {f["id"]: from_fields(Fix, f) for f in report.get("fixes", ())}
        local = host_audit(report["host"], fixes)
        peer = None if report.get("peer") is None else host_audit(report["peer"], fixes)
        path = None if report.get("path") is None else path_estimate(report["path"])
        transfer = report.get("transfer")
        return Evidence(
            local,
            peer,
            path,
            None if transfer is None else transfer_result(transfer),
            local_fixes=tuple(f for f in fixes.values() if f.host == "local"),
            peer_fixes=tuple(f for f in fixes.values() if f.host != "local"),
            peer_handshake=handshake(report.get("peer_handshake"), local),
        )
    except (KeyError, TypeError, AttributeError) as e:
        # A part of another shape than the contract's (a list for an object, say).
        raise ReportError(f"not a check report this version reads: {e}") from None
