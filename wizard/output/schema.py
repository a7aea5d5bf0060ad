"""JSON Schema (draft 2020-12) of the report `--json` prints. Written here, next to the
code that builds the JSON; `make schema` writes docs/report.schema.json and a test fails
when the committed file is stale or an actual report does not validate."""

from __future__ import annotations

import json
from typing import Any

from tcpwizard.advice.model import LIMITING_FACTORS
from tcpwizard.measure.model import TCP_INFO_FIELDS
from tcpwizard.report import SCHEMA_VERSION

Schema = dict[str, Any]

SEVERITIES = ["ok", "info", "warn", "crit"]


def obj(props: dict[str, Schema], optional: tuple[str, ...] = ()) -> Schema:
    return {
        "type": "object",
        "properties": props,
        "required": [k for k in props if k not in optional],
        "additionalProperties": False,
    }


def nullable(s: Schema) -> Schema:
    return {"anyOf": [s, {"type": "null"}]}


NUM: Schema = {"type": "number"}
INT: Schema = {"type": "integer"}
STR: Schema = {"type": "string"}
BOOL: Schema = {"type": "boolean"}


def arr(items: Schema) -> Schema:
    return {"type": "array", "items": items}


FINDING = obj(
    {
        "id": STR,
        "title": STR,
        "severity": {"enum": SEVERITIES},
        "key": STR,
        "observed": STR,
        "expected": STR,
        "message": STR,
        "guideline": STR,
        "fix_ids": arr(STR),
    }
)
FIX = obj(
    {
        "id": STR,
        "kind": {"enum": ["sysctl", "setsockopt", "route", "other"]},
        "host": {"enum": ["local", "peer", "both", "path"]},
        "key": STR,
        "value": STR,
        "command": STR,
        "why": STR,
        "guideline": STR,
    }
)
CEILING = obj(
    {
        "rtt_ms": NUM,
        "receive_mbps": NUM,
        "send_mbps": NUM,
        "receive_app_mbps": NUM,
        "send_app_mbps": NUM,
    }
)
BDP = obj(
    {
        "rtt_ms": NUM,
        "bandwidth_mbps": NUM,
        "bdp_bytes": INT,
        "source": {"enum": ["flags", "default", "measured"]},
    }
)
ROUTE = obj(
    {
        "destination": STR,
        "gateway": nullable(STR),
        "window": nullable(INT),
        "rtt_ms": nullable(NUM),
        "initcwnd": nullable(INT),
        "initrwnd": nullable(INT),
    }
)
INTERFACE = obj(
    {
        "name": STR,
        "mtu": INT,
        "txqueuelen": INT,
        "qdisc": nullable(STR),
        "speed_mbps": nullable(INT),
        "duplex": {"enum": ["full", "half", "unknown"]},
        "loopback": BOOL,
        "drops": INT,
        "errors": INT,
        "packets": INT,
        "route": nullable(ROUTE),
    }
)
HOST = obj(
    {
        "hostname": STR,
        "kernel": STR,
        "congestion_control": STR,
        "worst": {"enum": SEVERITIES},
        "findings": arr(FINDING),
        "ceilings": arr(CEILING),
        "target_bdp": nullable(BDP),
        "interface": nullable(INTERFACE),
        "sysctls": {"type": "object", "additionalProperties": STR},
        "ram_bytes": nullable(INT),
        "streams": INT,
        "host_facts": {"type": "object", "additionalProperties": STR},
    },
    optional=("streams", "host_facts"),
)
_CAPACITY = obj(
    {
        "mbps": NUM,
        "method": STR,
        "confidence": NUM,
        "pairs_mbps": nullable(NUM),
        "train_mbps": nullable(NUM),
        "limited_by": nullable(STR),
        "note": STR,
        "train_loss": nullable(NUM),
    },
    optional=("train_loss",),
)
_AVAILABLE = obj(
    {
        **{k: NUM for k in ("mbps", "low_mbps", "high_mbps", "capacity_mbps")},
        "free_share": NUM,
        "streams": INT,
        "loaded_streams": INT,
        "packets": INT,
        "elapsed_s": NUM,
        "note": STR,
    }
)
PATH = obj(
    {
        "rtt_ms": obj(
            {
                **{k: NUM for k in ("min", "p50", "p95", "mean", "mdev", "max", "loss_pct")},
                "jitter": NUM,
                "samples": INT,
                "method": STR,
            }
        ),
        "capacity_mbps": nullable(NUM),
        "capacity_method": nullable(STR),
        "bdp_bytes": nullable(INT),
        "capacity": nullable(_CAPACITY),
        "capacity_down": nullable(_CAPACITY),
        "peer": BOOL,
        "address": STR,
        "port": INT,
        "duration_s": NUM,
        "notes": arr(STR),
        # when measured (--avail, or a transfer fell short): toward the far end
        # (measure/probes/availbw.py) and back (availbw_down.py)
        "available": _AVAILABLE,
        "available_down": _AVAILABLE,
        # more round-trip probes at idle after the transfers (advice/idle_loss.py)
        "idle_loss": obj({"sent": INT, "lost": INT, "method": STR}),
    },
    optional=("available", "available_down", "idle_loss"),
)
TCP_INFO = obj({k: INT for k in TCP_INFO_FIELDS}, optional=("snd_wnd",))
SAMPLE = obj(
    {
        "t_s": NUM,
        "goodput_mbps": nullable(NUM),
        "rcvbuf_bytes": INT,
        "sndbuf_bytes": INT,
        "drs_bandwidth_mbps": nullable(NUM),
        "drs_rtt_ms": nullable(NUM),
        "tcp_info": nullable(TCP_INFO),
        "delivered_bytes": nullable(INT),
        "delivered_by": nullable(STR),
    },
    optional=("delivered_bytes", "delivered_by"),
)
HOST_LOAD = obj(
    {
        "seconds": NUM,
        "cores": arr(obj({"cpu": INT, "user": NUM, "system": NUM, "softirq": NUM, "busy": NUM})),
        "process_cores": NUM,
        "busiest_thread": NUM,
        "starved": NUM,
        "drops": nullable(
            obj(
                {
                    "softnet_dropped": INT,
                    "time_squeeze": INT,
                    "rx_dropped": INT,
                    "rx_missed_errors": INT,
                    "rx_fifo_errors": INT,
                    "tx_dropped": INT,
                    "qdisc_drops": INT,
                    "interface": STR,
                }
            )
        ),
    }
)
MODE = obj(
    {
        "mode": {"enum": ["untuned", "autotune", "static", "overprovisioned", "drs"]},
        "streams": INT,
        "throughput_mbps": nullable(NUM),
        "max_buffer_bytes": INT,
        "retransmits": INT,
        "samples": arr(SAMPLE),
        "direction": {"enum": ["up", "down"]},
        "bytes": INT,
        "bytes_sent": nullable(INT),
        "seconds": nullable(NUM),
        "mbps_per_mb": nullable(NUM),
        "rwnd_limited": nullable(NUM),
        "sndbuf_limited": nullable(NUM),
        "busy": nullable(NUM),
        "congestion_control": STR,
        "rcv_autotuning": BOOL,
        "forced": BOOL,
        "notes": arr(STR),
        "error": nullable(STR),
        "rate_bound_mbps": nullable(NUM),
        "write_s": nullable(NUM),
        "latency_under_load": nullable(
            obj(
                {
                    "idle_ms": NUM,
                    "median_ms": NUM,
                    "p90_ms": NUM,
                    "rpm": NUM,
                    "queue_bdps": NUM,
                    "samples": INT,
                    "source": STR,
                }
            )
        ),
        "rate_plateau_mbps": nullable(NUM),
        "sender_load": nullable(HOST_LOAD),
        "receiver_load": nullable(HOST_LOAD),
    }
)
TRANSFER = obj(
    {
        "direction": {"enum": ["up", "down", "both"]},
        "modes": arr(MODE),
        "streams": INT,
        "congestion_control": obj({"local": STR, "peer": STR}),
        "at_once": BOOL,
    }
)
# What every verdict says: the conns and capture documents carry only this much of it.
VERDICT_FIELDS: dict[str, Schema] = {
    "limiting_factor": {"enum": list(LIMITING_FACTORS)},
    "confidence": {"type": "number", "minimum": 0, "maximum": 1},
    "host_to_fix": {"enum": ["local", "peer", "both", "path", None]},
    "explanation": STR,
    "evidence": arr(STR),
}
VERDICT = obj(
    {
        **VERDICT_FIELDS,
        "wizard_gap": obj(
            {
                "current_mbps": nullable(NUM),
                "tuned_mbps": nullable(NUM),
                "measured": BOOL,
                "tuned_mode": nullable(STR),
            }
        ),
        # The rule's own confidence and the scenario matrix's runs that weighed it
        # (advice/calibration.py); absent when the factor is not in the table.
        "calibration": obj(
            {
                "rule_confidence": {"type": "number", "minimum": 0, "maximum": 1},
                "matrix_runs": INT,
                "matrix_right": INT,
            }
        ),
    },
    optional=("calibration",),
)


