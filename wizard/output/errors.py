"""A run that failed (unreachable host, refused auth, no serve...) still gives monitoring a
valid document: JSON with `exit_code` 3 and the message, `tcpwizard_up 0`, an UNKNOWN line
(the formats render `documents.ErrorDocument` from this report)."""

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
