"""The one-screen report of `check HOST`: the verdict and the wizard gap first, then the fix
for the host that needs it, then the evidence (path, transfers, both hosts' audits)."""

from __future__ import annotations

import re

from rich.console import Console
from rich.table import Table
from rich.text import Text

from tcpwizard.advice.middlebox import syn_tampering
from tcpwizard.advice.snippets import (
    Option,
    c_snippet,
    pacing_c_snippet,
    pacing_python_snippet,
    python_snippet,
)
from tcpwizard.checks.model import Fix, HostAudit
from tcpwizard.measure.engine.loaded_rtt import loaded_rtt, plateau_mbps
from tcpwizard.measure.model import ModeResult
from tcpwizard.output import hostload_out
from tcpwizard.report import Report
from tcpwizard.units import format_bytes, format_mbps

EXIT_LABEL = {0: "OK", 1: "WARNING", 2: "CRITICAL", 3: "UNKNOWN"}
EXIT_STYLE = {0: "green", 1: "yellow", 2: "bold red", 3: "magenta"}
HOST_WORDS = {
    "local": "this host",
    "peer": "the far end",
    "both": "both hosts",
    "path": "a device in the path",
}


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _safe(text: str) -> str:
    """Messages may quote the far end: never pass terminal control sequences through."""
    return _CONTROL.sub("?", text)


def _mbps(v: float | None) -> str:
    return format_mbps(v, missing="-")


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v:.0%}"


def _header(con: Console, r: Report) -> None:
    code = int(r.exit_code)
    head = Text("tcpwizard ", style="bold")
    head.append(EXIT_LABEL.get(code, str(code)), style=EXIT_STYLE.get(code, ""))
    target = r.target.host if r.target else "?"
    addr = r.target.address if r.target and r.target.address != target else None
    head.append(f" - {target}" + (f" ({addr})" if addr else ""))
    head.append(f" from {r.host.hostname or 'this host'}")
    con.print(head)
    if r.error:
        con.print(Text(_safe(r.error), style="magenta"))
    elif not r.measured and r.target is not None:
        # A prediction must say so before anything that reads like a verdict.
        why = next((n for n in r.notes if n.startswith("not measured:")), "not measured")
        con.print(Text(f"PREDICTED — {_safe(why)}", style="bold magenta"))
    if r.far_end is not None:
        con.print(Text(f"Far end: {_safe(r.far_end.description)}", style="dim"))


def _verdict(con: Console, r: Report) -> None:
    v = r.verdict
    line = Text("\nLimiting factor: ", style="bold")
    line.append(
        v.limiting_factor,
        style="bold yellow" if v.limiting_factor != "path-capacity" else "bold green",
    )
    if v.host_to_fix:
        line.append(f"  — fix {HOST_WORDS[v.host_to_fix]}")
    line.append(f"  (confidence {v.confidence:.0%})", style="dim")
    con.print(line)
    con.print(v.explanation, markup=False)
    gap = v.wizard_gap
    if gap.current_mbps is not None and gap.tuned_mbps:
        how = "predicted from the window law"
        if gap.measured:
            how = f"measured once up to speed, {gap.tuned_mode}" if gap.tuned_mode else "measured"
        if gap.tuned_mbps > 1.1 * gap.current_mbps:
            con.print(
                Text("Wizard gap: ", style="bold")
                + Text(
                    f"you get {_mbps(gap.current_mbps)}; tuned, this path gives "
                    f"{_mbps(gap.tuned_mbps)} ({how})."
                )
            )
        else:
            shared = v.limiting_factor == "cross-traffic"
            gives = "others leave of the path" if shared else "the path gives"
            con.print(
                Text("Wizard gap: ", style="bold")
                + Text(f"none — {_mbps(gap.current_mbps)} once up to speed is what {gives}.")
            )
    for e in v.evidence:
        con.print(f"  · {_safe(e)}", markup=False, style="dim")


