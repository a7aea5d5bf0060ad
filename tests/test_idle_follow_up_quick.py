"""`--quick` sends the idle follow-up only when it is short (advice/idle_follow_up.py
fits_quick): a BBR plateau through a bucket decided by a few dozen probes is still named
in a quick check; a follow-up of hundreds is left open with a note (wizard/run.py
follow_up)."""

from __future__ import annotations

import dataclasses

from tcpwizard.advice import idle_follow_up
from tcpwizard.measure.model import ModeResult, TransferResult
from tcpwizard.run import CheckRequest, follow_up
from tests.model_builders import path
from tests.test_policer_bloat_rules import policed

QUICK, FULL = CheckRequest("198.51.100.7", quick=True), CheckRequest("198.51.100.7")


def _policed() -> TransferResult:
    t = policed().transfer  # BBR at a fifth of the line, 17 % of its segments lost
    assert t is not None
    return t


def _lightly_lossy() -> TransferResult:
    """The same plateau with a tenth of the retransmissions: hundreds of probes to decide."""
    t = _policed()

    def lighter(m: ModeResult) -> ModeResult:
        samples = tuple(
            dataclasses.replace(
                s,
                tcp_info=dataclasses.replace(
                    s.tcp_info, total_retrans=s.tcp_info.total_retrans // 10
                ),
            )
            if s.tcp_info
            else s
            for s in m.samples
        )
        return dataclasses.replace(m, samples=samples, retransmits=m.retransmits // 10)

    return dataclasses.replace(t, modes=tuple(lighter(m) for m in t.modes))


def test_the_quick_bound_is_the_full_rtt_probe_s_length() -> None:
    assert idle_follow_up.fits_quick(50) and not idle_follow_up.fits_quick(51)


def test_a_short_follow_up_is_sent_in_quick_too() -> None:
    count, why = idle_follow_up.wanted(path(40.0, 100), _policed())
    assert 0 < count <= 50
    assert follow_up(QUICK, path(40.0, 100), _policed()) == (count, why)


def test_a_long_follow_up_is_left_open_in_quick_only() -> None:
    light = _lightly_lossy()
    count, why = idle_follow_up.wanted(path(40.0, 100), light)
    assert count > 50, count
    sent, note = follow_up(QUICK, path(40.0, 100), light)
    assert sent == 0 and "--quick leaves it open" in note
    assert follow_up(FULL, path(40.0, 100), light) == (count, why)
