"""A tuned mode is left out only where autotuning already held the line a sure probe
measured (measure/engine/line_filled.py), and the check asks for that only then."""

from __future__ import annotations

from dataclasses import replace

from tcpwizard.measure.engine.line_filled import GAP_STEP, TunedSkip
from tcpwizard.measure.engine.rates import ip_rate
from tcpwizard.measure.model import CapacityEstimate, ModeResult
from tcpwizard.run import sure_capacity
from tests.model_builders import far_path, peer_path, samples


def _autotune(mbps: float, direction: str = "up") -> ModeResult:
    return ModeResult(
        "autotune", "up" if direction == "up" else "down", 1, 10_000_000, 2.0, mbps,
        4_000_000, 0, samples([mbps] * 20),
    )  # fmt: skip


def test_a_direction_autotuning_filled_runs_no_tuned_mode() -> None:
    held = ip_rate(95.0, 1448)  # 98.4 Mbit/s at the IP layer
    skip = TunedSkip(held * GAP_STEP)  # the line exactly one gap step above it
    assert not skip.skip("drs", "up")  # nothing seen yet
    skip.saw(_autotune(95.0))
    assert skip.skip("drs", "up") and skip.skip("static", "up")
    assert not skip.skip("untuned", "up")  # what applications get is still measured
    assert not skip.skip("drs", "down")  # the other way has its own autotune transfer
    assert len(skip.left_out) == 2 and "drs not run" in skip.left_out[0]


def test_a_direction_short_of_the_line_keeps_its_tuned_witness() -> None:
    skip = TunedSkip(ip_rate(95.0, 1448) * GAP_STEP * 1.01)
    skip.saw(_autotune(95.0))
    assert not skip.skip("drs", "up") and skip.left_out == []


def test_a_failed_transfer_or_no_capacity_leaves_nothing_out() -> None:
    failed = TunedSkip(50.0)
    failed.saw(replace(_autotune(95.0), error="far end vanished"))
    assert not failed.skip("drs", "up")
    unknown = TunedSkip(None)
    unknown.saw(_autotune(95.0))
    assert not unknown.skip("drs", "up")


def test_only_a_sure_reflected_probe_decides() -> None:
    sure = CapacityEstimate(100.0, "train", 0.9)
    assert sure_capacity(peer_path(sure)) == 100.0
    assert sure_capacity(None) is None
    assert sure_capacity(far_path(sure)) is None  # peerless: SYN or ICMP pairs
    assert sure_capacity(peer_path(replace(sure, confidence=0.5))) is None
    assert sure_capacity(peer_path(replace(sure, limited_by="coalescing"))) is None
