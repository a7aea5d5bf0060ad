"""Which transfers `check` runs in which direction: both ways by default (every mode up,
autotune back), exactly what was asked otherwise; `transfer` stays one-way."""

from __future__ import annotations

import pytest

from tcpwizard.checks.model import BdpTarget
from tcpwizard.cli import build_parser
from tcpwizard.measure.farends.interface import TransferOptions
from tcpwizard.measure.wire.spec import (
    DEFAULT_MODES,
    QUICK_DURATION_S,
    QUICK_MODES,
    REVERSE_MODES,
    STEADY_CAP_S,
)
from tcpwizard.run import CheckRequest, transfer_options


def test_default_check_measures_both_ways_with_autotune_back() -> None:
    opts = transfer_options(CheckRequest("dtn"), None)
    assert opts.direction == "both"
    assert opts.modes_for("up") == DEFAULT_MODES
    assert opts.modes_for("down") == REVERSE_MODES == ("autotune",)
    quick = transfer_options(CheckRequest("dtn", quick=True), None)
    assert quick.modes_for("up") == QUICK_MODES and quick.modes_for("down") == REVERSE_MODES


def test_an_explicit_direction_or_mode_list_is_taken_as_asked() -> None:
    up = transfer_options(CheckRequest("dtn", direction="up"), None)
    assert up.directions() == ("up",) and up.modes_for("up") == DEFAULT_MODES
    both = transfer_options(CheckRequest("dtn", direction="both"), None)
    assert both.modes_for("down") == DEFAULT_MODES
    drs = transfer_options(CheckRequest("dtn", modes=("drs",)), None)
    assert drs.direction == "both" and drs.modes_for("down") == ("drs",)


def test_reverse_modes_only_apply_to_the_way_back_of_both() -> None:
    down = TransferOptions(modes=("drs",), direction="down", reverse_modes=("autotune",))
    assert down.modes_for("down") == ("drs",)


def test_cli_leaves_the_direction_to_the_command() -> None:
    parser = build_parser()
    assert parser.parse_args(["check", "dtn"]).direction is None
    assert parser.parse_args(["transfer", "dtn"]).direction is None
    assert parser.parse_args(["check", "dtn", "--direction", "up"]).direction == "up"


def test_a_measured_long_path_gets_a_cap_in_round_trips() -> None:
    """The steady transfers' cap: 5 s on a short path or the default target, 18 round trips
    (5.9 s) on a measured 50 Mbit/s x 330 ms path (measure/engine/steady.py cap_s)."""
    long_path = BdpTarget(0.330, 50e6, "measured")
    assert transfer_options(CheckRequest("dtn"), long_path).duration_s == pytest.approx(5.94)
    guess = BdpTarget(0.330, 50e6, "default")
    assert transfer_options(CheckRequest("dtn"), guess).duration_s == STEADY_CAP_S
    quick = transfer_options(CheckRequest("dtn", quick=True), long_path)
    assert quick.duration_s == QUICK_DURATION_S
