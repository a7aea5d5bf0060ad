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


def _obj(props: dict[str, Schema], optional: tuple[str, ...] = ()) -> Schema:
    return {
        "type": "object",
        "properties": props,
        "required": [k for k in props if k not in optional],
        "additionalProperties": False,
    }


def _nullable(s: Schema) -> Schema:
    return {"anyOf": [s, {"type": "null"}]}


NUM: Schema = {"type": "number"}
INT: Schema = {"type": "integer"}
STR: Schema = {"type": "string"}
BOOL: Schema = {"type": "boolean"}


def _arr(items: Schema) -> Schema:
    return {"type": "array", "items": items}


FINDING = _obj(
    {
        "id": STR,
        "title": STR,
        "severity": {"enum": SEVERITIES},
        "key": STR,
        "observed": STR,
        "expected": STR,
        "message": STR,
        "guideline": STR,
        "fix_ids": _arr(STR),
    }
)
FIX = _obj(
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
CEILING = _obj(
    {
        "rtt_ms": NUM,
        "receive_mbps": NUM,
        "send_mbps": NUM,
        "receive_app_mbps": NUM,
        "send_app_mbps": NUM,
    }
)
BDP = _obj(
    {
        "rtt_ms": NUM,
        "bandwidth_mbps": NUM,
        "bdp_bytes": INT,
        "source": {"enum": ["flags", "default", "measured"]},
    }
)
ROUTE = _obj(
    {
        "destination": STR,
        "gateway": _nullable(STR),
        "window": _nullable(INT),
        "rtt_ms": _nullable(NUM),
        "initcwnd": _nullable(INT),
        "initrwnd": _nullable(INT),
    }
)
INTERFACE = _obj(
    {
        "name": STR,
        "mtu": INT,
        "txqueuelen": INT,
        "qdisc": _nullable(STR),
        "speed_mbps": _nullable(INT),
        "duplex": {"enum": ["full", "half", "unknown"]},
        "loopback": BOOL,
        "drops": INT,
        "errors": INT,
        "packets": INT,
        "route": _nullable(ROUTE),
    }
)
HOST = _obj(
    {
        "hostname": STR,
        "kernel": STR,
        "congestion_control": STR,
        "worst": {"enum": SEVERITIES},
        "findings": _arr(FINDING),
        "ceilings": _arr(CEILING),
        "target_bdp": _nullable(BDP),
        "interface": _nullable(INTERFACE),
        "sysctls": {"type": "object", "additionalProperties": STR},
        "ram_bytes": _nullable(INT),
        "streams": INT,
        "host_facts": {"type": "object", "additionalProperties": STR},
    },
    optional=("streams", "host_facts"),
)
_CAPACITY = _obj(
    {
        "mbps": NUM,
        "method": STR,
        "confidence": NUM,
        "pairs_mbps": _nullable(NUM),
        "train_mbps": _nullable(NUM),
        "limited_by": _nullable(STR),
        "note": STR,
        "train_loss": _nullable(NUM),
    },
    optional=("train_loss",),
)
PATH = _obj(
    {
        "rtt_ms": _obj(
            {
                **{k: NUM for k in ("min", "p50", "p95", "mean", "mdev", "max", "loss_pct")},
                "jitter": NUM,
                "samples": INT,
                "method": STR,
            }
        ),
        "capacity_mbps": _nullable(NUM),
        "capacity_method": _nullable(STR),
        "bdp_bytes": _nullable(INT),
        "capacity": _nullable(_CAPACITY),
        "capacity_down": _nullable(_CAPACITY),
        "peer": BOOL,
        "address": STR,
        "port": INT,
        "duration_s": NUM,
        "notes": _arr(STR),
        # check --avail only (measure/probes/availbw.py)
        "available": _obj(
            {
                **{k: NUM for k in ("mbps", "low_mbps", "high_mbps", "capacity_mbps")},
                "free_share": NUM,
                "streams": INT,
                "loaded_streams": INT,
                "packets": INT,
                "elapsed_s": NUM,
                "note": STR,
            }
        ),
    },
    optional=("available",),
)
TCP_INFO = _obj({k: INT for k in TCP_INFO_FIELDS})
SAMPLE = _obj(
    {
        "t_s": NUM,
        "goodput_mbps": _nullable(NUM),
        "rcvbuf_bytes": INT,
        "sndbuf_bytes": INT,
        "drs_bandwidth_mbps": _nullable(NUM),
        "drs_rtt_ms": _nullable(NUM),
        "tcp_info": _nullable(TCP_INFO),
        "delivered_bytes": _nullable(INT),
    },
    optional=("delivered_bytes",),
)
HOST_LOAD = _obj(
    {
        "seconds": NUM,
        "cores": _arr(_obj({"cpu": INT, "user": NUM, "system": NUM, "softirq": NUM, "busy": NUM})),
        "process_cores": NUM,
        "busiest_thread": NUM,
        "starved": NUM,
        "drops": _nullable(
            _obj(
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
MODE = _obj(
    {
        "mode": {"enum": ["untuned", "autotune", "static", "overprovisioned", "drs"]},
        "streams": INT,
        "throughput_mbps": _nullable(NUM),
        "max_buffer_bytes": INT,
        "retransmits": INT,
        "samples": _arr(SAMPLE),
        "direction": {"enum": ["up", "down"]},
        "bytes": INT,
        "bytes_sent": _nullable(INT),
        "seconds": _nullable(NUM),
        "mbps_per_mb": _nullable(NUM),
        "rwnd_limited": _nullable(NUM),
        "sndbuf_limited": _nullable(NUM),
        "busy": _nullable(NUM),
        "congestion_control": STR,
        "rcv_autotuning": BOOL,
        "forced": BOOL,
        "notes": _arr(STR),
        "error": _nullable(STR),
        "latency_under_load": _nullable(
            _obj(
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
        "rate_plateau_mbps": _nullable(NUM),
        "sender_load": _nullable(HOST_LOAD),
        "receiver_load": _nullable(HOST_LOAD),
    }
)
TRANSFER = _obj(
    {
        "direction": {"enum": ["up", "down", "both"]},
        "modes": _arr(MODE),
        "streams": INT,
        "congestion_control": _obj({"local": STR, "peer": STR}),
    }
)
VERDICT = _obj(
    {
        "limiting_factor": {"enum": list(LIMITING_FACTORS)},
        "confidence": {"type": "number", "minimum": 0, "maximum": 1},
        "host_to_fix": {"enum": ["local", "peer", "both", "path", None]},
        "explanation": STR,
        "evidence": _arr(STR),
        "wizard_gap": _obj(
            {
                "current_mbps": _nullable(NUM),
                "tuned_mbps": _nullable(NUM),
                "measured": BOOL,
                "tuned_mode": _nullable(STR),
            }
        ),
        # The rule's own confidence and the scenario matrix's runs that weighed it
        # (advice/calibration.py); absent when the factor is not in the table.
        "calibration": _obj(
            {
                "rule_confidence": {"type": "number", "minimum": 0, "maximum": 1},
                "matrix_runs": INT,
                "matrix_right": INT,
            }
        ),
    },
    optional=("calibration",),
)


FAR_END = _obj(
    {
        "kind": {"enum": ["serve", "iperf3", "tcp-port", "url", "none"]},
        "port": _nullable(INT),
        "description": STR,
        "missing": _arr(STR),
    }
)
HANDSHAKE = _obj(
    {
        "source": {"const": "handshake"},
        "port": _nullable(INT),
        "window_scaling": BOOL,
        "peer_wscale": _nullable(INT),
        "max_peer_window_bytes": _nullable(INT),
        "sack": BOOL,
        "timestamps": BOOL,
        "peer_mss": _nullable(INT),
        "rtt_ms": _nullable(NUM),
        "findings": _arr(FINDING),
        "local_mss": _nullable(INT),
        "received_syn": _nullable(
            _obj(
                {
                    "mss": _nullable(INT),
                    "wscale": _nullable(INT),
                    "sack_permitted": BOOL,
                    "timestamps": BOOL,
                    "nops": INT,
                }
            )
        ),
        "tampering": _arr(
            _obj(
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

    schema = _obj(
        {
            "schema_version": {"const": SCHEMA_VERSION},
            "tool": _obj({"name": {"const": "tcpwizard"}, "version": STR}),
            "target": _nullable(
                _obj({"host": STR, "address": _nullable(STR), "port": _nullable(INT)})
            ),
            "host": _nullable(HOST),
            "peer": _nullable(HOST),
            "path": _nullable(PATH),
            "transfer": _nullable(TRANSFER),
            "verdict": VERDICT,
            "fixes": _arr(FIX),
            "notes": _arr(STR),
            "error": STR,
            "exit_code": INT,
            # False: no test transfer moved data; the verdict is a prediction.
            "measured": BOOL,
            "far_end": _nullable(FAR_END),
            "peer_handshake": _nullable(HANDSHAKE),
            # `check --hops` only (docs/path.md)
            "hops": HOPS_SECTION,
            # How long the check took against the least its measurements need (docs/check.md)
            "timing": _obj(
                {
                    "seconds": NUM,
                    "stages": {"type": "object", "additionalProperties": NUM},
                    "floor_s": _nullable(NUM),
                    "floor": STR,
                    "over_floor": _nullable(NUM),
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
