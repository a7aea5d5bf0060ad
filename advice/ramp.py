"""Whether a transfer's rate was still climbing when it ended: slow start or a window
still opening. A rate still rising is no plateau, neither the path's nor a policer's."""

from __future__ import annotations

from collections.abc import Sequence

from tcpwizard.measure.engine.rates import drain_end
from tcpwizard.measure.engine.rates import sample_rates as window_rates
from tcpwizard.measure.model import ModeResult


def climbing(rates: Sequence[float]) -> bool:
    """The last quarter's median well above the third quarter's. Medians, not means: after
    a loss the receiver gets nothing for a round trip, then the held data at once (a
    sample of three times the path's rate), and one such burst must not read as growth."""
    q = len(rates) // 4
    third, last = sorted(rates[2 * q : 3 * q]), sorted(rates[3 * q :])
    return last[len(last) // 2] > 1.15 * third[len(third) // 2]


def still_ramping(m: ModeResult) -> bool:
    """The rate was still climbing when the test ended (slow start or a window still
    opening): in the goodput, and in what the sender's TCP_INFO says the network delivered
    where the samples carry it (smooth through loss recoveries). Up to the end of the
    sender's drain (measure/engine/rates.py drain_end), as the settled rate is read: a
    collapse after the writer stopped is no part of the ramp, and in the last quarter it
    hid one (BBR climbing 110 to 202 Mbit/s over 8 round trips at 1.9 % random loss, then
    48, 25, 0 in its drain: "not climbing", and its 167 Mbit/s read as a policer's rate on
    a 4 Gbit/s line, scenario matrix 20261228.87)."""
    end = drain_end(m.samples, m.write_s)
    samples = [s for s in m.samples if end is None or s.t_s <= end]
    rates = [r for _, r in window_rates(samples)]
    if len(rates) // 4 < 2:
        return True  # too short to tell: give the ramp the benefit of the doubt
    delivered = [s.tcp_info.delivery_rate_bps / 1e6 for s in samples if s.tcp_info]
    settled = delivered[len(delivered) // 2 :]
    if len(delivered) == len(rates) and all(settled) and not climbing(delivered):
        return False
    return climbing(rates)
