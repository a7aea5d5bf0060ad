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
from tcpwizard.advice.rules import policer
from tcpwizard.measure.engine.loaded_rtt import QUEUE_FREE_NOISE_MS, loaded_rtt, mss_of, srtts_ms
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
    rate = steady_mbps(cur)
    rwnd, sndbuf, _busy = _chrono(cur)
    if rate >= HEALTHY_SHARE * cap or (rwnd or 0.0) >= CHRONO_SHARE:
        return None
    if (sndbuf or 0.0) >= CHRONO_SHARE or ceiling_mbps(cur, idle) is not None:
        return None
    window = _window_segments(cur)
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
    if lr is None or lr.queue_ms <= own + _delayed_ack_ms(cur, window, lr.queue_ms):
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
        f"{lr.median_ms:.1f} ms against {idle:.1f} ms idle) while this transfer brought "
        f"{_fmt(rate)} of the {_fmt(cap)} capacity: others' traffic kept it standing"
    )


def standing_noise_ms(idle_ms: float) -> float:
    """How far above idle the RTT under load may stand without anyone's queue: the measured
    noise of queue-free flows on short paths (measure/engine/loaded_rtt.py), on longer ones
    the share of the idle RTT a policed flow's test reads (advice/rules/policer.py)."""
    return max(QUEUE_FREE_NOISE_MS, policer.NO_QUEUE_SHARE * idle_ms)


# RFC 1122 / RFC 5681: a receiver acknowledges at least every second full segment, else on
# its delayed-ACK timer; with fewer than two ACKs' worth in flight every round trip waits.
DELAYED_ACK_SEGMENTS = 4


# Linux's delayed-ACK timer at its floor (TCP_ATO_MIN, 40 ms; RFC 1122 allows up to 500):
# a segment with no second one behind it waits that long for its ACK.
DELACK_MS = 40.0
# The samples' mean deviation against their mean excess over idle, at and above which the
# excess came now and then rather than standing: samples raised by D in a share f of them
# deviate 2f(1-f)D on average against a mean excess of fD, a ratio of 2(1-f): 1 or more
# when at most every second round waits on a delayed ACK, near 0 for a queue that stands.
# Half is f = 3/4. (Reno at 5 % random loss with 4-5 segments a window, 9 Mbit/s x 29 ms:
# 0.80-1.11, read `cross-traffic`; queues others kept in the scenario matrix: 0.00-0.44.)
NOW_AND_THEN = 0.5


def _delayed_ack_ms(m: ModeResult, window: int | None, excess_ms: float) -> float:
    """What the receiver's delayed ACKs add to a small window's mean RTT (TCP_INFO's
    smoothed RTT): with W segments a round and an ACK per two, an odd one waits DELACK_MS
    for its ACK, one sample in about W/2: up to DELACK_MS / (W + 1) on the mean. Counted
    only when the samples' mean deviation says the excess came now and then (NOW_AND_THEN);
    a queue others keep raises every sample alike."""
    if window is None or window <= 0 or excess_ms <= 0:
        return 0.0
    half = [s.tcp_info.rttvar_us / 1e3 for s in m.samples[len(m.samples) // 2 :] if s.tcp_info]
    if not half or sorted(half)[len(half) // 2] < NOW_AND_THEN * excess_ms:
        return 0.0
    return DELACK_MS / (window + 1)


def _end_queue_ms(m: ModeResult, idle_ms: float) -> float | None:
    """The median smoothed RTT of the transfer's last quarter above idle (TCP_INFO); None
    with fewer than two samples there. The last quarter because a transfer ends only once
    its last growth lies in its first 75 % (measure/engine/steady.py settled_share): what
    follows is past the ramp."""
    rtts = srtts_ms(m)
    last = sorted(rtts[3 * len(rtts) // 4 :])
    return last[len(last) // 2] - idle_ms if len(last) >= 2 else None


def _window_segments(m: ModeResult) -> int | None:
    """The congestion window over the second half (median, segments; TCP_INFO)."""
    cwnds = sorted(s.tcp_info.snd_cwnd for s in m.samples[len(m.samples) // 2 :] if s.tcp_info)
    return cwnds[len(cwnds) // 2] if cwnds else None


def _own_queue_ms(m: ModeResult, cap_mbps: float, idle_ms: float) -> float:
    """The most queue this flow's own window keeps at a bottleneck of cap_mbps: what of its
    congestion window (the second half's median, TCP_INFO) the path's BDP does not hold.
    A window sent unpaced beyond the BDP waits in the queue whatever the average rate."""
    segments = _window_segments(m)
    if segments is None or cap_mbps <= 0:
        return 0.0
    mss = mss_of(m)
    rate_bytes_ms = cap_mbps * 1e6 / 8 / 1e3
    return max(0.0, segments * mss - rate_bytes_ms * idle_ms) / rate_bytes_ms
