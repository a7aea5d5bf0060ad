"""`tcpwizard conns` as text: per busy connection the verdict, its evidence and the fix on
the right host; idle connections in one line each."""

from __future__ import annotations

from typing import TextIO

from tcpwizard.checks.model import Fix
from tcpwizard.conns_report import ConnEntry, ConnsReport
from tcpwizard.units import format_bytes

HOST_WORDS = {
    "local": "fix this host",
    "peer": "fix the far end",
    "both": "fix both hosts",
    "path": "a device in the path",
}


def _owner(e: ConnEntry) -> str:
    o = e.owner
    return "process unknown" if o is None else f"{o.name} (pid {o.pid}, {o.user})"


def fix_lines(fixes: tuple[Fix, ...]) -> list[str]:
    out: list[str] = []
    where = {
        "local": "On this host (as root):",
        "peer": "On the far end (as root):",
        "path": "On a device in the path (not either host):",
    }
    for host in ("local", "peer", "both", "path"):
        sysctl = [f for f in fixes if f.host == host and f.kind != "setsockopt"]
        app = [f for f in fixes if f.host == host and f.kind == "setsockopt"]
        if not sysctl and not app:
            continue
        out.append("    " + where.get(host, "On both hosts (as root):"))
        out += [f"      {f.command}" for f in sysctl]
        if app:
            out.append("      Or, in an application that sets its own buffers:")
            out += [f"        {f.command}" for f in app]
    return out


def entry_lines(e: ConnEntry) -> list[str]:
    o, v = e.observation, e.diagnosis.verdict
    head = f"{o.key}  {_owner(e)}"
    if v is None:
        return [f"{head}  idle"]
    lines = [
        f"{head}  {e.diagnosis.role} {o.rate_mbps:.1f} Mbit/s",
        f"  {v.limiting_factor}"
        + (f" — {HOST_WORDS[v.host_to_fix]}" if v.host_to_fix else "")
        + f"  (confidence {v.confidence:.0%})",
        f"  {v.explanation}",
        *(f"    · {x}" for x in v.evidence),
        *_application_line(e),
        *fix_lines(e.diagnosis.fixes),
    ]
    return lines


def _application_line(e: ConnEntry) -> list[str]:
    """The application's figures in one line, beside an `application` verdict."""
    o, v = e.observation, e.diagnosis.verdict
    if v is None or v.limiting_factor != "application":
        return []
    parts = [f"process {_owner(e)}"]
    if o.sending:
        if o.app_limited is not None:
            parts.append(f"app-limited {o.app_limited:.0%} of {o.samples} samples")
        parts.append(f"in flight at most {format_bytes(o.inflight_max)}")
        parts.append(f"peer's window zero in {o.zero_window_samples} samples")
    else:
        parts.append(f"unread up to {format_bytes(o.rqueue_max)}")
    return ["    application: " + "; ".join(parts)]


def render(report: ConnsReport, stream: TextIO) -> None:
    busy = report.busy
    idle = [e for e in report.entries if e.diagnosis.verdict is None]
    shown = f"{len(report.entries)} shown" + (
        f" ({', '.join(report.filters)})" if report.filters else ""
    )
    lines = [
        f"tcpwizard conns — {report.hostname}: {report.total} established, {shown}, "
        f"{len(busy)} busy over {report.interval_s:.1f} s",
        "",
    ]
    for e in busy:
        lines += [*entry_lines(e), ""]
    if idle:
        lines.append(f"Idle ({len(idle)}):")
        lines += [f"  {entry_lines(e)[0]}" for e in idle]
    if not report.entries:
        lines.append("No established TCP connection matches.")
    lines += [f"note: {n}" for n in report.notes]
    stream.write("\n".join(lines).rstrip() + "\n")
    stream.flush()