FAR_END = obj(
    {
        "kind": {"enum": ["serve", "iperf3", "tcp-port", "url", "none"]},
        "port": nullable(INT),
        "description": STR,
        "missing": arr(STR),
    }
)
HANDSHAKE = obj(
    {
        "source": {"const": "handshake"},
        "port": nullable(INT),
        "window_scaling": BOOL,
        "peer_wscale": nullable(INT),
        "max_peer_window_bytes": nullable(INT),
        "sack": BOOL,
        "timestamps": BOOL,
        "peer_mss": nullable(INT),
        "rtt_ms": nullable(NUM),
        "findings": arr(FINDING),
        "local_mss": nullable(INT),
        "received_syn": nullable(
            obj(
                {
                    "mss": nullable(INT),
                    "wscale": nullable(INT),
                    "sack_permitted": BOOL,
                    "timestamps": BOOL,
                    "nops": INT,
                }
            )
        ),
        "tampering": arr(
            obj(
                {
                    "option": {"enum": ["window scaling", "SACK", "timestamps", "MSS"]},
                    "direction": {"enum": ["local->peer", "peer->local"]},
                    "sent": STR,
                    "received": STR,
                }
            )
        ),
    }
)


def report_schema() -> Schema:
    from tcpwizard.output.path_json import HOPS_SECTION

    schema = obj(
        {
            "schema_version": {"const": SCHEMA_VERSION},
            "tool": obj({"name": {"const": "tcpwizard"}, "version": STR}),
            "target": nullable(obj({"host": STR, "address": nullable(STR), "port": nullable(INT)})),
            "host": nullable(HOST),
            "peer": nullable(HOST),
            "path": nullable(PATH),
            "transfer": nullable(TRANSFER),
            "verdict": VERDICT,
            "fixes": arr(FIX),
            "notes": arr(STR),
            "error": STR,
            "exit_code": INT,
            # False: no test transfer moved data; the verdict is a prediction.
            "measured": BOOL,
            "far_end": nullable(FAR_END),
            "peer_handshake": nullable(HANDSHAKE),
            # `check --hops` only (docs/path.md)
            "hops": HOPS_SECTION,
            # How long the check took against the least its measurements need (docs/check.md)
            "timing": obj(
                {
                    "seconds": NUM,
                    "stages": {"type": "object", "additionalProperties": NUM},
                    "floor_s": nullable(NUM),
                    "floor": STR,
                    "over_floor": nullable(NUM),
                }
            ),
        },
        optional=("error", "measured", "far_end", "peer_handshake", "hops", "timing"),
    )
    return document(
        "report",
        "tcpwizard report",
        f"Output of `tcpwizard check --json` (schema_version {SCHEMA_VERSION}).",
        schema,
    )


def document(name: str, title: str, description: str, body: Schema) -> Schema:
    """A JSON Schema document (draft 2020-12) around `body`: every schema the tool ships
    (report, path, conns, capture) has this one envelope."""
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"https://tcpwizard.invalid/{name}.schema.json",
        "title": title,
        "description": description,
        **body,
    }


def text_of(schema: Schema) -> str:
    return json.dumps(schema, indent=2) + "\n"


def schema_text() -> str:
    return text_of(report_schema())
