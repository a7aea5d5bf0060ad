"""Prometheus text exposition (node_exporter textfile collector format): one gauge per
finding, the ceiling table and the exit code. Labels are escaped per the format."""

from __future__ import annotations

from typing import TextIO

from tcpwizard.checks.model import SEVERITY_ORDER
from tcpwizard.report import Report


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def lines(report: Report) -> list[str]:
    host = _label(report.host.hostname or "local")
    out = [
        "# HELP tcpwizard_finding_severity Audit finding severity (0 ok, 1 info, 2 warn, 3 crit).",
        "# TYPE tcpwizard_finding_severity gauge",
    ]
    for f in report.host.findings:
        out.append(
            f'tcpwizard_finding_severity{{host="{host}",check="{_label(f.id)}"}} '
            f"{SEVERITY_ORDER[f.severity]}"
        )
    out += [
        "# HELP tcpwizard_ceiling_mbps Largest throughput one connection reaches per RTT.",
        "# TYPE tcpwizard_ceiling_mbps gauge",
    ]
    for c in report.host.ceilings:
        for direction, value in (("receive", c.receive_mbps), ("send", c.send_mbps)):
            out.append(
                f'tcpwizard_ceiling_mbps{{host="{host}",direction="{direction}",'
                f'rtt_ms="{c.rtt_ms:g}"}} {value}'
            )
    out += [
        "# HELP tcpwizard_exit_code Nagios-style status (0 ok, 1 warning, 2 critical, 3 unknown).",
        "# TYPE tcpwizard_exit_code gauge",
        f'tcpwizard_exit_code{{host="{host}"}} {int(report.exit_code)}',
    ]
    return out


def render(report: Report, stream: TextIO) -> None:
    stream.write("\n".join(lines(report)) + "\n")