def _fixes(con: Console, r: Report) -> None:
    if not r.fixes:
        return
    for role in ("local", "peer", "both", "path"):
        mine = [f for f in r.fixes if f.host == role]
        if not mine:
            continue
        where = {
            "local": "On this host (as root):",
            "peer": "On the far end (as root):",
            "both": "On both hosts (as root):",
            "path": "On a device in the path (not either host; its operator must act):",
        }
        con.print(Text(f"\n{where[role]}", style="bold"))
        for f in mine:
            if f.kind != "setsockopt":
                con.print(f"  {f.command}", markup=False)
                if f.why:
                    con.print(f"      why: {f.why}", style="dim", markup=False)
        apps = [f for f in mine if f.kind == "setsockopt"]
        if apps:
            pacing = all(f.key.endswith("SO_MAX_PACING_RATE") for f in apps)
            con.print(
                Text(
                    "  Or, in the application (pace its socket):"
                    if pacing
                    else "  Or, in an application that sets its own buffers:",
                    style="bold",
                )
            )
            for f in apps:
                _snippet(con, f)
    # A device's fix is its operator's to make: `fix` has nothing to apply on either host.
    sysctls = [f for f in r.fixes if f.kind in ("sysctl", "route", "other") and f.host != "path"]
    if sysctls:
        con.print(
            "\nApply with: tcpwizard check ... --json > report.json; sudo tcpwizard fix "
            "--plan report.json [--for peer] --yes  (dry run without --yes; "
            "undo: tcpwizard fix --rollback)",
            style="dim",
            markup=False,
        )


def _snippet(con: Console, f: Fix) -> None:
    option: Option = "SO_RCVBUF" if f.key.endswith("SO_RCVBUF") else "SO_SNDBUF"
    size = int(f.value)
    con.print(f"    {f.command}", markup=False)
    pacing = f.key.endswith("SO_MAX_PACING_RATE")
    con.print("    Python:", style="dim")
    py = pacing_python_snippet(size) if pacing else python_snippet(option, size)
    for line in py.splitlines():
        con.print(f"      {line}", markup=False, style="dim")
    con.print("    C:", style="dim")
    for line in (pacing_c_snippet(size) if pacing else c_snippet(option, size)).splitlines():
        con.print(f"      {line}", markup=False, style="dim")


def _path(con: Console, r: Report) -> None:
    p = r.path
    if p is None:
        return
    rt = p.rtt
    con.print(Text("\nPath", style="bold"))
    con.print(
        f"  RTT min {rt.min:.2f} ms, p50 {rt.p50:.2f}, p95 {rt.p95:.2f}, mdev {rt.mdev:.2f}, "
        f"loss {rt.loss_pct:.1f}% ({rt.samples} {rt.method} probes)"
    )
    if p.capacity:
        c = p.capacity
        limited = f", limited by {c.limited_by}" if c.limited_by else ""
        con.print(
            f"  capacity {_mbps(c.mbps)} ({c.method}, confidence {c.confidence:.0%}{limited})"
        )
    if p.bdp_bytes:
        con.print(f"  bandwidth-delay product {format_bytes(p.bdp_bytes)}")
    for a in p.availables():
        way = "" if a.direction == "up" else " back"
        con.print(
            f"  available{way} {_mbps(a.mbps)} ({_mbps(a.low_bps / 1e6)}-"
            f"{_mbps(a.high_bps / 1e6)}) of {_mbps(a.capacity_bps / 1e6)}: {a.free_share:.0%} "
            f"free ({a.loaded} of {a.streams} periodic streams built a queue, "
            f"{a.elapsed_s:.1f} s)"
        )


def _transfers(con: Console, r: Report) -> None:
    if r.transfer is None or not r.transfer.modes:
        return
    table = Table(title="Test transfers", title_justify="left")
    for col in (
        "mode",
        "dir",
        "streams",
        "Mbit/s",
        "max buffer",
        "Mbit/s/MB",
        "retrans",
        "rwnd-lim",
        "sndbuf-lim",
    ):
        table.add_column(col, justify="left" if col in ("mode", "dir") else "right", no_wrap=True)
    for m in r.transfer.modes:
        table.add_row(*_mode_row(m))
    con.print()
    con.print(table)
    if any(m.forced for m in r.transfer.modes):
        con.print(
            "  * as root, with SO_RCVBUFFORCE/SO_SNDBUFFORCE: tuned before any sysctl change",
            style="dim",
        )
    _latency(con, r)
    _host_load(con, r)


def _latency(con: Console, r: Report) -> None:
    """RTT under load per mode (median and p90 of the sender's smoothed RTT over the second
    half) against the idle RTT, responsiveness in round trips per minute, the rate plateau."""
    if r.transfer is None:
        return
    idle = r.path.rtt.min if r.path else None
    rows = [(m, lr) for m in r.transfer.modes if m.error is None and (lr := loaded_rtt(m, idle))]
    if not rows:
        return
    con.print(f"  RTT under load against {rows[0][1].idle_ms:.1f} ms idle (sender's smoothed RTT):")
    for m, lr in rows:
        plateau = plateau_mbps(m)
        held = f", held {_mbps(plateau)} (IP)" if plateau else ""
        con.print(
            f"    {m.mode} {m.direction}: {lr.median_ms:.1f} ms median, {lr.p90_ms:.1f} ms p90, "
            f"{lr.rpm:.0f} RPM{held}",
            markup=False,
        )


