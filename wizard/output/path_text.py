"""`tcpwizard path` as text: one line per hop (mtr-like), then what the hops mean and the
fixes."""

from __future__ import annotations

from typing import TextIO

from tcpwizard.advice.path_advice import PathAdvice
from tcpwizard.measure.observe.synopts import SynOptions
from tcpwizard.measure.probes.hop_model import Hop, PathHops
from tcpwizard.measure.probes.syntrace_model import FULL, NONE, SynTrace

SEVERITY_MARK = {"crit": "CRIT", "warn": "WARN", "info": "info", "ok": "ok"}


def rtt_text(x: float | None) -> str:
    return "*" if x is None else f"{x:.2f}"


def hop_who(h: Hop) -> str:
    """The answering router: its name and address, or that nothing answered."""
    if h.name:
        return f"{h.name} ({h.address})"
    return h.address or "* (no answer)"


def hop_marks(h: Hop, p: PathHops) -> list[str]:
    """What the analysis found at this hop, in words (text output and TUI)."""
    marks = []
    if h.ttl == p.rtt_jump_hop:
        marks.append(f"RTT jump +{p.rtt_jump_ms or 0:.1f} ms")
    if h.ttl == p.loss_start_hop:
        marks.append("loss begins")
    if h.rate_limited:
        marks.append("rate limited" + (" (ICMP)" if h.real_loss_pct == 0 else ""))
    return marks


def next_link_mtu(h: Hop, p: PathHops) -> tuple[int, bool] | None:
    """(MTU of the link after this hop, a black hole there) where the MTU search put it."""
    m = p.mtu
    if m is None or m.hop != h.ttl or m.path_mtu is None:
        return None
    return m.path_mtu, m.blackhole


def hop_line(h: Hop, p: PathHops) -> str:
    marks = hop_marks(h, p)
    mtu = next_link_mtu(h, p)
    if mtu is not None:
        marks.append(f"next link MTU {mtu[0]}" + (" BLACK HOLE" if mtu[1] else ""))
    if h.other_addresses:
        marks.append("also " + ", ".join(h.other_addresses))
    loss = f"{h.loss_pct:5.1f}%"
    return (
        f"{h.ttl:>3}  {hop_who(h):<40} {h.received:>4}/{h.sent:<4} {loss}  "
        f"{rtt_text(h.rtt_min_ms):>8} {rtt_text(h.rtt_median_ms):>8}  {'; '.join(marks)}"
    ).rstrip()


def hops_heading(p: PathHops) -> str:
    how = p.method + (f" to port {p.port}" if p.port else "")
    return f"Hops to {p.host} ({p.address}), {how}: {p.probes_sent} probes in {p.elapsed_s:.1f} s"


def path_mtu_line(p: PathHops) -> str | None:
    """The path MTU and where it is set; None when the search did not run."""
    m = p.mtu
    if m is None:
        return None
    if m.path_mtu is None:
        return f"Path MTU: not measured ({m.note})"
    at = f", set after hop {m.hop} ({m.hop_address})" if m.hop else ""
    return f"Path MTU {m.path_mtu} B (this host's interface {m.local_mtu} B){at}"


def options_text(o: SynOptions) -> str:
    """A SYN's options in words: "MSS 1460, window scale 7, SACK, timestamps"."""
    words = [f"MSS {o.mss}" if o.mss is not None else "no MSS"]
    words.append(f"window scale {o.wscale}" if o.wscale is not None else "no window scale")
    words.append("SACK" if o.sack_permitted else "no SACK")
    words.append("timestamps" if o.timestamps else "no timestamps")
    if o.overwritten:
        words.append(f"{o.nops} NOPs in a row")
    return ", ".join(words)


def syn_lines(t: SynTrace) -> list[str]:
    """The SYN's options as each router quoted them (measure/probes/syntrace.py)."""
    lines = [f"SYN options per hop (port {t.port}), sent: {options_text(t.sent)}"]
    for h in t.hops:
        who = h.address or "*"
        if h.destination:
            seen = "the far end answered"
        elif h.quote == NONE:
            seen = "no answer"
        elif h.quote != FULL:
            seen = "quote too short (8 bytes of TCP): options not seen"
        elif h.rewritten:
            seen = ", ".join([f"{o} removed" for o in h.removed] + list(h.changed))
        else:
            seen = "as sent"
        lines.append(f"{h.ttl:>3}  {who:<40} {seen}")
    lines += [f"  note: {n}" for n in t.notes]
    return lines


def hops_lines(p: PathHops, adv: PathAdvice) -> list[str]:
    lines = [
        hops_heading(p),
        f"hop  {'address':<40} {'answers':>9} {'loss':>6}  {'min ms':>8} {'med ms':>8}",
    ]
    lines += [hop_line(h, p) for h in p.hops]
    mtu = path_mtu_line(p)
    if mtu is not None:
        lines.append(mtu)
    if p.syn is not None:
        lines += syn_lines(p.syn)
    for f in adv.findings:
        lines.append(f"  {SEVERITY_MARK[f.severity]:<4} {f.title}: {f.message}")
        for x in f.fixes:
            host = {
                "local": "this host",
                "peer": "far end",
                "both": "network",
                "path": "network",
            }[x.host]
            lines.append(f"         [{host}] {x.command}")
            if x.why:
                lines.append(f"             why: {x.why}")
    lines += [f"  note: {n}" for n in p.notes]
    return lines


def render(p: PathHops, adv: PathAdvice, stream: TextIO) -> None:
    stream.write("\n".join(hops_lines(p, adv)) + "\n")
    stream.flush()
