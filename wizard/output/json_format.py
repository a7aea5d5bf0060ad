"""The versioned JSON contract of DESIGN.md, built field by field from the Report
dataclasses (never from loose dicts), validated by docs/report.schema.json."""

from __future__ import annotations

import dataclasses
import json
from typing import TYPE_CHECKING, Any, TextIO

from tcpwizard import TOOL_NAME, __version__
from tcpwizard.advice.middlebox import syn_tampering
from tcpwizard.advice.model import Verdict
from tcpwizard.checks.model import (
    BdpTarget,
    Finding,
    Fix,
    HostAudit,
    InterfaceInfo,
)
from tcpwizard.measure.model import PathEstimate, TransferResult
from tcpwizard.output import measure_json
from tcpwizard.report import SCHEMA_VERSION, Report
from tcpwizard.timing import CheckTiming

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

Json = dict[str, Any]


def fields_json(obj: DataclassInstance, leave_out: tuple[str, ...] = ()) -> Json:
    """A dataclass of plain values whose JSON is its fields, by their names and in their
    order; `leave_out` names the fields that are not part of the contract."""
    fields = dataclasses.fields(obj)
    return {f.name: getattr(obj, f.name) for f in fields if f.name not in leave_out}


def fix_json(fix: Fix) -> Json:
    return fields_json(fix, leave_out=("answers",))  # which factors it answers stays inside


def finding_json(f: Finding) -> Json:
    return {
        "id": f.id,
        "title": f.title,
        "severity": f.severity,
        "key": f.key,
        "observed": f.observed,
        "expected": f.expected,
        "message": f.message,
        "guideline": f.guideline,
        "fix_ids": [x.id for x in f.fixes],
    }


def bdp_json(t: BdpTarget | None) -> Json | None:
    if t is None:
        return None
    return {
        "rtt_ms": round(t.rtt_s * 1000, 6),
        "bandwidth_mbps": round(t.rate_bps / 1e6, 6),
        "bdp_bytes": t.bdp_bytes,
        "source": t.source,
    }


def interface_json(i: InterfaceInfo | None) -> Json | None:
    if i is None:
        return None
    route = i.route
    return {
        "name": i.name,
        "mtu": i.mtu,
        "txqueuelen": i.txqueuelen,
        "qdisc": i.qdisc,
        "speed_mbps": i.speed_mbps,
        "duplex": i.duplex,
        "loopback": i.is_loopback,
        "drops": i.rx_dropped + i.tx_dropped,
        "errors": i.rx_errors + i.tx_errors,
        "packets": i.rx_packets + i.tx_packets,
        "route": None
        if route is None
        else {
            "destination": route.destination,
            "gateway": route.gateway,
            "window": route.window,
            "rtt_ms": route.rtt_ms,
            "initcwnd": route.initcwnd,
            "initrwnd": route.initrwnd,
        },
    }


def host_json(a: HostAudit) -> Json:
    return {
        "hostname": a.hostname,
        "kernel": a.kernel,
        "congestion_control": a.congestion_control,
        "worst": a.worst,
        "findings": [finding_json(f) for f in a.findings],
        "ceilings": [fields_json(c) for c in a.ceilings],
        "target_bdp": bdp_json(a.target),
        "interface": interface_json(a.interface),
        "sysctls": dict(a.sysctls),
        "ram_bytes": a.ram_bytes,
        "streams": a.streams,
        "host_facts": dict(a.host_facts),
    }


def path_json(p: PathEstimate | None) -> Json | None:
    if p is None:
        return None
    return measure_json.path_json(p)


def transfer_json(t: TransferResult | None, idle_ms: float | None = None) -> Json | None:
    if t is None:
        return None
    return measure_json.transfer_json(t, idle_ms)


def verdict_json(v: Verdict) -> Json:
    out: Json = {
        "limiting_factor": v.limiting_factor,
        "confidence": v.confidence,
        "host_to_fix": v.host_to_fix,
        "explanation": v.explanation,
        "evidence": list(v.evidence),
        "wizard_gap": {
            "current_mbps": v.wizard_gap.current_mbps,
            "tuned_mbps": v.wizard_gap.tuned_mbps,
            "measured": v.wizard_gap.measured,
            "tuned_mode": v.wizard_gap.tuned_mode,
        },
    }
    if v.basis is not None:
        out["calibration"] = {
            "rule_confidence": v.basis.rule_confidence,
            "matrix_runs": v.basis.runs,
            "matrix_right": v.basis.right,
        }
    return out


def report_json(r: Report) -> Json:
    doc = _report_fields(r)
    if r.error is not None:
        doc["error"] = r.error
    if r.hops is not None and r.hops_advice is not None:
        from tcpwizard.output.path_json import hops_json

        doc["hops"] = hops_json(r.hops, r.hops_advice)
    if r.timing is not None:
        doc["timing"] = timing_json(r.timing)
    return doc


def timing_json(t: CheckTiming) -> Json:
    over = t.over_floor
    return {
        "seconds": t.seconds,
        "stages": dict(t.stages),
        "floor_s": t.floor_s,
        "floor": t.floor,
        "over_floor": None if over is None else round(over, 2),
    }


def _report_fields(r: Report) -> Json:
    return {
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": TOOL_NAME, "version": __version__},
        "target": None
        if r.target is None
        else {"host": r.target.host, "address": r.target.address, "port": r.target.port},
        "host": host_json(r.host),
        "peer": None if r.peer is None else host_json(r.peer),
        "path": path_json(r.path),
        "transfer": transfer_json(r.transfer, r.path.rtt.min if r.path else None),
        "verdict": verdict_json(r.verdict),
        "fixes": [fix_json(f) for f in r.fixes],
        "notes": list(r.notes),
        "exit_code": int(r.exit_code),
        "measured": r.measured,
        "far_end": None
        if r.far_end is None
        else {
            "kind": r.far_end.kind,
            "port": r.far_end.port,
            "description": r.far_end.description,
            "missing": list(r.far_end.missing),
        },
        "peer_handshake": handshake_json(r),
    }


def handshake_json(r: Report) -> Json | None:
    hs = r.peer_handshake
    if hs is None:
        return None
    return {
        "source": hs.source,
        "port": hs.port,
        "window_scaling": hs.window_scaling,
        "peer_wscale": hs.peer_wscale,
        "max_peer_window_bytes": hs.max_peer_window,
        "sack": hs.sack,
        "timestamps": hs.timestamps,
        "peer_mss": hs.peer_mss,
        "rtt_ms": None if hs.rtt_us is None else round(hs.rtt_us / 1e3, 3),
        "findings": [finding_json(f) for f in r.peer_handshake_findings],
        # What our SYN carried and how it arrived (docs/middlebox.md).
        "local_mss": hs.local_mss,
        "received_syn": None if hs.received_syn is None else hs.received_syn.to_wire(),
        "tampering": [
            {"option": t.option, "direction": t.direction, "sent": t.sent, "received": t.received}
            for t in syn_tampering(hs, r.peer)
        ],
    }


def render(r: Report, stream: TextIO) -> None:
    json.dump(report_json(r), stream, indent=2)
    stream.write("\n")
