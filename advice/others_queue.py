"""Others' traffic seen in the queue: a queue that stood at the bottleneck while this
transfer brought well below its capacity was kept standing by someone else.
"""

from __future__ import annotations

from tcpwizard.advice.capacity_view import capacity as _capacity
from tcpwizard.advice.capacity_view import steady_mbps
from tcpwizard.advice.ceiling import ceiling_mbps
from tcpwizard.advice.evidence import CHRONO_SHARE, HEALTHY_SHARE, Evidence
from tcpwizard.advice.evidence import Direction as _Direction
from tcpwizard.advice.evidence import chrono as _chrono
from tcpwizard.advice.evidence import rtt_ms as _rtt_ms
from tcpwizard.advice.path_jitter import jitter_range_ms
from tcpwizard.advice.rules import policer
from tcpwizard.measure.engine.loaded_rtt import (
    delayed_ack_ms,
    loaded_rtt,
    mss_of,
    srtts_ms,
    window_segments,
)
from tcpwizard.measure.engine.rates import ip_rate
from tcpwizard.measure.model import ModeResult
from tcpwizard.units import format_mbps as _fmt


def others_queue(ev: Evidence, d: _Direction) -> str | None:
    """Evidence that others' traffic kept a queue standing at the bottleneck while this
    transfer ran well below its capacity: a queue stands only while what arrives at least
    fills the line, and this flow brought less than the healthy share of it, held by
    neither window and with no rate ceiling of its own (a shaper below the probed rate
    would give it one). The rest of what kept the queue is someone else's."""
    cur, cap, idle = d.current, _capacity(ev, d), _rtt_ms(ev, d)
    if cur is None or cap is None or idle is None or cur.error is not None:
        return None
    # The path's own RTT is at most the lowest any packet saw. Others' traffic that keeps a
    # queue swinging can hold the idle probe's 20 echoes above it, and the transfer then
    # dips below "idle" whenever that queue empties (Reno beside 3 TCP flows, 341 Mbit/s x
    # 12.5 ms: echoes at 14.3 ms or more, the transfer's smoothed RTT swinging 12.9-18.3
    # ms, read `congestion` on this host; scenario matrix 20261230.130).
    # On a path with delay jitter (advice/path_jitter.py) every flow carries the top of its
    # range, and no transfer went below the echoes (that is one of its tells).
    jitter = jitter_range_ms(ev)
    idle = idle + jitter if jitter else min([idle, *srtts_ms(cur)])
    rate = steady_mbps(cur)
    rwnd, sndbuf, _busy = _chrono(cur)
    if rate >= HEALTHY_SHARE * cap or (rwnd or 0.0) >= CHRONO_SHARE:
        return None
    if (sndbuf or 0.0) >= CHRONO_SHARE or ceiling_mbps(cur, idle) is not None:
        return None
    window = window_segments(cur)
    if window is not None and window < DELAYED_ACK_SEGMENTS:
        # A window this small waits on the receiver's delayed ACK, and its RTT samples
        # carry that wait: they show no queue (a policed Reno flow with 2 segments in
        # flight at 3.5 ms read 2.1 ms above idle).
        return None
    lr = loaded_rtt(cur, idle)
    # What the flow's own segments carry above idle with no queue at all: its window's
    # excess over the BDP, the RTT's noise, and its own segments' spacing and
    # serialization at the bottleneck (policer.segment_spacing_ms: 3.4 ms for back-to-back
    # pairs at 7 Mbit/s).
    spacing = policer.segment_spacing_ms(
        cur, ip_rate(rate, mss_of(cur)), cap, cur.congestion_control
    )
    own = _own_queue_ms(cur, cap, idle) + standing_noise_ms(idle) + spacing
    if lr is None or lr.queue_ms <= own + delayed_ack_ms(cur, window, lr.queue_ms):
        return None
    end = _end_queue_ms(cur, idle)
    if end is not None and end <= own:
        # Others' traffic keeps a queue standing to the end; this one drained: slow start's
        # overshoot, still in a long path's second half (Reno at 269 Mbit/s x 190 ms ended
        # slow start at 2.1 s of 3.1: its queue 14-51 ms above idle early in the second
        # half, none in the last quarter; read `cross-traffic` at 0.95).
        return None
    return (
        f"a queue of {lr.queue_ms:.1f} ms stood at the bottleneck (RTT under load "
        f"{lr.median_ms:.1f} ms against {idle:.1f} ms, the lowest it or the idle probe saw) "
        f"while this transfer brought "
        f"{_fmt(rate)} of the {_fmt(cap)} capacity: others' traffic kept it standing"
    )


def standing_noise_ms(idle_ms: float) -> float:
    """How far above idle the RTT under load may stand without anyone's queue: the measured
    noise of queue-free flows on short paths (measure/engine/loaded_rtt.py), on longer ones
    a share of the idle RTT: the policer's own test of no queue (advice/rules/policer.py)."""
    return policer.no_queue_ms(idle_ms)


# RFC 1122 / RFC 5681: a receiver acknowledges at least every second full segment, else on
# its delayed-ACK timer; with fewer than two ACKs' worth in flight every round trip waits.
DELAYED_ACK_SEGMENTS = 4


def _end_queue_ms(m: ModeResult, idle_ms: float) -> float | None:
    """The median smoothed RTT of the transfer's last quarter above idle (TCP_INFO); None
    with fewer than two samples there. The last quarter because a transfer ends only once
    its last growth lies in its first 75 % (measure/engine/steady.py settled_share): what
    follows is past the ramp."""
    rtts = srtts_ms(m)
    last = sorted(rtts[3 * len(rtts) // 4 :])
    return last[len(last) // 2] - idle_ms if len(last) >= 2 else None


def _own_queue_ms(m: ModeResult, cap_mbps: float, idle_ms: float) -> float:
    """The most queue this flow's own window keeps at a bottleneck of cap_mbps: what of its
    congestion window (the second half's median, TCP_INFO) the path's BDP does not hold.
    A window sent unpaced beyond the BDP waits in the queue whatever the average rate."""
    segments = window_segments(m)
    if segments is None or cap_mbps <= 0:
        return 0.0
    mss = mss_of(m)
    rate_bytes_ms = cap_mbps * 1e6 / 8 / 1e3
    return max(0.0, segments * mss - rate_bytes_ms * idle_ms) / rate_bytes_ms
