"""A run that failed (unreachable host, refused auth, no serve...) still gives monitoring a
valid document: JSON with `exit_code` 3 and the message, `tcpwizard_up 0`, an UNKNOWN line."""

from __future__ import annotations

from typing import Any

from tcpwizard import TOOL_NAME, __version__
from tcpwizard.exitcodes import ExitCode
from tcpwizard.report import SCHEMA_VERSION


def error_report(
    host: str | None, port: int | None, message: str, code: ExitCode
) -> dict[str, Any]:
    return {
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": TOOL_NAME, "version": __version__},
        "target": None if host is None else {"host": host, "address": None, "port": port},
        "host": None,
        "peer": None,
        "path": None,
        "transfer": None,
        "verdict": {
            "limiting_factor": "unknown",
            "confidence": 0.0,
            "host_to_fix": None,
            "explanation": message,
            "evidence": [],
            "wizard_gap": {
                "current_mbps": None,
                "tuned_mbps": None,
                "measured": False,
                "tuned_mode": None,
            },
        },
        "fixes": [],
        "notes": [],
        "error": message,
        "exit_code": int(code),
    }


def error_document(
    fmt: str, host: str | None, port: int | None, message: str, code: ExitCode
) -> str:
    doc = error_report(host, port, message, code)
    if fmt == "prometheus":
        from tcpwizard.output.prometheus import render_prometheus

        return render_prometheus(doc)
    if fmt == "nagios":
        from tcpwizard.output.nagios import nagios_status

        return nagios_status(doc)[1] + "\n"
    import json

    return json.dumps(doc, indent=2) + "\n"
