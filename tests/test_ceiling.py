"""A rate ceiling (advice/ceiling.py): a loss-based sender's sawtooth that keeps returning
to the same flat top is a full path, not a window held down by loss, even when the probe
could not send as fast as the path carries."""

from __future__ import annotations

import dataclasses

from tcpwizard.advice.ceiling import ceiling_mbps
from tcpwizard.advice.diagnose import Evidence, diagnose
from tcpwizard.measure.model import CapacityEstimate, TransferResult
from tests.model_builders import path
from tests.test_policer_bloat_rules import audit, transfer

# Reno at 639 Mbit/s x 5.4 ms through a 0.58-BDP queue (lab, scenario matrix): slow start,
# then a sawtooth whose top sits at the line's goodput, 617 Mbit/s, for a second at a time.
SAWTOOTH = [423.0, 573.0, 597.0, 491.0, 372.0, 393.0, 409.0, 438.0, 475.0, 490.0, 518.0,
            556.0, 571.0, 603.0, 616.0, 617.0, 617.0, 616.0, 617.0, 617.0, 617.0, 617.0,
            572.0, 453.0, 467.0, 501.0, 513.0, 538.0, 566.0, 598.0]  # fmt: skip
LOSSES = [0, 30, 60, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
          40, 30, 0, 0, 0, 0, 0, 0]  # fmt: skip


def test_a_flat_top_held_for_round_trips_is_a_ceiling() -> None:
    t = transfer(SAWTOOTH, [5.5] * len(SAWTOOTH), LOSSES, "reno")
    assert ceiling_mbps(t.modes[0], 5.4) == 617.0
    # On a 1.5 s path the same run (2.25 s of samples) spans less than two round trips.
    assert ceiling_mbps(t.modes[0], 1500.0) is None
    # A sawtooth with no top held: random loss cuts the window before any ceiling.
    spiky = [300.0, 450.0, 600.0, 420.0, 500.0, 617.0, 410.0, 520.0, 610.0, 400.0]
    t = transfer(spiky, [5.5] * len(spiky), [0, 10, 0, 10, 0, 10, 0, 10, 0, 10], "reno")
    assert ceiling_mbps(t.modes[0], 5.4) is None


def test_a_full_paths_sawtooth_past_a_sender_limited_probe_is_path_capacity() -> None:
    """The probe could send only 450 Mbit/s (a lower bound: "the path is at least this
    fast"); Reno then filled the 639 Mbit/s line, losing at each sawtooth top. That is the
    path's rate, not loss holding the window down (`congestion` at this host, before)."""
    t = transfer(SAWTOOTH, [5.5] * len(SAWTOOTH), LOSSES, "reno")
    ev = Evidence(audit("reno"), audit("reno"), path(5.4, 450.0), t)
    assert ev.path is not None
    weak = CapacityEstimate(450.0, "train", 0.4, limited_by="sender")
    ev = dataclasses.replace(ev, path=dataclasses.replace(ev.path, capacity=weak))
    v = diagnose(ev).verdict
    assert v.limiting_factor == "path-capacity", v
    # The same losses without the ceiling (a spiky sawtooth) are not called healthy.
    spiky = [x if i % 3 else 0.6 * x for i, x in enumerate(SAWTOOTH)]
    t2 = TransferResult((transfer(spiky, [5.5] * len(spiky), LOSSES, "reno").modes[0],))
    assert diagnose(dataclasses.replace(ev, transfer=t2)).verdict.limiting_factor != (
        "path-capacity"
    )


def test_a_flat_top_at_the_probed_line_with_its_own_sawtooths_loss_is_path_capacity() -> None:
    """Reno alone on an 89.5 Mbit/s x 2.4 ms path (scenario matrix 20261127.35): flat at
    the line's goodput all along, 0.19 % lost, which puts the loss bound at 66 Mbit/s with
    the RTT the flow ran at. A flow that fills a drop-tail bottleneck sees the loss its rate
    implies: the flat top says the path, not loss, set the rate (`congestion` before)."""
    n = 30
    goodputs = [82.0] + [86.4] * (n - 1)
    losses = [0, 4] + [2, 1] * ((n - 2) // 2)
    t = transfer(goodputs, [4.9] * n, losses, "reno")
    ev = Evidence(audit("reno"), audit("reno"), path(2.5, 89.5), t)
    v = diagnose(ev).verdict
    assert v.limiting_factor == "path-capacity", v
    # The same mean rate without a top held (loss cutting the window) is not healthy.
    spiky = [70.0, 95.0, 80.0, 100.0, 75.0, 98.0] * 5
    t2 = transfer(spiky, [4.9] * n, losses, "reno")
    assert ceiling_mbps(t2.modes[0], 2.5) is None
    assert diagnose(dataclasses.replace(ev, transfer=t2)).verdict.limiting_factor != (
        "path-capacity"
    )
