"""What the buffer rules share: the loss a transfer saw, the window law's rate with that
loss, whether a rate sits at a window-law bound, and a buffer rule's candidate.
"""

from __future__ import annotations

from tcpwizard.advice.capacity_view import capacity_view as _capacity_view
from tcpwizard.advice.capacity_view import steady_mbps
from tcpwizard.advice.evidence import Candidate as _Candidate
from tcpwizard.advice.evidence import Direction as _Direction
from tcpwizard.advice.evidence import Evidence
from tcpwizard.advice.evidence import mss as _mss
from tcpwizard.advice.evidence import rtt_ms as _rtt_ms
from tcpwizard.advice.model import LimitingFactor
from tcpwizard.advice.window_law import (
    UNSCALED_WINDOW,
    audited_window,
    lossy_window_share,
    window_limit_mbps,
)
from tcpwizard.checks.model import HostRole
from tcpwizard.measure.model import ModeResult
from tcpwizard.units import format_mbps as _fmt


def buffer_candidate(
    ev: Evidence,
    d: _Direction,
    factor: LimitingFactor,
    confidence: float,
    host: HostRole,
    explanation: str,
    evidence: list[str],
) -> _Candidate | None:
    """A buffer rule's candidate when its evidence named the buffer (confidence above 0),
    the evidence closed by what the transfer moved and how the path's capacity was seen."""
    cur = d.current
    if confidence == 0.0 or cur is None:
        return None
    evidence.append(f"{cur.mode} moved {_fmt(cur.throughput_mbps)}")
    if note := _capacity_view(ev, d)[1]:
        evidence.append(note)
    return _Candidate(d.name, factor, confidence, host, explanation, tuple(evidence))


def loss_fraction(ev: Evidence, d: _Direction) -> float | None:
    cur = d.current
    if cur and cur.bytes > 0 and cur.retransmits > 0:
        return cur.retransmits * _mss(d) / cur.bytes
    if ev.path and ev.path.rtt.loss_pct > 0:
        return ev.path.rtt.loss_pct / 100
    return None


def lossy(ev: Evidence, d: _Direction, limit_mbps: float, window: float) -> float:
    """A window law's rate with the loss the transfer saw: each window with a loss in it
    waits a round trip for its repair (advice/window_law.py lossy_window_share)."""
    loss = loss_fraction(ev, d) or 0.0
    return limit_mbps * lossy_window_share(loss, window, _mss(d))


# The weight of a rate that sits at a window-law bound (at_bound): the window, not the
# network, set it. Both buffer rules give it; so does a window the sender was offered and
# delivered in full each round trip (the same law, read on TCP_INFO's snd_wnd).
AT_BOUND_CONFIDENCE = 0.75


def at_bound(m: ModeResult, limit_mbps: float, high_mbps: float | None = None) -> bool:
    """The rate sits at a window-law bound (not far under it, which something else would
    explain): between 3/4 of it and 5/4 of its high end, once up to speed or on average."""
    high = limit_mbps if high_mbps is None else high_mbps
    return 0.75 * limit_mbps <= steady_mbps(m) and m.throughput_mbps <= 1.25 * high


def hosts_window_mbps(ev: Evidence, d: _Direction) -> float | None:
    """The most an autotuned transfer this way can move by the window law: the smaller of
    the windows the audited hosts' buffers allow (the receiver's, the sender's) and 64 KB
    where the connection is unscaled; None when no window is known or the judged transfer
    set its own buffers (its windows are not the sysctls')."""
    cur, rtt = d.current, _rtt_ms(ev, d)
    if cur is None or cur.mode != "autotune" or not rtt:
        return None
    windows = [
        w
        for w in (
            audited_window(d.sender, d.receiver),
            UNSCALED_WINDOW if ev.windows_unscaled else None,
        )
        if w
    ]
    return window_limit_mbps(min(windows), rtt) if windows else None
