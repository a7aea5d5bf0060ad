"""The interpreter's thread switching, set for measuring.

A thread that returns from a system call (a train's send, a receive) must take the GIL back
before it can stamp or send the next packet. If another thread (the TUI's renderer, the
other direction of a two-way transfer) holds it, CPython lets that thread run for its whole
switch interval, 5 ms by default: 40 packets at 100 Mbit/s, so a sender's train stalls, the
bottleneck queue drains, and the tool reports its own scheduling as the path (a "shaper",
a slow sender). Half a millisecond keeps that under a few packets at a modest cost.
"""

from __future__ import annotations

import sys

SWITCH_INTERVAL_S = 0.0005


def favour_packet_timing() -> None:
    """Shorten the switch interval for this process (never lengthen it)."""
    if sys.getswitchinterval() > SWITCH_INTERVAL_S:
        sys.setswitchinterval(SWITCH_INTERVAL_S)
