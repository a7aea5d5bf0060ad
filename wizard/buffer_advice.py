"""`tcpwizard history HOST --buffer`: the socket buffer an application should ask for on a
path, from the bandwidth-delay products the last checks measured (the Enable idea: keep
per-path knowledge so later connections start right-sized).

The BDP of a WAN moves through the day, so the advice sizes for the largest of the recent
measurements (never the mean: a buffer too small caps every transfer, one too large only
costs memory), 2 x BDP rounded up to a power of two like every fix of the audit, and says how
old the evidence is.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from tcpwizard.advice.snippets import c_snippet, python_snippet
from tcpwizard.checks.model import BdpTarget
from tcpwizard.checks.window import recommended_buffer
from tcpwizard.history import HistoryRow
from tcpwizard.units import format_bytes

# How many of the newest measured BDPs the advice reads.
RECENT = 5


@dataclass(frozen=True)
class BdpSample:
    ts: float
    age_s: float
    bdp_bytes: int
    rtt_min_ms: float | None
    capacity_mbps: float | None


@dataclass(frozen=True)
class BufferAdvice:
    host: str
    samples: tuple[BdpSample, ...]  # newest first
    bdp_bytes: int  # the largest of the samples
    buffer_bytes: int  # what to ask for: 2 x BDP, a power of two, capped by RAM
    shell: tuple[str, ...]
    c: str
    python: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def buffer_advice(
    host: str,
    rows: Sequence[HistoryRow],
    ram_bytes: int | None = None,
    now: float | None = None,
) -> BufferAdvice | None:
    """None when no recorded check of `host` measured a BDP."""
    now = time.time() if now is None else now
    measured = sorted(
        (r for r in rows if r.bdp_bytes is not None and r.bdp_bytes > 0), key=lambda r: -r.ts
    )[:RECENT]
    if not measured:
        return None
    samples = tuple(
        BdpSample(r.ts, max(0.0, now - r.ts), int(r.bdp_bytes or 0), r.rtt_min_ms, r.capacity_mbps)
        for r in measured
    )
    bdp = max(s.bdp_bytes for s in samples)
    size = recommended_buffer(BdpTarget(1.0, bdp * 8.0, "measured"), ram_bytes)
    mb = f"{size // (1 << 20)}M" if size % (1 << 20) == 0 else f"{size // 1024}K"
    shell = (
        f"iperf3 -c {host} -w {mb}",
        f"globus-url-copy -tcp-bs {size} SRC DST",
        f"sysctl -w net.core.rmem_max={size} net.core.wmem_max={size}  "
        "# as root, if the kernel caps the request",
    )
    return BufferAdvice(
        host,
        samples,
        bdp,
        size,
        shell,
        c_snippet("SO_RCVBUF", size),
        python_snippet("SO_RCVBUF", size),
    )


def _age(seconds: float) -> str:
    for unit, span in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= span:
            return f"{seconds / span:.0f} {unit} ago"
    return "just now"


def render_text(a: BufferAdvice) -> str:
    seen = ", ".join(f"{format_bytes(s.bdp_bytes)} {_age(s.age_s)}" for s in a.samples)
    lines = [
        f"Buffer for applications on the path to {a.host}: {format_bytes(a.buffer_bytes)} "
        f"({a.buffer_bytes} bytes)",
        f"  2 x the largest of the last {len(a.samples)} measured BDPs: {seen}",
        "  Ask for it on both ends (SO_RCVBUF on the receiver, SO_SNDBUF on the sender), "
        "before connect()/listen();",
        "  a socket that sets its own buffer no longer autotunes.",
        "",
        "Shell:",
        *(f"  {line}" for line in a.shell),
        "",
        "C:",
        *(f"  {line}" for line in a.c.rstrip().splitlines()),
        "",
        "Python:",
        *(f"  {line}" for line in a.python.rstrip().splitlines()),
    ]
    return "\n".join(lines) + "\n"
