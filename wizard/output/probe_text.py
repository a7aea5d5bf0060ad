"""`probe` as text: the RTT, the capacity each way, the BDP, and the verdict it allows."""

from __future__ import annotations

from typing import TextIO

from tcpwizard.documents import ProbeDocument
from tcpwizard.measure.model import CapacityEstimate, PathEstimate
from tcpwizard.output.document import RenderOptions
from tcpwizard.units import format_bytes


def render(doc: ProbeDocument, stream: TextIO, opts: RenderOptions) -> None:
    v = doc.report.verdict
    print(render_text(doc.host, doc.estimate), file=stream)
    print(
        f"  Verdict    {v.limiting_factor} (predicted for this host, no test transfer;"
        f" `tcpwizard check` measures it)\n             {v.explanation}",
        file=stream,
    )


def _cap_line(cap: CapacityEstimate, direction: str) -> str:
    line = f"{cap.mbps:.1f} Mbit/s {direction} ({cap.method}, confidence {cap.confidence:.1f})"
    if cap.limited_by:
        line += f"\n             limited by {cap.limited_by}: {cap.note}"
    elif cap.note:
        line += f"\n             {cap.note}"
    return line


def render_text(host: str, est: PathEstimate) -> str:
    r = est.rtt
    how = "tcpwizard serve" if est.peer else "peerless probes"
    lines = [
        f"Path to {host} ({est.address}) via {how}",
        f"  RTT        min {r.min:.3f}  p50 {r.p50:.3f}  p95 {r.p95:.3f}  mean {r.mean:.3f}"
        f"  mdev {r.mdev:.3f}  max {r.max:.3f} ms",
        f"             loss {r.loss_pct:.1f}%, jitter {r.jitter:.3f} ms"
        f" ({r.method}, {r.samples} replies)",
    ]
    if est.capacity:
        lines.append("  Capacity   " + _cap_line(est.capacity, "up"))
    else:
        lines.append("  Capacity   not measured")
    if est.capacity_down:
        lines.append("             " + _cap_line(est.capacity_down, "down"))
    if est.bdp_bytes is not None:
        bdp = est.bdp_bytes
        lines.append(f"  BDP        {format_bytes(bdp)} ({bdp} bytes = capacity x min RTT)")
    lines.extend(f"  note: {n}" for n in est.notes)
    lines.append(f"  took {est.duration_s:.2f} s")
    return "\n".join(lines)
