"""A download whose sender reports nothing (a web server), judged from our receiving
socket's TCP_INFO: the path, the far end's send buffer, or losses.
"""

from __future__ import annotations

from tcpwizard.advice.capacity_view import below_path as _below_path
from tcpwizard.advice.capacity_view import receiver_saw_path as _receiver_saw_path
from tcpwizard.advice.capacity_view import steady_mbps
from tcpwizard.advice.evidence import Candidate as _Candidate
from tcpwizard.advice.evidence import Direction as _Direction
from tcpwizard.advice.evidence import Evidence
from tcpwizard.advice.evidence import rtt_ms as _rtt_ms
from tcpwizard.advice.window_law import WINDOW_FILLED, window_limit_mbps
from tcpwizard.units import format_mbps as _fmt


def rule(ev: Evidence, d: _Direction) -> _Candidate | None:
    """A download whose sender reports nothing (a web server, `check URL`): our receiving
    socket's TCP_INFO says whether the window we offered was filled every RTT (then the
    receiver-window rule speaks) or the sender kept far less in flight than that window
    allowed: its send buffer, or losses (segments out of order) holding its window down."""
    cur = d.current
    view = cur.receiver_view if cur is not None else None
    if cur is None or view is None or d.sender is not None or view.max_rcv_wnd <= 0:
        return None
    rtt = _rtt_ms(ev, d) or view.rcv_rtt_us / 1e3
    if not rtt or not _below_path(ev, d):
        return None
    offered = window_limit_mbps(view.max_rcv_wnd, rtt)
    if _receiver_saw_path(cur, rtt, steady_mbps(cur)):
        # The download filled the bottleneck's queue: whatever a peerless probe guessed
        # above it, the network set this rate.
        return _Candidate(
            d.name,
            "path-capacity",
            0.65,
            None,
            f"{d.name}: the download filled the path's bottleneck (its queue raised the RTT "
            "our receiver saw): the network itself is the limit.",
            (
                f"{cur.mode} moved {_fmt(steady_mbps(cur))} once up to speed; the receiver's "
                f"RTT {view.rcv_rtt_us / 1e3:.1f} ms (90th percentile "
                f"{view.rcv_rtt_high_us / 1e3:.1f} ms) against {rtt:.1f} ms minimum",
                "the capacity probe toward a web server is peerless (a guess)",
            ),
        )
    if steady_mbps(cur) >= WINDOW_FILLED * offered:
        return None  # our window was filled each RTT: the receiver-window rule speaks
    evidence = [
        f"{cur.mode} moved {_fmt(cur.throughput_mbps)} ({_fmt(steady_mbps(cur))} once up to "
        f"speed); the window we offered, {view.max_rcv_wnd / 1e6:.2f} MB / {rtt:.1f} ms, "
        f"allowed {_fmt(offered)} (TCP_INFO of our receiving socket)",
    ]
    if view.ooo_packets > 0:
        evidence.append(f"{view.ooo_packets} segments arrived out of order: losses on the way")
        return _Candidate(
            d.name,
            "congestion",
            0.55,
            d.sender_role,
            f"{d.name}: the sender keeps far less in flight than our window allows and "
            "segments are lost on the way: losses hold its congestion window down.",
            tuple(evidence),
        )
    evidence.append("no segment arrived out of order: nothing was lost")
    return _Candidate(
        d.name,
        "sender-buffer",
        0.6,
        d.sender_role,
        f"{d.name}: the sender ({d.sender_role}) keeps far less data in flight than our "
        "window allows, without losses: its send buffer (tcp_wmem) is too small for the "
        "path (or the server application supplies data slower).",
        tuple(evidence),
    )
