"""Nagios plugin output: one status line with performance data; the exit code carries
the state (Nagios plugin guidelines)."""

from __future__ import annotations

from typing import TextIO

from tcpwizard.report import Report

STATE = {0: "OK", 1: "WARNING", 2: "CRITICAL", 3: "UNKNOWN"}


def line(report: Report) -> str:
    code = int(report.exit_code)
    findings = report.host.findings
    crit = [f.id for f in findings if f.severity == "crit"]
    warn = [f.id for f in findings if f.severity == "warn"]
    if crit or warn:
        summary = ", ".join(crit + warn)
        text = f"{len(crit)} critical, {len(warn)} warning: {summary}"
    else:
        text = "TCP settings fit the target path"
    perf = [f"findings_crit={len(crit)};;;0", f"findings_warn={len(warn)};;;0"]
    for c in report.host.ceilings:
        perf.append(f"recv_mbps_{c.rtt_ms:g}ms={c.receive_mbps};;;0")
        perf.append(f"send_mbps_{c.rtt_ms:g}ms={c.send_mbps};;;0")
    return f"TCPWIZARD {STATE.get(code, 'UNKNOWN')} - {text} | {' '.join(perf)}"


def render(report: Report, stream: TextIO) -> None:
    stream.write(line(report) + "\n")