def _host_load(con: Console, r: Report) -> None:
    lines = list(hostload_out.text_lines(r.transfer.modes if r.transfer else ()))
    if lines:
        con.print(Text("Host load during the transfers:", style="bold"))
        for line in lines:
            con.print(Text(f"  {line}"))


def _mode_row(m: ModeResult) -> list[str]:
    if m.error:
        return [m.mode, m.direction, str(m.streams), "failed", "-", "-", "-", "-", m.error[:40]]
    return [
        m.mode + ("*" if m.forced and m.mode in ("drs", "static", "overprovisioned") else ""),
        m.direction,
        str(m.streams),
        f"{m.throughput_mbps:.1f}",
        format_bytes(m.max_buffer_bytes),
        f"{m.mbps_per_mb:.1f}",
        str(m.retransmits),
        _pct(m.rwnd_limited),
        _pct(m.sndbuf_limited),
    ]


def _audit(con: Console, audit: HostAudit | None, title: str) -> None:
    if audit is None:
        return
    bad = [f for f in audit.findings if f.severity in ("warn", "crit")]
    ok = sum(1 for f in audit.findings if f.severity in ("ok", "info"))
    line = Text(f"\n{title}: ", style="bold")
    line.append(
        f"{audit.hostname or '?'}, Linux {audit.kernel or '?'}, "
        f"{audit.congestion_control or '?'}; {ok} checks fine"
    )
    con.print(line)
    for f in bad:
        style = "bold red" if f.severity == "crit" else "yellow"
        con.print(
            Text(f"  {f.severity.upper():4} ", style=style)
            + Text(f"{f.id}: {f.observed} — {f.message}")
        )


def _handshake(con: Console, r: Report) -> None:
    """The far end's TCP options from the handshake, beside (or instead of) its audit."""
    hs = r.peer_handshake
    if hs is None:
        return
    scale = f"on (shift {hs.peer_wscale})" if hs.window_scaling else "OFF"
    line = Text("\nFar end's TCP options (handshake", style="bold")
    line.append(f", port {hs.port}): " if hs.port else "): ", style="bold")
    line.append(
        f"window scaling {scale}, SACK {'on' if hs.sack else 'off'}, timestamps "
        f"{'on' if hs.timestamps else 'off'}, MSS {hs.peer_mss or '?'}"
    )
    con.print(line)
    if (syn := hs.received_syn) is not None:
        con.print(
            f"  our SYN as the far end received it: MSS {syn.mss or '-'} (sent "
            f"{hs.local_mss or '?'}), window scale "
            f"{'-' if syn.wscale is None else syn.wscale}, SACK "
            f"{'on' if syn.sack_permitted else 'off'}, timestamps "
            f"{'on' if syn.timestamps else 'off'}"
            + (f", {syn.nops} NOPs in a row (an option overwritten)" if syn.overwritten else "")
        )
    for t in syn_tampering(hs, r.peer):
        con.print(Text("  PATH ", style="bold red") + Text(t.text))
    for f in r.peer_handshake_findings:
        if f.severity in ("warn", "crit"):
            style = "bold red" if f.severity == "crit" else "yellow"
            con.print(Text(f"  {f.severity.upper():4} ", style=style) + Text(f"{f.message}"))


def render_check(con: Console, r: Report) -> None:
    _header(con, r)
    _verdict(con, r)
    _fixes(con, r)
    _path(con, r)
    _transfers(con, r)
    _audit(con, r.host, "This host")
    _audit(con, r.peer, "Far end")
    _handshake(con, r)
    if r.hops is not None and r.hops_advice is not None:
        from tcpwizard.output.path_text import hops_lines

        con.print()
        for line in hops_lines(r.hops, r.hops_advice):
            con.print(_safe(line), markup=False, highlight=False, soft_wrap=True)
    for note in r.notes:
        con.print(f"note: {_safe(note)}", style="dim", markup=False)
    _timing(con, r)


def _timing(con: Console, r: Report) -> None:
    t = r.timing
    if t is None:
        return
    spent = ", ".join(f"{name} {s:.1f}" for name, s in t.stages if s >= 0.05)
    line = f"took {t.seconds:.1f} s ({spent})"
    if t.floor_s:
        line += f"; its measurements need at least {t.floor_s:.1f} s ({t.floor})"
    con.print(_safe(line), style="dim", markup=False, highlight=False, soft_wrap=True)
