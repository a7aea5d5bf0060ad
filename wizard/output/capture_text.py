"""`check --pcap FILE` as text: the verdict of the busiest flow, its evidence, the fix on the
right host, then one line for each other flow."""

from __future__ import annotations

from typing import TextIO

from tcpwizard.advice.capture import CaptureDiagnosis, CaptureReport
from tcpwizard.output.conns_text import HOST_WORDS, fix_lines


def _head(d: CaptureDiagnosis) -> str:
    f = d.direction
    return (
        f"{f.sender}:{f.sender_port} -> {f.receiver}:{f.receiver_port}  "
        f"{f.rate_mbps:.1f} Mbit/s over {f.seconds:.1f} s"
    )


def render(report: CaptureReport, stream: TextIO) -> None:
    s = report.summary
    lines = [
        f"tcpwizard check --pcap {s.path} — {s.packets} packets ({s.tcp_packets} TCP) over "
        f"{s.seconds:.1f} s, {len(s.directions)} flow directions with data",
        "",
    ]
    d = report.diagnosis
    if d is not None:
        v = d.verdict
        lines += [
            _head(d),
            f"Limiting factor: {v.limiting_factor}"
            + (f" — {HOST_WORDS[v.host_to_fix]}" if v.host_to_fix else "")
            + f"  (confidence {v.confidence:.0%})",
            v.explanation,
            *(f"  · {x}" for x in v.evidence),
            *(x[2:] for x in fix_lines(d.fixes)),
        ]
    if report.others:
        lines += ["", "Other flows:"]
        lines += [
            f"  {_head(o)}: {o.verdict.limiting_factor}"
            + (f" ({o.verdict.host_to_fix})" if o.verdict.host_to_fix else "")
            for o in report.others
        ]
    lines += [f"note: {n}" for n in report.notes]
    stream.write("\n".join(lines).rstrip() + "\n")
    stream.flush()
