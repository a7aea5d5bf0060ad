"""Plain-text helpers of the TUI (no Textual): host entry parsing, details as Markdown, the
fixes as a shell script. Kept apart so they are unit-testable and reused by several screens."""

from __future__ import annotations

from collections.abc import Sequence

from tcpwizard.checks.model import Finding, Fix, HostAudit
from tcpwizard.exitcodes import UsageError
from tcpwizard.measure.model import PathEstimate
from tcpwizard.measure.probes.hop_model import PathHops
from tcpwizard.output.path_text import hop_marks, hop_who, next_link_mtu, rtt_text
from tcpwizard.report import Report
from tcpwizard.units import format_bytes, format_rate

SEVERITY_LABEL = {"ok": "OK", "info": "INFO", "warn": "WARN", "crit": "CRIT"}
HOST_LABEL = {
    "local": "this host",
    "peer": "the peer",
    "both": "both hosts",
    "path": "a device in the path",
}


def mbps(v: float | None) -> str:
    return "—" if v is None else format_rate(v * 1e6)


def parse_target(text: str, default_port: int) -> tuple[str, int]:
    """'host', 'host:port', '[v6]:port' or a bare IPv6 literal → (host, port)."""
    text = text.strip()
    if not text:
        raise UsageError("enter a host name or address")
    host, port_text = text, ""
    if text.startswith("["):
        host, sep, rest = text[1:].partition("]")
        if not sep or (rest and not rest.startswith(":")):
            raise UsageError(f"bad address {text!r}: use [v6-address]:port")
        port_text = rest[1:]
    elif text.count(":") == 1:  # more than one colon: an IPv6 literal without a port
        host, _, port_text = text.partition(":")
    if not host or any(c.isspace() for c in host):
        raise UsageError(f"bad host {text!r}")
    if not port_text:
        return host, default_port
    if not port_text.isdigit() or not 0 < int(port_text) <= 65535:
        raise UsageError(f"bad port {port_text!r}: 1-65535")
    return host, int(port_text)


def finding_title(f: Finding) -> str:
    return f.title or f.id


def _code(text: str) -> str:
    # Inline code, not a fenced block: a fence does not wrap, and a long sysctl line must
    # stay readable in a narrow pane.
    safe = text.replace("`", "'")
    return f"`{safe}`"


def finding_markdown(f: Finding, host: str) -> str:
    """Why a finding matters and its fix, for the detail pane of the host screen."""
    parts = [
        f"## {finding_title(f)}",
        f"**{SEVERITY_LABEL[f.severity]}** on {host}" + (f" · `{f.key}`" if f.key else ""),
        f"**Observed:** {f.observed}  \n**Expected:** {f.expected}",
        f.message,
    ]
    if f.guideline:
        parts.append(f"*Guideline:* {f.guideline}")
    for fix in f.fixes:
        parts.append(f"**Fix** ({fix.kind}): {fix.why}" if fix.why else f"**Fix** ({fix.kind})")
        parts.append(_code(fix.command))
    if not f.fixes and f.severity in ("ok", "info"):
        parts.append("Nothing to change.")
    return "\n\n".join(parts)


def audit_summary(a: HostAudit, role: str) -> str:
    cc = f", {a.congestion_control}" if a.congestion_control else ""
    return f"{role}: {a.hostname} (Linux {a.kernel}{cc})"


def fix_line(fix: Fix) -> str:
    return f"{fix.key} = {fix.value}" if fix.kind == "sysctl" else fix.command


def fix_text(fix: Fix) -> str:
    """The highlighted fix, wrapped to the pane (a long command must stay readable)."""
    parts = [f"{fix.kind} on {HOST_LABEL.get(fix.host, fix.host)}: {fix.why or fix.id}"]
    parts.append(f"$ {fix.command}" if fix.kind != "setsockopt" else fix.command)
    if fix.guideline:
        parts.append(f"guideline: {fix.guideline}")
    return "\n".join(parts)


def fixes_script(fixes: Sequence[Fix], target: str | None) -> str:
    """The fixes as a shell script to read and run: shell commands live, the rest (code to
    put in an application) as comments, grouped by the host they belong on."""
    lines = [
        "#!/bin/sh",
        f"# Fixes from tcpwizard{f' for the path to {target}' if target else ''}.",
    ]
    lines.append("# Read before running; `sudo tcpwizard fix --rollback` undoes `tcpwizard fix`.")
    for host in ("local", "both", "peer", "path"):
        group = [f for f in fixes if f.host == host]
        if not group:
            continue
        lines.append("")
        lines.append(f"# --- on {HOST_LABEL[host]} ---")
        for fix in group:
            if fix.why:
                lines.append(f"# {fix.why}")
            shell = fix.kind in ("sysctl", "route") or fix.command.startswith(("ip ", "tc "))
            lines.append(fix.command if shell else f"# in the application: {fix.command}")
    return "\n".join(lines) + "\n"


def path_rows(p: PathEstimate) -> list[tuple[str, str]]:
    """(label, value) rows of the path table."""
    r = p.rtt
    rows = [
        ("RTT min", f"{r.min:.3f} ms"),
        ("RTT p50 / p95", f"{r.p50:.3f} / {r.p95:.3f} ms"),
        ("RTT mean ± mdev", f"{r.mean:.3f} ± {r.mdev:.3f} ms"),
        ("RTT max", f"{r.max:.3f} ms"),
        ("loss", f"{r.loss_pct:.1f} % of {r.samples} ({r.method})"),
    ]
    c = p.capacity
    if c is None:
        rows.append(("capacity", "not measured"))
    else:
        rows.append(("capacity", mbps(c.mbps)))
        rows.append(("method", c.method))
        rows.append(
            (
                "confidence",
                f"{c.confidence:.0%}" + (f", {c.limited_by}-limited" if c.limited_by else ""),
            )
        )
    if p.capacity_down is not None:
        rows.append(("capacity down", mbps(p.capacity_down.mbps)))
    rows.append(("BDP", format_bytes(p.bdp_bytes) if p.bdp_bytes else "—"))
    rows.append(("peer", "tcpwizard serve" if p.peer else "none (peerless probes)"))
    return rows


HOP_COLUMNS = ("hop", "address", "min ms", "med ms", "loss", "MTU", "found here")


def hop_rows(p: PathHops) -> list[tuple[str, ...]]:
    """The hops table: the same hops and marks as `tcpwizard path` prints. A name goes on a
    line of its own above the address, and each mark on its own line, so the table fits
    80 columns."""
    rows: list[tuple[str, ...]] = []
    for h in p.hops:
        marks = hop_marks(h, p)
        mtu = next_link_mtu(h, p)
        if mtu is not None and mtu[1]:
            marks.append("PMTU black hole")
        rows.append(
            (
                str(h.ttl),
                f"{h.name}\n{h.address}" if h.name else hop_who(h),
                rtt_text(h.rtt_min_ms),
                rtt_text(h.rtt_median_ms),
                f"{h.loss_pct:.1f}%",
                f"→{mtu[0]}" if mtu is not None else "",
                "\n".join(marks),
            )
        )
    return rows


def report_title(r: Report) -> str:
    return r.target.host if r.target is not None else "local audit"
