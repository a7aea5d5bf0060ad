"""`tcpwizard path` as text: one line per hop (mtr-like), then what the hops mean and the
fixes."""

from __future__ import annotations

from typing import TextIO

from tcpwizard.advice.path_advice import PathAdvice
from tcpwizard.measure.hop_model import Hop, PathHops

SEVERITY_MARK = {"crit": "CRIT", "warn": "WARN", "info": "info", "ok": "ok"}


def _ms(x: float | None) -> str:
    return "*" if x is None else f"{x:.2f}"


def hop_line(h: Hop, p: PathHops) -> str:
    who = h.address or "* (no answer)"
    if h.name:
        who = f"{h.name} ({h.address})"
    marks = []
    if h.ttl == p.rtt_jump_hop:
        marks.append(f"RTT jump +{p.rtt_jump_ms or 0:.1f} ms")
    if h.ttl == p.loss_start_hop:
        marks.append("loss begins")
    if h.rate_limited:
        marks.append("rate limited" + (" (ICMP)" if h.real_loss_pct == 0 else ""))
    if p.mtu is not None and p.mtu.hop == h.ttl and p.mtu.path_mtu is not None:
        marks.append(f"next link MTU {p.mtu.path_mtu}" + (" BLACK HOLE" if p.mtu.blackhole else ""))
    if h.other_addresses:
        marks.append("also " + ", ".join(h.other_addresses))
    loss = f"{h.loss_pct:5.1f}%"
    return (
        f"{h.ttl:>3}  {who:<40} {h.received:>4}/{h.sent:<4} {loss}  "
        f"{_ms(h.rtt_min_ms):>8} {_ms(h.rtt_median_ms):>8}  {'; '.join(marks)}"
    ).rstrip()


def hops_lines(p: PathHops, adv: PathAdvice) -> list[str]:
    how = p.method + (f" to port {p.port}" if p.port else "")
    lines = [
        f"Hops to {p.host} ({p.address}), {how}: {p.probes_sent} probes in {p.elapsed_s:.1f} s",
        f"hop  {'address':<40} {'answers':>9} {'loss':>6}  {'min ms':>8} {'med ms':>8}",
    ]
    lines += [hop_line(h, p) for h in p.hops]
    m = p.mtu
    if m is not None:
        if m.path_mtu is None:
            lines.append(f"Path MTU: not measured ({m.note})")
        else:
            at = f", set after hop {m.hop} ({m.hop_address})" if m.hop else ""
            lines.append(f"Path MTU {m.path_mtu} B (this host's interface {m.local_mtu} B){at}")
    for f in adv.findings:
        lines.append(f"  {SEVERITY_MARK[f.severity]:<4} {f.title}: {f.message}")
        for x in f.fixes:
            host = {"local": "this host", "peer": "far end", "both": "network"}[x.host]
            lines.append(f"         [{host}] {x.command}")
            if x.why:
                lines.append(f"             why: {x.why}")
    lines += [f"  note: {n}" for n in p.notes]
    return lines


def render(p: PathHops, adv: PathAdvice, stream: TextIO) -> None:
    stream.write("\n".join(hops_lines(p, adv)) + "\n")
    stream.flush()
