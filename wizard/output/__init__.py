"""Renderers: text (rich), json (versioned), prometheus, nagios.

Each module has `render(report, stream)`; `render_report` picks one by --format."""

from __future__ import annotations

from typing import TextIO

from tcpwizard.exitcodes import UsageError
from tcpwizard.report import Report


def render_report(
    report: Report,
    fmt: str,
    stream: TextIO,
    color: bool | None = None,
    warning: str | None = None,
    critical: str | None = None,
) -> int:
    """Render and return the process exit code (Nagios thresholds may raise it)."""
    # Imported per format so `--json` never loads rich.
    if fmt == "text":
        from tcpwizard.output import text

        text.render(report, stream, color)
    elif fmt == "json":
        from tcpwizard.output import json_format

        json_format.render(report, stream)
    elif fmt == "prometheus":
        from tcpwizard.output import prometheus

        prometheus.render(report, stream)
    elif fmt == "nagios":
        from tcpwizard.output import nagios

        return int(nagios.render(report, stream, warning, critical))
    else:
        raise UsageError(f"unknown output format {fmt!r}")
    return int(report.exit_code)
