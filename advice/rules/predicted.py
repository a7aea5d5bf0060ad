"""A prediction with no transfer: this host's own limits against the measured path."""

from __future__ import annotations

from tcpwizard.advice.evidence import HEALTHY_SHARE, Evidence
from tcpwizard.advice.evidence import Candidate as _Candidate
from tcpwizard.advice.evidence import Direction as _Direction
from tcpwizard.advice.model import LimitingFactor
from tcpwizard.advice.window_law import (
    UNSCALED_WINDOW,
    max_receive_window,
    max_send_window,
    scaling_enabled,
    window_limit_mbps,
)
from tcpwizard.units import format_mbps as _fmt


def rule(ev: Evidence, d: _Direction) -> _Candidate | None:
    """No transfer (the far end runs no serve): judge this host's own limits against the
    measured path, in both roles, with the confidence a prediction deserves."""
    if d.current is not None or ev.path is None or ev.path.capacity is None:
        return None
    rtt, cap = ev.path.rtt.min, ev.path.capacity.mbps
    if rtt <= 0 or cap <= 0:
        return None
    hs = ev.peer_handshake
    unscaled = window_limit_mbps(UNSCALED_WINDOW, rtt)
    if (
        ev.peer is None
        and hs is not None
        and hs.peer_scaling_off
        and unscaled < HEALTHY_SHARE * cap
    ):
        return _Candidate(
            d.name,
            "window-scaling",
            0.6,
            "peer",
            "predicted: the far end did not agree to TCP window scaling in the handshake (it "
            "is off there, or a middlebox strips the option), so no window above 64 KB in "
            "either direction.",
            (
                f"handshake on port {hs.port}: no window scale option from the far end",
                f"64 KB / {rtt:.1f} ms = {_fmt(unscaled)} < capacity {_fmt(cap)}",
            ),
        )
    if (
        scaling_enabled(ev.local) is False
        and window_limit_mbps(UNSCALED_WINDOW, rtt) < HEALTHY_SHARE * cap
    ):
        return _Candidate(
            d.name,
            "window-scaling",
            0.6,
            "local",
            "window scaling is off on this host: no window above 64 KB in either direction.",
            (f"64 KB / {rtt:.1f} ms = {_fmt(window_limit_mbps(UNSCALED_WINDOW, rtt))}",),
        )
    limits: list[tuple[float, LimitingFactor, str]] = []
    rwin = max_receive_window(ev.local)
    if rwin:
        limits.append((window_limit_mbps(rwin, rtt), "receiver-window", "receive"))
    swin = max_send_window(ev.local)
    if swin:
        limits.append((window_limit_mbps(swin, rtt), "sender-buffer", "send"))
    if not limits:
        return None
    limit, factor, verb = min(limits)
    if limit >= HEALTHY_SHARE * cap:
        return _Candidate(
            d.name,
            "path-capacity",
            0.5,
            None,
            "this host's buffers allow the measured capacity in both directions (predicted:"
            " no test transfer without serve on the far end).",
            (f"slowest: {verb} {_fmt(limit)} at {rtt:.3g} ms vs capacity {_fmt(cap)}",),
        )
    return _Candidate(
        d.name,
        factor,
        0.55,
        "local",
        f"predicted: this host can {verb} at most {_fmt(limit)} on this path "
        f"({rtt:.1f} ms), below its capacity of {_fmt(cap)}.",
        (
            f"window law: largest {verb} window / min RTT = {_fmt(limit)}",
            f"capacity {_fmt(cap)} ({ev.path.capacity.method})",
        ),
    )
