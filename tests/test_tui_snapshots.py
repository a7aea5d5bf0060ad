"""Snapshots of every TUI screen at 80×24 and 120×40, rendered from fixed, constructed data
(tests/tui_data.py) so they are byte-for-byte deterministic. Update with
`pytest tests/test_tui_snapshots.py --snapshot-update` after an intended change, and look at
the report pytest-textual-snapshot writes before committing the new SVGs."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, cast

import pytest
from textual.pilot import Pilot

from tcpwizard.context import Context
from tcpwizard.measure.probes.hops import PathOptions
from tcpwizard.run import CheckRequest
from tcpwizard.tui import TcpWizardApp
from tests.fakes import make_tree
from tests.tui_data import SMALL_RMEM, FakePipeline, four_hops, transfer_capture

SIZES = {"80x24": (80, 24), "120x40": (120, 40)}
SCREEN_KEYS = {"host": "1", "path": "2", "transfer": "3", "verdict": "4"}
SnapCompare = Callable[..., bool]


def _ctx(tmp_path: Path, is_root: bool = False) -> Context:
    # A fake sysctl tree and a conf dir that never exists: the dry-run diff is the same on
    # every machine (and nothing real is read or written).
    return Context(
        sysctl_root=str(make_tree(tmp_path / "proc", SMALL_RMEM)),
        sysctl_conf_dir="/nonexistent/tcpwizard-test/sysctl.d",
        state_dir=str(tmp_path / "state"),
        is_root=is_root,
    )


def _app(
    tmp_path: Path,
    stop_at: str | None = None,
    is_root: bool = False,
    *,
    hops: bool = False,
    capture: bool = False,
) -> TcpWizardApp:
    """hops, capture: the run of `tui --hops`, `tui --capture` (tests/tui_data.py)."""
    fake = FakePipeline(
        tmp_path,
        stop_at,
        hops=four_hops() if hops else None,
        capture=transfer_capture() if capture else None,
    )
    req = CheckRequest("dtn1.example", hops=PathOptions() if hops else None, capture=capture)
    return TcpWizardApp(_ctx(tmp_path, is_root), req, services=fake.services())


async def _finished(pilot: Pilot[Any]) -> None:
    await pilot.app.workers.wait_for_complete()
    # The worker ends once the pipeline posted its last message; on a loaded machine the
    # app may still hold progress messages then (a snapshot caught the log mid-check).
    # Bounded: 5 s at most.
    app = cast(TcpWizardApp, pilot.app)
    for _ in range(100):
        if not app.state.running:
            break
        await pilot.pause(0.05)
    await pilot.pause()


def _then(*keys: str) -> Callable[[Pilot[Any]], Awaitable[None]]:
    async def run_before(pilot: Pilot[Any]) -> None:
        await _finished(pilot)
        for key in keys:
            await pilot.press(key)
            await pilot.pause()
        await pilot.pause()

    return run_before


@pytest.mark.parametrize("size", SIZES.values(), ids=SIZES.keys())
@pytest.mark.parametrize("screen", SCREEN_KEYS)
def test_screen(
    snap_compare: SnapCompare, tmp_path: Path, screen: str, size: tuple[int, int]
) -> None:
    assert snap_compare(_app(tmp_path), terminal_size=size, run_before=_then(SCREEN_KEYS[screen]))


def test_finding_detail_after_moving_down(snap_compare: SnapCompare, tmp_path: Path) -> None:
    assert snap_compare(_app(tmp_path), terminal_size=(80, 24), run_before=_then("1", "down"))


@pytest.mark.parametrize("plot", ["b", "t", "s"])
def test_transfer_plots(snap_compare: SnapCompare, tmp_path: Path, plot: str) -> None:
    assert snap_compare(_app(tmp_path), terminal_size=(100, 30), run_before=_then("3", plot))


@pytest.mark.parametrize("size", SIZES.values(), ids=SIZES.keys())
def test_path_with_hops(snap_compare: SnapCompare, tmp_path: Path, size: tuple[int, int]) -> None:
    """Four hops: ICMP rate limited at 1, the RTT jump and the MTU drop at 2, loss from 3."""
    assert snap_compare(_app(tmp_path, hops=True), terminal_size=size, run_before=_then("2"))


@pytest.mark.parametrize("keys", [("s",), ("s", "s")], ids=["pressed", "slow-start"])
def test_sequence_graph(snap_compare: SnapCompare, tmp_path: Path, keys: tuple[str, ...]) -> None:
    """The untuned transfer pressed against its 64 KB window; s again: autotune's."""
    assert snap_compare(
        _app(tmp_path, capture=True), terminal_size=(100, 30), run_before=_then("3", *keys)
    )


@pytest.mark.parametrize("size", SIZES.values(), ids=SIZES.keys())
def test_help(snap_compare: SnapCompare, tmp_path: Path, size: tuple[int, int]) -> None:
    assert snap_compare(_app(tmp_path), terminal_size=size, run_before=_then("question_mark"))


def test_apply_dialog_not_root(snap_compare: SnapCompare, tmp_path: Path) -> None:
    async def run_before(pilot: Pilot[Any]) -> None:
        await _finished(pilot)
        await pilot.press("4", "a")
        await _finished(pilot)  # the plan is made in a worker, then the modal opens

    assert snap_compare(_app(tmp_path), terminal_size=(100, 30), run_before=run_before)


def test_transfer_while_running(snap_compare: SnapCompare, tmp_path: Path) -> None:
    """A run held in the middle of the autotune transfer: live rows and a partial plot."""

    async def run_before(pilot: Pilot[Any]) -> None:
        app = pilot.app
        assert isinstance(app, TcpWizardApp)
        for _ in range(200):
            series = app.state.series.get(("autotune", "up"))
            if series is not None and series.samples and series.samples[-1].t_s >= 3:
                break
            await pilot.pause(0.02)
        await pilot.pause()

    # Leaving the app cancels the held run (TcpWizardApp.on_unmount).
    assert snap_compare(
        _app(tmp_path, stop_at="transfer"), terminal_size=(80, 24), run_before=run_before
    )


@pytest.mark.parametrize("screen", ["host", "verdict"])
def test_light_theme(snap_compare: SnapCompare, tmp_path: Path, screen: str) -> None:
    """ctrl+t switches to the light theme; the rows built with dark colours are rebuilt."""
    assert snap_compare(
        _app(tmp_path), terminal_size=(80, 24), run_before=_then(SCREEN_KEYS[screen], "ctrl+t")
    )
