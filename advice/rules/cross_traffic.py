"""`cross-traffic`: the path is shared; other traffic takes a share of its capacity."""

from __future__ import annotations

from tcpwizard.advice.capacity_view import capacity as _capacity
from tcpwizard.advice.capacity_view import steady_mbps
from tcpwizard.advice.evidence import (
    CROSS_FREE_SHARE,
    HEALTHY_SHARE,
    Evidence,
    mss,
    other_mode,
)
from tcpwizard.advice.evidence import Candidate as _Candidate
from tcpwizard.advice.evidence import Direction as _Direction
from tcpwizard.advice.others_queue import others_queue as _others_queue
from tcpwizard.advice.window_evidence import hosts_window_mbps
from tcpwizard.measure.engine.rates import ip_rate
from tcpwizard.units import format_mbps as _fmt

CROSS_TAKES_FREE = 1.3  # the transfer got no more than this times what is free
# Below the congestion and window rules (0.55-0.9 when their evidence holds), above WEAK
# (advice/diagnose.py): sharing explains the gap unless the transfer's own evidence names a
# limit of its own.
CROSS_SHARED_CONFIDENCE = 0.5
# Others' standing queue, not measured as a share: below the measured share's 0.8, above
# what congestion keeps when that queue explains its losses (FULL_SHARE_LOSS_CONFIDENCE,
# advice/rules/congestion.py).
CROSS_QUEUE_CONFIDENCE = 0.7


def rule(ev: Evidence, d: _Direction) -> _Candidate | None:
    """The capacity is there, but other traffic takes a share of it (the available
    bandwidth that way was mostly taken before this transfer). Unresponsive
    traffic leaves the transfer about what is free; TCP flows yield part of their share
    (they split a bottleneck), so a transfer faster than what was free still shares it."""
    av = ev.path.available_for(d.name) if ev.path else None
    cur, cap = d.current, _capacity(ev, d)
    if cur is None or cap is None:
        return None
    if av is None or not av.loaded or av.free_share > CROSS_FREE_SHARE:
        # No measured share taken (or none measured): a queue others kept standing while
        # this transfer ran below the path says the same.
        queue = _others_queue(ev, d)
        if queue is None:
            return None
        return _Candidate(
            d.name,
            "cross-traffic",
            CROSS_QUEUE_CONFIDENCE,
            None,
            f"{d.name}: the path is shared: others' traffic keeps a queue standing at the "
            "bottleneck, and this transfer gets a share of what is left. No setting on "
            "either host changes that: move the data when the path is quieter, over a less "
            "loaded path, or ask the network's operators for a reserved or prioritised "
            "path; parallel streams take a larger share only at the others' expense.",
            (queue,),
        )
    free = av.estimate_bps / 1e6
    rate = steady_mbps(cur)
    if av.free_share > CROSS_FREE_SHARE or rate >= HEALTHY_SHARE * cap:
        return None
    held = hosts_window_mbps(ev, d)
    # The probe's rates count wire bytes: the window law's goodput in IP bytes beside them.
    if held is not None and ip_rate(held, mss(d)) < av.low_bps / 1e6:
        # The hosts' own windows bound this transfer below even the least that was free:
        # what others left never held it (a 136 KB receive buffer at 2.4 ms, 294 Mbit/s,
        # read as the leftover of 342-494 Mbit/s free: scenario matrix 20261201.111).
        return None
    taken = max(0.0, av.capacity_bps / 1e6 - free)
    # A short transfer's last samples can run above what is free while it overdrives the
    # queue (unresponsive traffic loses its share of the drops too); its average cannot.
    leftover = min(rate, cur.throughput_mbps) <= CROSS_TAKES_FREE * free
    # Another mode of the check that moved well past what was free shows the room was
    # there for this transfer too: what is left did not hold it, whatever the others take
    # (a 506 KB send buffer held autotuning at 0.75 of 4.6 Gbit/s, DRS moved 3.6 with
    # 1.2 "free": `cross-traffic` at 0.8 in the scenario matrix).
    other = other_mode(d)
    leftover = leftover and not (other and steady_mbps(other) > CROSS_TAKES_FREE * free)
    queue = _others_queue(ev, d)
    if leftover:
        confidence = 0.8 if rate >= 0.6 * free else 0.55
        got = "this transfer gets about what is left"
        found = f"transfer {_fmt(rate)} once up to speed, about what is free"
    else:
        # It took more than was free: the others gave way, as TCP flows do, and what they
        # kept is what it lacks; any limit of its own (a window, losses) is named with
        # more confidence by its own rule.
        confidence = CROSS_SHARED_CONFIDENCE
        got = "this transfer gets a share of it, as TCP flows sharing a bottleneck do"
        found = (
            f"transfer {_fmt(rate)} once up to speed: more than was free, so the others "
            f"gave way in part and kept about {_fmt(max(0.0, cap - rate))}"
        )
    if queue:  # the queue others kept shows the sharing too
        confidence = max(confidence, CROSS_QUEUE_CONFIDENCE)
    return _Candidate(
        d.name,
        "cross-traffic",
        confidence,
        None,
        f"{d.name}: the path is shared: its capacity is there, but other traffic took about "
        f"{_fmt(taken)} of it before this transfer and {got}. No setting on either host "
        "changes that: move the data when the path is quieter (nights, weekends), over "
        "a less loaded path, or ask the network's operators for a reserved or prioritised "
        "path; parallel streams take a larger share only at the others' expense.",
        (
            f"available bandwidth {_fmt(free)} ({_fmt(av.low_bps / 1e6)}-"
            f"{_fmt(av.high_bps / 1e6)}) of capacity {_fmt(av.capacity_bps / 1e6)}: "
            f"{av.free_share:.0%} free ({av.loaded} of {av.streams} periodic streams built "
            f"a queue, {av.elapsed_s:.1f} s)",
            found,
            *((queue,) if queue else ()),
        ),
    )
