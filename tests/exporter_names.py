"""The series names `tcpwizard exporter` really exposes, collected from a live Exporter fed a
full report (every section filled), for the tests of contrib/ (rules and dashboard)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from tcpwizard.exporter import Exporter, Target

FULL_REPORT: dict[str, Any] = {
    "target": {"host": "dtn2", "address": "10.0.0.2", "port": 5301},
    "host": {
        "findings": [{"id": "tcp_rmem", "severity": "warn"}],
        "ceilings": [{"rtt_ms": 50, "receive_mbps": 40.0, "send_mbps": 80.0}],
    },
    "peer": {"findings": [{"id": "tcp_rmem", "severity": "crit"}], "ceilings": []},
    "path": {
        "rtt_ms": {"min": 50.1, "p50": 50.2, "p95": 50.4, "mean": 50.2, "mdev": 0.1, "max": 51},
        "capacity_mbps": 99.8,
        "bdp_bytes": 625_000,
    },
    "transfer": {
        "modes": [
            {
                "mode": "autotune",
                "direction": "up",
                "throughput_mbps": 24.3,
                "max_buffer_bytes": 262_144,
                "retransmits": 0,
            }
        ]
    },
    "verdict": {
        "limiting_factor": "receiver-window",
        "host_to_fix": "peer",
        "confidence": 0.75,
        "wizard_gap": {"current_mbps": 24.3, "tuned_mbps": 83.2},
    },
    "measured": True,
    "exit_code": 2,
}
FULL_REPORT["path"]["rtt_ms"]["loss_pct"] = 0.0


def exported_text(report: Mapping[str, Any] = FULL_REPORT) -> str:
    ex = Exporter([Target("dtn2", 5301, (("site", "lab"),))], 60.0, lambda t: report)
    ex.run_one(ex.targets[0])
    registry = CollectorRegistry()
    registry.register(ex)
    return generate_latest(registry).decode()


def exported_series() -> dict[str, set[str]]:
    """Sample name -> the label names it carries."""
    out: dict[str, set[str]] = {}
    for fam in text_string_to_metric_families(exported_text()):
        for s in fam.samples:
            out.setdefault(s.name, set()).update(s.labels)
    return out


# A metric name in PromQL: tcpwizard_... (recording rules' tcpwizard:... are not matched).
METRIC_RE = re.compile(r"\btcpwizard_[a-z0-9_]+\b")


DASHBOARD = Path(__file__).resolve().parent.parent / "contrib" / "grafana" / "tcpwizard.json"
RULES = Path(__file__).resolve().parent.parent / "contrib" / "prometheus" / "tcpwizard.rules.yml"
# What Grafana puts in place of its variables when every value is selected.
GRAFANA_VARS = {"$instance": ".*", "$target": ".*", "$__range": "1h", "$__rate_interval": "1m"}


def dashboard() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return doc


def dashboard_queries() -> list[tuple[str, str]]:
    """(panel title, PromQL) for every query of every panel."""
    return [
        (str(p["title"]), str(t["expr"]))
        for p in dashboard()["panels"]
        for t in p.get("targets", [])
    ]


def as_grafana_would(expr: str) -> str:
    for var, value in GRAFANA_VARS.items():
        expr = expr.replace(var, value)
    return expr
