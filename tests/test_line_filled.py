"""A tuned mode is left out only where autotuning already held the line a sure probe
measured that way (measure/engine/line_filled.py), and the check asks for that only then."""

from __future__ import annotations

from dataclasses import replace

from tcpwizard.measure.engine.line_filled import GAP_STEP, TunedSkip
from tcpwizard.measure.engine.rates import ip_rate
from tcpwizard.measure.model import CapacityEstimate, Direction, ModeResult
from tcpwizard.run import sure_lines
from tests.model_builders import far_path, peer_path, samples


def _autotune(mbps: float, direction: Direction = "up") -> ModeResult:
    return ModeResult(
        "autotune", direction, 1, 10_000_000, 2.0, mbps, 4_000_000, 0, samples([mbps] * 20)
    )


def test_a_direction_autotuning_filled_runs_no_tuned_mode() -> None:
    held = ip_rate(95.0, 1448)  # 98.4 Mbit/s at the IP layer
    line = held * GAP_STEP  # the line exactly one gap step above it
    skip = TunedSkip((("up", line), ("down", line)))
    assert not skip.skip("drs", "up")  # nothing seen yet
    skip.saw(_autotune(95.0))
    assert skip.skip("drs", "up") and skip.skip("static", "up")
    assert not skip.skip("untuned", "up")  # what applications get is still measured
    assert not skip.skip("drs", "down")  # the other way has its own autotune transfer
    assert len(skip.left_out) == 2 and "drs not run" in skip.left_out[0]


def test_a_direction_short_of_the_line_keeps_its_tuned_witness() -> None:
    skip = TunedSkip((("up", ip_rate(95.0, 1448) * GAP_STEP * 1.01),))
    skip.saw(_autotune(95.0))
    assert not skip.skip("drs", "up") and skip.left_out == []


def test_each_way_is_judged_against_its_own_line() -> None:
    """An asymmetric path: 100 Mbit/s up, 1 Gbit/s down. A download held at 95 Mbit/s (a
    window) filled the up line, not its own: its DRS still runs."""
    skip = TunedSkip((("up", 100.0), ("down", 1000.0)))
    skip.saw(_autotune(95.0, "down"))
    assert not skip.skip("drs", "down")


def test_a_failed_transfer_or_no_line_leaves_nothing_out() -> None:
    failed = TunedSkip((("up", 50.0),))
    failed.saw(replace(_autotune(95.0), error="far end vanished"))
    assert not failed.skip("drs", "up")
    unknown = TunedSkip(())
    unknown.saw(_autotune(95.0))
    assert not unknown.skip("drs", "up")


def test_only_a_sure_reflected_probe_decides() -> None:
    sure = CapacityEstimate(100.0, "train", 0.9)
    assert sure_lines(peer_path(sure)) == (("up", 100.0),)
    down = CapacityEstimate(1000.0, "mini-trains (down)", 0.9)
    assert sure_lines(peer_path(sure, down)) == (("up", 100.0), ("down", 1000.0))
    assert sure_lines(peer_path(sure, replace(down, confidence=0.6))) == (("up", 100.0),)
    assert sure_lines(None) == ()
    assert sure_lines(far_path(sure)) == ()  # peerless: SYN or ICMP pairs
    assert sure_lines(peer_path(replace(sure, confidence=0.5))) == ()
    assert sure_lines(peer_path(replace(sure, limited_by="coalescing"))) == ()


def test_pairs_stretched_below_the_train_leave_the_line_known() -> None:
    """Pairs slower than an unflagged train were stretched after the bottleneck: the train
    stands as the line a transfer must reach. Pairs faster than it could show the train
    low (others' traffic, a bucket), and a flagged train decides nothing either way."""
    stretched = CapacityEstimate(100.0, "train", 0.5, pairs_mbps=53.0, train_mbps=100.0)
    assert sure_lines(peer_path(stretched)) == (("up", 100.0),)
    faster = replace(stretched, pairs_mbps=140.0)
    assert sure_lines(peer_path(faster)) == ()
    assert sure_lines(peer_path(replace(stretched, limited_by="sender"))) == ()
    assert sure_lines(peer_path(replace(stretched, pairs_mbps=None))) == ()
