"""The RTT with no queue on a path whose delay varies packet by packet.

A delay that varies per packet with the order kept (a radio link's local retransmissions, a
satellite hop's scheduling, a delay line or netem with jitter and a rate) delivers no packet
before the one ahead of it: a flow that sends faster than one packet per jitter range waits
behind the slowest of them and carries the top of that range, with no queue anywhere. On a
100 Mbit/s x 40 ms lab path with +-8 ms each way, the idle echoes read 27-53 ms and every
transfer, a 12 Mbit/s untuned one as much as a policed 34 Mbit/s one, stood at 47-50 ms:
measured against the idle minimum, a "standing queue" of 20 ms that no buffer held.

The idle echoes, spaced apart, sample that range; the rules that read a queue from the RTT
under load (bufferbloat, the policer's "no queue", others' queue) measure it from the top of
the range instead of its bottom. Others' traffic spreads the echoes too, and its queue is a
queue, so the range counts as the path's only when two tells rule others out: the
available-bandwidth probe found the path free every way it was sent
(measure/probes/availbw.py, availbw_down.py), and no transfer's smoothed RTT went below the
idle minimum (a queue that held every echo up empties now and then under a flow: Reno beside
3 TCP flows dipped 1.5 ms below its echoes, scenario matrix 20261230.130; the smoothed RTT
of a flow on a jittery path averages many samples and stays above the range's bottom).
"""

from __future__ import annotations

from collections.abc import Sequence

from tcpwizard.advice.evidence import CROSS_FREE_SHARE, Direction, Evidence, rtt_ms
from tcpwizard.measure.engine.loaded_rtt import QUEUE_FREE_NOISE_MS, srtts_ms
from tcpwizard.measure.model import ModeResult, PathEstimate


def jitter_range_ms(ev: Evidence) -> float:
    """How far the idle echoes spread above their minimum (95th percentile: one late echo
    is not the path) when that spread is the path's own delay jitter, else 0."""
    modes = ev.transfer.modes if ev.transfer is not None else ()
    return path_jitter_ms(ev.path, modes)


def idle_spread_ms(path: PathEstimate) -> float:
    """How far the idle echoes spread above their minimum (95th percentile)."""
    return path.rtt.p95 - path.rtt.min


def path_jitter_ms(path: PathEstimate | None, modes: Sequence[ModeResult]) -> float:
    """jitter_range_ms from the probe's path and the check's transfers."""
    if path is None or not path.peer or path.rtt.samples < 2:  # a spread needs two echoes
        return 0.0
    spread = idle_spread_ms(path)
    if spread <= QUEUE_FREE_NOISE_MS:
        return 0.0
    avs = path.availables()
    if not avs or any(a.free_share <= CROSS_FREE_SHARE for a in avs):
        return 0.0  # unknown or shared (either way): the spread may be others' queue
    if any(s < path.rtt.min for m in modes for s in srtts_ms(m)):
        return 0.0  # the echoes carried a queue that emptied under a transfer
    return spread


def queue_free_rtt_ms(ev: Evidence, d: Direction) -> float | None:
    """The RTT a flow on this path sees with no queue: the idle minimum, or on a path with
    delay jitter the top of the idle range (jitter_range_ms)."""
    idle = rtt_ms(ev, d)  # the idle echoes' minimum whenever the probe ran
    if idle is None or ev.path is None:
        return idle
    return idle + jitter_range_ms(ev)
