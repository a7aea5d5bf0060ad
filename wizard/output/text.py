"""The one-screen human report, rendered with rich: header, findings table, the throughput
ceiling table, the fixes, the verdict."""

from __future__ import annotations

from typing import TextIO

from rich.console import Console
from rich.table import Table
from rich.text import Text

from tcpwizard.checks.model import SEVERITY_ORDER, HostAudit
from tcpwizard.report import Report
from tcpwizard.units import format_bytes, format_rate

SEVERITY_STYLE = {"ok": "green", "info": "cyan", "warn": "yellow", "crit": "bold red"}
SEVERITY_LABEL = {"ok": "OK", "info": "INFO", "warn": "WARN", "crit": "CRIT"}
EXIT_LABEL = {0: "OK", 1: "WARNING", 2: "CRITICAL", 3: "UNKNOWN"}


def console_for(stream: TextIO, color: bool | None) -> Console:
    # color None: let rich decide (terminal detection, NO_COLOR); False: plain text.
    return Console(
        file=stream,
        no_color=color is False,
        color_system=None if color is False else "auto",
        highlight=False,
        soft_wrap=False,
        width=None if stream.isatty() else 100,
    )


def _mbps(v: float) -> str:
    return format_rate(v * 1e6)


def findings_table(audit: HostAudit, title: str) -> Table:
    table = Table(title=title, title_justify="left", expand=False, show_lines=False)
    table.add_column("", no_wrap=True)
    table.add_column("check", no_wrap=True)
    table.add_column("observed")
    table.add_column("what it means")
    shown = sorted(
        (f for f in audit.findings if f.severity in ("warn", "crit")),
        key=lambda f: -SEVERITY_ORDER[f.severity],
    )
    for f in shown:
        style = SEVERITY_STYLE[f.severity]
        table.add_row(Text(SEVERITY_LABEL[f.severity], style=style), f.id, f.observed, f.message)
    return table


def ceiling_table(audit: HostAudit) -> Table:
    table = Table(
        title="Largest throughput one connection of this host can reach",
        title_justify="left",
    )
    table.add_column("RTT", justify="right")
    table.add_column("receive", justify="right")
    table.add_column("send", justify="right")
    table.add_column("receive (app sets SO_RCVBUF)", justify="right")
    table.add_column("send (app sets SO_SNDBUF)", justify="right")
    for c in audit.ceilings:
        table.add_row(
            f"{c.rtt_ms:g} ms",
            _mbps(c.receive_mbps),
            _mbps(c.send_mbps),
            _mbps(c.receive_app_mbps),
            _mbps(c.send_app_mbps),
        )
    return table


def render(report: Report, stream: TextIO, color: bool | None = None) -> None:
    con = console_for(stream, color)
    if report.target is not None:
        from tcpwizard.output.text_check import render_check

        render_check(con, report)
        return
    audit = report.host
    code = int(report.exit_code)
    status = EXIT_LABEL.get(code, str(code))
    style = {0: "green", 1: "yellow", 2: "bold red"}.get(code, "magenta")
    head = Text("tcpwizard ", style="bold")
    head.append(status, style=style)
    head.append(f" - host {audit.hostname or '?'} (Linux {audit.kernel or '?'})")
    con.print(head)
    if report.target:
        addr = f" ({report.target.address})" if report.target.address else ""
        con.print(f"target: {report.target.host}{addr}")
    if audit.target:
        t = audit.target
        streams = f", in {audit.streams} streams" if audit.streams > 1 else ""
        con.print(
            f"judged against: {format_rate(t.rate_bps)} x {t.rtt_s * 1000:g} ms RTT, "
            f"BDP {format_bytes(t.bdp_bytes)} ({t.source}){streams}"
        )
    if audit.interface:
        i = audit.interface
        speed = f"{i.speed_mbps} Mbit/s" if i.speed_mbps else "speed unknown"
        con.print(f"egress: {i.name}, mtu {i.mtu}, {speed}, qdisc {i.qdisc or '?'}")
    con.print()
    serious = [f for f in audit.findings if f.severity in ("warn", "crit")]
    if serious:
        con.print(findings_table(audit, "Problems"))
    infos = [f for f in audit.findings if f.severity == "info"]
    if infos:
        con.print(Text("Worth a look:", style="bold"))
        for f in infos:
            line = Text("  INFO ", style=SEVERITY_STYLE["info"])
            line.append(f"{f.id}: {f.observed}")
            con.print(line)
    ok = [f.id for f in audit.findings if f.severity == "ok"]
    if ok:
        con.print(Text(f"{len(ok)} checks OK: " + ", ".join(ok), style="green"))
    con.print()
    con.print(ceiling_table(audit))
    con.print(
        "receive/send: applications that leave buffers to kernel autotuning (most do).",
        style="dim",
    )
    # One line per command: two checks may name the same step (fq for BBR and for pacing).
    needed = list({x.command: x for f in serious for x in f.fixes}.values())
    listed = {x.command for x in needed}
    optional = list(
        {x.command: x for f in infos for x in f.fixes if x.command not in listed}.values()
    )
    for title, fixes in (
        ("Fixes (as root; put sysctls in /etc/sysctl.d/ to keep them):", needed),
        ("Optional improvements:", optional),
    ):
        if fixes:
            con.print()
            con.print(Text(title, style="bold"))
            for fix in fixes:
                con.print(f"  {fix.command}", markup=False)
    con.print()
    con.print(Text("Verdict: ", style="bold") + Text(report.verdict.limiting_factor))
    con.print(report.verdict.explanation)
    for note in report.notes:
        con.print(f"note: {note}", style="dim", markup=False)
