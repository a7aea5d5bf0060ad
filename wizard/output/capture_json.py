"""`check --pcap FILE --json`: the document and its JSON Schema, built from the frozen
CaptureReport. `make schema` writes the committed schema (docs/capture.schema.json); a test
fails when it is stale."""

from __future__ import annotations

import json
from typing import Any, TextIO

from tcpwizard import TOOL_NAME, __version__
from tcpwizard.advice.capture import CaptureDiagnosis, CaptureReport
from tcpwizard.exitcodes import ExitCode
from tcpwizard.measure.observe.capture import FlowDirection, SynOptions
from tcpwizard.output.conns_json import VERDICT_SCHEMA
from tcpwizard.output.json_format import fix_json
from tcpwizard.output.schema import (
    BOOL,
    FIX,
    INT,
    NUM,
    STR,
    Schema,
    arr,
    document,
    nullable,
    obj,
    text_of,
)

CAPTURE_SCHEMA_VERSION = 1
Json = dict[str, Any]


def _syn(s: SynOptions | None) -> Json | None:
    if s is None:
        return None
    return {
        "mss": s.mss,
        "wscale": s.wscale,
        "sack": s.sack,
        "timestamps": s.timestamps,
        "window": s.window,
    }


def _r(x: float | None, n: int = 3) -> float | None:
    return None if x is None else round(x, n)


def flow_json(f: FlowDirection) -> Json:
    return {
        "sender": {"address": f.sender, "port": f.sender_port},
        "receiver": {"address": f.receiver, "port": f.receiver_port},
        "handshake": f.handshake,
        "sender_syn": _syn(f.sender_syn),
        "receiver_syn": _syn(f.receiver_syn),
        "window_scaling": f.scaling,
        "bytes": f.bytes,
        "seconds": _r(f.seconds),
        "rate_mbps": _r(f.rate_mbps),
        "steady_mbps": _r(f.steady_mbps),
        "data_packets": f.data_packets,
        "retransmits": f.retransmits,
        "retransmitted_bytes": f.retransmitted_bytes,
        "loss_episodes": f.loss_episodes,
        "late_loss_episodes": f.late_loss_episodes,
        "rtt_min_ms": _r(f.rtt_min_ms),
        "rtt_p50_ms": _r(f.rtt_p50_ms),
        "rtt_samples": f.rtt_samples,
        "mss": f.mss,
        "max_window": f.max_window,
        "window_p50": f.window_p50,
        "inflight_p50": f.inflight_p50,
        "inflight_max": f.inflight_max,
        "window_full_share": _r(f.window_full_share),
        "zero_windows": f.zero_windows,
        "zero_window_s": _r(f.zero_window_s),
        "idle_share": _r(f.idle_share),
        "edge_still_share": _r(f.edge_still_share),
        "held_ack_share": _r(f.held_ack_share),
    }


def diagnosis_json(d: CaptureDiagnosis) -> Json:
    v = d.verdict
    return {
        "flow": flow_json(d.direction),
        "sender_host": d.sender_role,
        "receiver_host": d.receiver_role,
        "verdict": {
            "limiting_factor": v.limiting_factor,
            "confidence": round(v.confidence, 2),
            "host_to_fix": v.host_to_fix,
            "explanation": v.explanation,
            "evidence": list(v.evidence),
        },
        "fixes": [fix_json(f) for f in d.fixes],
    }


def capture_json(report: CaptureReport, code: ExitCode) -> Json:
    s = report.summary
    return {
        "schema_version": CAPTURE_SCHEMA_VERSION,
        "tool": {"name": TOOL_NAME, "version": __version__},
        "capture": {
            "path": s.path,
            "packets": s.packets,
            "tcp_packets": s.tcp_packets,
            "skipped": s.skipped,
            "link_types": list(s.link_types),
            "seconds": round(s.seconds, 3),
        },
        "diagnosis": None if report.diagnosis is None else diagnosis_json(report.diagnosis),
        "others": [diagnosis_json(o) for o in report.others],
        "notes": list(report.notes),
        "exit_code": int(code),
    }


def render(report: CaptureReport, code: ExitCode, stream: TextIO) -> None:
    stream.write(json.dumps(capture_json(report, code), indent=2) + "\n")
    stream.flush()


_ENDPOINT = obj({"address": STR, "port": INT})
_SYN = nullable(
    obj(
        {
            "mss": nullable(INT),
            "wscale": nullable(INT),
            "sack": BOOL,
            "timestamps": BOOL,
            "window": INT,
        }
    )
)
FLOW = obj(
    {
        "sender": _ENDPOINT,
        "receiver": _ENDPOINT,
        "handshake": BOOL,
        "sender_syn": _SYN,
        "receiver_syn": _SYN,
        "window_scaling": nullable(BOOL),
        **{k: NUM for k in ("seconds", "rate_mbps", "steady_mbps", "window_full_share")},
        **{k: NUM for k in ("zero_window_s", "idle_share", "edge_still_share", "held_ack_share")},
        "rtt_min_ms": nullable(NUM),
        "rtt_p50_ms": nullable(NUM),
        **{
            k: INT
            for k in (
                "bytes",
                "data_packets",
                "retransmits",
                "retransmitted_bytes",
                "loss_episodes",
                "late_loss_episodes",
                "rtt_samples",
                "mss",
                "max_window",
                "window_p50",
                "inflight_p50",
                "inflight_max",
                "zero_windows",
            )
        },
    }
)
_HOST = {"enum": ["local", "peer", "both", "path"]}
DIAGNOSIS = obj(
    {
        "flow": FLOW,
        "sender_host": _HOST,
        "receiver_host": _HOST,
        "verdict": VERDICT_SCHEMA,
        "fixes": arr(FIX),
    }
)


def capture_schema() -> Schema:
    body = obj(
        {
            "schema_version": {"const": CAPTURE_SCHEMA_VERSION},
            "tool": obj({"name": {"const": "tcpwizard"}, "version": STR}),
            "capture": obj(
                {
                    "path": STR,
                    "packets": INT,
                    "tcp_packets": INT,
                    "skipped": INT,
                    "link_types": arr(INT),
                    "seconds": NUM,
                }
            ),
            "diagnosis": nullable(DIAGNOSIS),
            "others": arr(DIAGNOSIS),
            "notes": arr(STR),
            "exit_code": INT,
        }
    )
    return document(
        "capture",
        "tcpwizard check --pcap",
        "Output of `tcpwizard check --pcap FILE --json` "
        f"(schema_version {CAPTURE_SCHEMA_VERSION}).",
        body,
    )


def schema_text() -> str:
    return text_of(capture_schema())
