"""`tcpwizard conns --json`: the document and its JSON Schema (draft 2020-12), built here
from the frozen ConnsReport. `make schema` writes the committed schema
(docs/conns.schema.json); a test fails when it is stale."""

from __future__ import annotations

import json
from typing import Any, TextIO

from tcpwizard import TOOL_NAME, __version__
from tcpwizard.conns_report import ConnEntry, ConnsReport
from tcpwizard.output.json_format import fix_json
from tcpwizard.output.schema import (
    BOOL,
    FIX,
    INT,
    NUM,
    STR,
    VERDICT_FIELDS,
    Schema,
    arr,
    document,
    nullable,
    obj,
    text_of,
)

CONNS_SCHEMA_VERSION = 1
Json = dict[str, Any]


def _r(x: float, digits: int = 3) -> float:
    return round(x, digits)


def entry_json(e: ConnEntry) -> Json:
    o, d = e.observation, e.diagnosis
    v = d.verdict
    return {
        "local": {"address": o.key.local, "port": o.key.local_port},
        "remote": {"address": o.key.remote, "port": o.key.remote_port},
        "process": None
        if e.owner is None
        else {
            "pid": e.owner.pid,
            "name": e.owner.name,
            "cmdline": e.owner.cmdline,
            "user": e.owner.user,
        },
        "role": d.role,
        "send_mbps": _r(o.send_mbps),
        "recv_mbps": _r(o.recv_mbps),
        "tcp_info": {
            "busy": _r(o.busy),
            "rwnd_limited": _r(o.rwnd_limited),
            "sndbuf_limited": _r(o.sndbuf_limited),
            "rtt_ms": _r(o.rtt_ms),
            "min_rtt_ms": _r(o.min_rtt_ms),
            "rcv_rtt_ms": _r(o.rcv_rtt_ms),
            "snd_cwnd": o.snd_cwnd,
            "snd_mss": o.snd_mss,
            "snd_wnd_max": o.snd_wnd_max,
            "snd_wnd_min": o.snd_wnd_min,
            "snd_wnd_first": o.snd_wnd_first,
            "snd_wnd_last": o.snd_wnd_last,
            "rcv_wnd_max": o.rcv_wnd_max,
            "rcv_wnd_min": o.rcv_wnd_min,
            "zero_window": o.zero_window,
            "retransmits": o.retransmits,
            "segs_out": o.segs_out,
            "ooo_packets": o.ooo_packets,
            "delivery_rate_mbps": _r(o.delivery_rate_mbps),
            "rqueue_max": o.rqueue_max,
            "rcvbuf": o.rcvbuf,
            "sndbuf": o.sndbuf,
            "congestion_control": o.congestion_control,
            "window_scaling": o.window_scaling,
            "snd_wscale": o.snd_wscale,
            "rcv_wscale": o.rcv_wscale,
            "app_limited": None if o.app_limited is None else _r(o.app_limited),
            "inflight_min": o.inflight_min,
            "inflight_p50": o.inflight_p50,
            "inflight_max": o.inflight_max,
            "zero_window_samples": o.zero_window_samples,
            "rcv_space": o.rcv_space,
            "rqueue_p50": o.rqueue_p50,
            "samples": o.samples,
        },
        "verdict": None
        if v is None
        else {
            "limiting_factor": v.limiting_factor,
            "confidence": _r(v.confidence, 2),
            "host_to_fix": v.host_to_fix,
            "explanation": v.explanation,
            "evidence": list(v.evidence),
        },
        "fixes": [fix_json(f) for f in d.fixes],
    }


def conns_json(report: ConnsReport) -> Json:
    return {
        "schema_version": CONNS_SCHEMA_VERSION,
        "tool": {"name": TOOL_NAME, "version": __version__},
        "hostname": report.hostname,
        "interval_s": _r(report.interval_s),
        "total": report.total,
        "filters": list(report.filters),
        "connections": [entry_json(e) for e in report.entries],
        "notes": list(report.notes),
        "exit_code": int(report.exit_code),
    }


def render(report: ConnsReport, stream: TextIO, lines: bool = False) -> None:
    """One document (indented), or one line per round with --watch (JSON lines)."""
    doc = conns_json(report)
    stream.write(json.dumps(doc) + "\n" if lines else json.dumps(doc, indent=2) + "\n")
    stream.flush()


_ENDPOINT = obj({"address": STR, "port": INT})
_PROCESS = obj({"pid": INT, "name": STR, "cmdline": STR, "user": STR})
_TCP_INFO = obj(
    {
        **{
            k: NUM
            for k in (
                "busy",
                "rwnd_limited",
                "sndbuf_limited",
                "rtt_ms",
                "min_rtt_ms",
                "rcv_rtt_ms",
                "delivery_rate_mbps",
            )
        },
        **{
            k: INT
            for k in (
                "snd_cwnd",
                "snd_mss",
                "snd_wnd_max",
                "snd_wnd_min",
                "snd_wnd_first",
                "snd_wnd_last",
                "rcv_wnd_max",
                "rcv_wnd_min",
                "retransmits",
                "segs_out",
                "ooo_packets",
                "rqueue_max",
            )
        },
        "rcvbuf": nullable(INT),
        "sndbuf": nullable(INT),
        "zero_window": BOOL,
        "congestion_control": STR,
        "window_scaling": BOOL,
        "snd_wscale": nullable(INT),
        "rcv_wscale": nullable(INT),
        # The application's part (advice/application.py): the share of samples the kernel
        # marked app-limited, bytes in flight (lowest, median, highest), zero-window samples.
        "app_limited": nullable(NUM),
        **{
            k: INT
            for k in (
                "inflight_min",
                "inflight_p50",
                "inflight_max",
                "zero_window_samples",
                "rcv_space",
                "rqueue_p50",
                "samples",
            )
        },
    }
)
VERDICT_SCHEMA = obj(VERDICT_FIELDS)
CONNECTION = obj(
    {
        "local": _ENDPOINT,
        "remote": _ENDPOINT,
        "process": nullable(_PROCESS),
        "role": {"enum": ["sending", "receiving", "idle"]},
        "send_mbps": NUM,
        "recv_mbps": NUM,
        "tcp_info": _TCP_INFO,
        "verdict": nullable(VERDICT_SCHEMA),
        "fixes": arr(FIX),
    }
)


def conns_schema() -> Schema:
    body = obj(
        {
            "schema_version": {"const": CONNS_SCHEMA_VERSION},
            "tool": obj({"name": {"const": "tcpwizard"}, "version": STR}),
            "hostname": STR,
            "interval_s": NUM,
            "total": INT,
            "filters": arr(STR),
            "connections": arr(CONNECTION),
            "notes": arr(STR),
            "exit_code": INT,
        }
    )
    return document(
        "conns",
        "tcpwizard conns",
        "Output of `tcpwizard conns --json` (one document per round with "
        f"--watch; schema_version {CONNS_SCHEMA_VERSION}).",
        body,
    )


def schema_text() -> str:
    return text_of(conns_schema())
