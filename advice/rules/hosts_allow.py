"""`path-capacity` for a short test: nothing held the sender back and both hosts' windows
allow the capacity; the test ended while TCP was still ramping up.
"""

from __future__ import annotations

from tcpwizard.advice.capacity_view import capacity as _capacity
from tcpwizard.advice.evidence import CHRONO_SHARE, HEALTHY_SHARE, Evidence
from tcpwizard.advice.evidence import Candidate as _Candidate
from tcpwizard.advice.evidence import Direction as _Direction
from tcpwizard.advice.evidence import chrono as _chrono
from tcpwizard.advice.evidence import rtt_ms as _rtt_ms
from tcpwizard.advice.evidence import window_held as _window_held
from tcpwizard.advice.ramp import still_ramping as _still_ramping
from tcpwizard.advice.window_law import max_receive_window, max_send_window, window_limit_mbps
from tcpwizard.units import format_mbps as _fmt


def rule(ev: Evidence, d: _Direction) -> _Candidate | None:
    """Nothing held the sender back and both hosts' windows allow the capacity: a short test
    that ended before the rate was reached is not a fault of the hosts."""
    cur, rtt, cap = d.current, _rtt_ms(ev, d), _capacity(ev, d)
    if cur is None or rtt is None or cap is None or d.sender is None or d.receiver is None:
        return None
    _, _, busy = _chrono(cur)
    if _window_held(cur) or (busy or 1.0) < 0.6:
        return None
    windows = [max_receive_window(d.receiver), max_send_window(d.sender)]
    if any(w is None or window_limit_mbps(w, rtt) < HEALTHY_SHARE * cap for w in windows):
        return None
    if any(f.id == "cached_metrics" and f.severity in ("warn", "crit") for f in d.sender.findings):
        return None
    if not _still_ramping(cur):
        return None  # the rate had settled below the capacity: not a short test's ramp
    return _Candidate(
        d.name,
        "path-capacity",
        0.45,
        None,
        f"{d.name}: nothing held the sender back and both hosts' windows allow the path's "
        "capacity; the test ended while TCP was still ramping up (a longer run shows the rate).",
        (
            f"{cur.mode} moved {_fmt(cur.throughput_mbps)} in {cur.seconds:.1f} s of "
            f"{_fmt(cap)} capacity",
            f"receive- and send-window limited less than {CHRONO_SHARE:.0%} of the time",
        ),
    )
