"""`cached-metrics`: the sender reuses a slow-start threshold cached from an earlier,
worse connection.
"""

from __future__ import annotations

from tcpwizard.advice.evidence import Candidate as _Candidate
from tcpwizard.advice.evidence import Direction as _Direction
from tcpwizard.advice.evidence import Evidence
from tcpwizard.advice.evidence import window_held as _window_held
from tcpwizard.units import format_mbps as _fmt


def rule(ev: Evidence, d: _Direction) -> _Candidate | None:
    if d.sender is None:
        return None
    stale = [
        f
        for f in d.sender.findings
        if "metrics" in f.id and f.severity in ("warn", "crit") and "ssthresh" in f.observed
    ]
    if not stale or d.current is None:
        return None
    if _window_held(d.current):
        return None
    return _Candidate(
        d.name,
        "cached-metrics",
        0.7,
        d.sender_role,
        f"{d.name}: the sender reuses a slow-start threshold cached from an earlier, worse "
        "connection, so it leaves slow start far below the bandwidth-delay product and grows "
        "one segment per RTT.",
        (stale[0].observed, f"{d.current.mode} moved {_fmt(d.current.throughput_mbps)}"),
    )
