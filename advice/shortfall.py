"""When a transfer falls short of the path with no host to blame, measure what others leave.

The available bandwidth (measure/probes/availbw.py) costs about two seconds of periodic
streams each way, so `check` runs it unasked only when it can change the verdict, for each
way a transfer went (serve sends the streams for a download): the transfer reached less
than the healthy share of the probed capacity that way while neither window held the
sender. Then the path is either shared (`cross-traffic`, which needs the measurement) or
limited by something the other rules name from the transfer itself.

Or: the idle echoes spread by more than a queue-free path's RTT allows (the policer's "no
queue" allowance, advice/rules/policer.py). Then either others' traffic keeps a queue
swinging, or the path's own delay varies packet by packet; a flow on such a path carries the
top of the range with no queue (advice/path_jitter.py), and only the available bandwidth
tells the two apart, so the rules that read a queue from the RTT would otherwise guess.
"""

from __future__ import annotations

from tcpwizard.advice.evidence import HEALTHY_SHARE, pick_current, window_held
from tcpwizard.advice.path_jitter import idle_spread_ms
from tcpwizard.advice.rules.policer import no_queue_ms
from tcpwizard.measure.engine import rates
from tcpwizard.measure.model import Direction, PathEstimate, TransferResult
from tcpwizard.units import format_mbps


def fell_short(
    path: PathEstimate | None, transfer: TransferResult | None, direction: Direction = "up"
) -> str:
    """Why the available bandwidth that way is worth measuring now ("" when it is not)."""
    if path is None or transfer is None:
        return ""
    probed = path.capacity_for(direction)
    if probed is None:
        return ""
    if path.available_for(direction) is not None:
        return ""
    ran = [m for m in transfer.modes if m.direction == direction and m.error is None]
    cur = pick_current(ran)
    if direction == "down" and cur is None:
        return ""  # no download to explain
    # The spread asks once, the upload's streams if an upload ran (either way's tell the
    # path's own jitter from others' queue; a download that fell short asks for its own).
    asks = direction == "up" or not any(m.direction == "up" for m in transfer.modes)
    spread = idle_spread_ms(path)
    if asks and path.peer and spread > no_queue_ms(path.rtt.min):
        return (
            f"the idle RTT spread {spread:.1f} ms above its {path.rtt.min:.1f} ms minimum: "
            "others' queue, or the path's own delay jitter?"
        )
    if cur is None:
        return ""
    rate = rates.mode_steady_mbps(cur) or cur.throughput_mbps
    cap = probed.mbps
    if rate >= HEALTHY_SHARE * cap:
        return ""
    if window_held(cur):
        return ""  # a window held it: the window rules speak, whatever others send
    way = "upload" if direction == "up" else "download"
    return (
        f"the {way} held {format_mbps(rate)} of the {format_mbps(cap)} the probe saw, with "
        "neither window holding it: is the path shared?"
    )
