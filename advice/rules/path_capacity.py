"""`path-capacity`: the transfer reached the healthy share of the path's capacity; the
network itself is the limit and the hosts are tuned well enough for it.
"""

from __future__ import annotations

from tcpwizard.advice.capacity_view import capacity as _capacity
from tcpwizard.advice.capacity_view import capacity_sure as _capacity_sure
from tcpwizard.advice.capacity_view import capacity_view as _capacity_view
from tcpwizard.advice.capacity_view import own_rate_only as _own_rate_only
from tcpwizard.advice.capacity_view import peerless_guess, reached_mbps, window_held
from tcpwizard.advice.evidence import HEALTHY_SHARE, Evidence, sender_cc
from tcpwizard.advice.evidence import Candidate as _Candidate
from tcpwizard.advice.evidence import Direction as _Direction
from tcpwizard.advice.rules import egress_shaper, policer
from tcpwizard.advice.sawtooth import healthy_share
from tcpwizard.units import format_mbps as _fmt


def rule(ev: Evidence, d: _Direction) -> _Candidate | None:
    cap, cur = _capacity(ev, d), d.current
    if cap is None or cur is None or cap <= 0 or _own_rate_only(ev, d):
        return None
    if peerless_guess(ev, d) and window_held(cur):
        # A guess from SYN or ICMP pairs (2-470 Mbit/s on an 80 Mbit/s lab path) cannot
        # call the path the limit against the sender's own counters: an iperf3 far end's
        # 256 KB tcp_rmem held an upload at 15 Mbit/s, receive-window limited 30 % of the
        # time, and a guess of 23.5 Mbit/s read it `path-capacity`.
        return None
    if egress_shaper.shaped(d) is not None:
        # The probe measured the sender's own shaper: no proof of the path's capacity.
        return None
    if policer.rule(ev, d) is not None:
        # A policed transfer's rate (its bucket's burst averaged in) is no proof of the
        # path's capacity: it must not overrule a weak probe and call the path healthy.
        return None
    share = reached_mbps(cur) / cap
    healthy, sawtooth = healthy_share(ev, d)
    if share < healthy:
        return None
    evidence = [
        f"{cur.mode} moved {_fmt(cur.throughput_mbps)} ({_fmt(reached_mbps(cur))} once up to "
        f"speed) of {_fmt(cap)} capacity"
    ]
    shallow = ""
    if sawtooth is not None and share < HEALTHY_SHARE:
        evidence.append(sawtooth.note(sender_cc(d)))
        shallow = (
            " The bottleneck's queue is shallower than what BBR keeps in flight beyond the "
            "line (up to a BDP): its probing overflows it and each loss costs a round trip "
            "of recovery. The path's buffer sets that, not a host setting."
            if policer.model_based(sender_cc(d))
            else " The bottleneck's queue is shallower than the path's BDP: a loss-based "
            "sender idles the line after each loss; BBR with fq pacing, or parallel streams, "
            "keep it fuller."
        )
    if share > 1.1:
        evidence.append("the capacity probe was the slower one (sender-limited): a lower bound")
    if note := _capacity_view(ev, d)[1]:
        evidence.append(note)
    return _Candidate(
        d.name,
        "path-capacity",
        min(0.95, 0.6 + min(share, 1.0) * _capacity_sure(ev, d) / 3),
        None,
        f"{d.name}: the transfer reached {min(share, 1.0):.0%} of the path's capacity; the "
        f"network itself is the limit and the hosts are tuned well enough for it.{shallow}",
        tuple(evidence),
        decisive=True,
    )
