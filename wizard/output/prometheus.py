"""`--format prometheus`: the text exposition format, for node_exporter's textfile collector."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TextIO

from prometheus_client import CollectorRegistry, generate_latest

from tcpwizard.output.metrics import ReportCollector, report_families
from tcpwizard.report import Report


def render_prometheus(report: Mapping[str, Any], duration_s: float | None = None) -> str:
    target = report.get("target") or {}
    host = str(target.get("host") or "local") if isinstance(target, Mapping) else "local"
    up = report.get("exit_code") != 3
    registry = CollectorRegistry()
    registry.register(ReportCollector(report_families(report, {"target": host}, up, duration_s)))
    return generate_latest(registry).decode()


def render(report: Report, stream: TextIO) -> None:
    from tcpwizard.output.json_format import report_json

    stream.write(render_prometheus(report_json(report)))
