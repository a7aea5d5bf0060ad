"""The TUI's connections screen (key 5): snapshots at 80×24 and 120×40 from fixed,
constructed connections (tests/conns_data.py), and Pilot tests of its behaviour — live
refreshes keep the cursor, the detail pane follows it, `f` asks for busy connections only.
Update the SVGs with `pytest tests/test_tui_conns.py --snapshot-update` after an intended
change."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import DataTable, Static

from tcpwizard.conns_report import ConnFilter, ConnsReport
from tcpwizard.context import Context
from tcpwizard.run import CheckRequest
from tcpwizard.tui import TcpWizardApp
from tcpwizard.tui.screens.conns import ConnsScreen
from tests.conns_data import report
from tests.fakes import make_tree
from tests.test_tui_pilot import run_async
from tests.tui_data import SMALL_RMEM, FakePipeline

SIZES = {"80x24": (80, 24), "120x40": (120, 40)}
SnapCompare = Callable[..., bool]


class FakeConns:
    """Returns the constructed report at once, and records the filters it was asked for."""

    def __init__(self) -> None:
        self.filters: list[ConnFilter] = []
        self.lock = threading.Lock()

    def __call__(self, flt: ConnFilter, _ctx: Context) -> ConnsReport:
        with self.lock:
            self.filters.append(flt)
        rep = report()
        if flt.busy_only:
            rep = dataclasses.replace(rep, entries=rep.busy)
        return rep


def _app(tmp_path: Path, fake: FakeConns) -> TcpWizardApp:
    ctx = Context(sysctl_root=str(make_tree(tmp_path / "proc", SMALL_RMEM)))
    services = dataclasses.replace(FakePipeline(tmp_path).services(), conns=fake)
    return TcpWizardApp(ctx, CheckRequest("dtn1.example"), services=services)


async def _conns_shown(pilot: Pilot[Any]) -> None:
    await pilot.app.workers.wait_for_complete()  # the (fake) check, first
    await pilot.pause()
    await pilot.press("5")
    for _ in range(100):
        await pilot.pause(0.02)
        screen = pilot.app.screen
        if isinstance(screen, ConnsScreen) and screen.report is not None:
            break
    await pilot.pause()


@pytest.mark.parametrize("size", SIZES.values(), ids=SIZES.keys())
def test_snapshot(snap_compare: SnapCompare, tmp_path: Path, size: tuple[int, int]) -> None:
    assert snap_compare(_app(tmp_path, FakeConns()), terminal_size=size, run_before=_conns_shown)


@run_async
async def test_refreshes_keep_the_cursor_and_the_detail_follows(tmp_path: Path) -> None:
    fake = FakeConns()
    app = _app(tmp_path, fake)
    async with app.run_test(size=(120, 40)) as pilot:
        await _conns_shown(pilot)
        screen = app.screen
        assert isinstance(screen, ConnsScreen)
        table = screen.query_one(DataTable)
        assert table.row_count == 3
        detail = screen.query_one("#conns-detail", Static)
        assert "receiver-window — fix the far end" in str(detail.render())
        table.focus()
        await pilot.press("down")
        await pilot.pause()
        assert "rsync (pid 5151, bob)" in str(detail.render())
        asked = len(fake.filters)
        for _ in range(100):  # the worker observes again and again while shown
            await pilot.pause(0.05)
            if len(fake.filters) >= asked + 2:
                break
        assert len(fake.filters) >= asked + 2
        assert table.cursor_row == 1 and "application" in str(detail.render())
        await pilot.press("f")
        for _ in range(100):
            await pilot.pause(0.05)
            if fake.filters[-1].busy_only and table.row_count == 2:
                break
        assert fake.filters[-1].busy_only and table.row_count == 2
        await pilot.press("1")  # leaving the screen stops the observation
        await pilot.pause(0.5)
        stopped = len(fake.filters)
        await pilot.pause(0.6)
        assert len(fake.filters) <= stopped + 1
