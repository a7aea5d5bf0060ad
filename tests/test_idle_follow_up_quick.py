"""`--quick` sends the idle follow-up only when it is short (advice/idle_follow_up.py
fits_quick): a BBR plateau through a bucket decided by a few dozen probes is still named
in a quick check; a follow-up of hundreds is left open with a note."""

from __future__ import annotations

import dataclasses
import io

from tcpwizard.advice import idle_follow_up
from tcpwizard.context import Context
from tcpwizard.measure.model import IdleLoss
from tcpwizard.run import CheckRequest, _Run, _stage_idle_loss
from tests.model_builders import path
from tests.test_policer_bloat_rules import policed


class EchoFar:
    """A far end whose idle probes all come back (a bucket passes them), counting them."""

    def __init__(self) -> None:
        self.sent: list[int] = []

    def idle_echo(self, count: int) -> IdleLoss:
        self.sent.append(count)
        return IdleLoss(count, 0, "udp-echo")


def _run(quick: bool) -> tuple[_Run, EchoFar]:
    ev = policed()  # BBR at a fifth of the line, 17 % of its segments lost
    far = EchoFar()
    run = _Run(
        CheckRequest("198.51.100.7", quick=quick),
        Context(stdout=io.StringIO(), stderr=io.StringIO()),
        "198.51.100.7",
        far,  # type: ignore[arg-type]
        [],
        path=path(40.0, 100),
        transfer=ev.transfer,
    )
    return run, far


def test_the_quick_bound_is_the_full_rtt_probe_s_length() -> None:
    assert idle_follow_up.fits_quick(50) and not idle_follow_up.fits_quick(51)


def test_a_short_follow_up_is_sent_in_quick_too() -> None:
    run, far = _run(quick=True)
    count, _why = idle_follow_up.wanted(run.path, run.transfer)
    assert 0 < count <= 50
    _stage_idle_loss(run, lambda *a, **k: None)
    assert far.sent == [count]
    assert run.path is not None and run.path.idle_loss == IdleLoss(count, 0, "udp-echo")


def test_a_long_follow_up_is_left_open_in_quick_only() -> None:
    run, far = _run(quick=True)
    assert run.transfer is not None
    # Losses light enough that hundreds of probes are needed (a tenth of the retransmits).
    light = dataclasses.replace(
        run.transfer,
        modes=tuple(
            dataclasses.replace(
                m,
                samples=tuple(
                    dataclasses.replace(
                        s,
                        tcp_info=dataclasses.replace(
                            s.tcp_info, total_retrans=s.tcp_info.total_retrans // 10
                        )
                        if s.tcp_info
                        else None,
                    )
                    for s in m.samples
                ),
                retransmits=m.retransmits // 10,
            )
            for m in run.transfer.modes
        ),
    )
    run.transfer = light
    count, _why = idle_follow_up.wanted(run.path, light)
    assert count > 50, count
    _stage_idle_loss(run, lambda *a, **k: None)
    assert far.sent == [] and any("--quick leaves it open" in n for n in run.notes)
    full, far_full = _run(quick=False)
    full.transfer = light
    _stage_idle_loss(full, lambda *a, **k: None)
    assert far_full.sent == [count]
