"""The TUI driven with Textual's Pilot against a real `serve` on loopback: the same pipeline
as `check` (real kernel TCP, real sysctls), short transfers. Fixes are planned and applied
only against a fake sysctl tree."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import json
import os
import shutil
import threading
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any

import pytest
from rich.text import Text
from textual.pilot import Pilot
from textual.widgets import DataTable, Input, Markdown, Static, TabbedContent

from tcpwizard.context import Context
from tcpwizard.measure.probes.hops import PathOptions
from tcpwizard.measure.serve.limits import ServeLimits
from tcpwizard.measure.serve.server import Server
from tcpwizard.measure.serve.transfers import TransferService
from tcpwizard.report import Report
from tcpwizard.run import CheckRequest, EventFn, run_check
from tcpwizard.run import Event as PipelineEvent
from tcpwizard.tui import Services, TcpWizardApp
from tcpwizard.tui.screens.host import HostScreen
from tcpwizard.tui.screens.modals import ApplyScreen, HelpScreen, PathPrompt
from tcpwizard.tui.screens.path import PathScreen
from tcpwizard.tui.screens.transfer import NOT_CAPTURED, TransferScreen, goodput_points
from tcpwizard.tui.screens.verdict import VerdictScreen
from tcpwizard.tui.widgets.lists import FindingList, FixList
from tcpwizard.tui.widgets.modes import ModeRows
from tcpwizard.tui.widgets.plot import TimePlot
from tests.fakes import make_tree
from tests.serve_helpers import running_server
from tests.tui_data import SMALL_RMEM, FakePipeline, four_hops, transfer_capture

SIZE = (100, 32)


def run_async(fn: Callable[..., Coroutine[Any, Any, None]]) -> Callable[..., None]:
    """Run an async test on its own event loop (no pytest-asyncio needed)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        asyncio.run(fn(*args, **kwargs))

    return wrapper


@pytest.fixture
def serve() -> Iterator[Server]:
    with running_server(transfer=TransferService(ServeLimits())) as srv:
        yield srv


def dtn1_app(services: Services) -> TcpWizardApp:
    """The app asked to check dtn1.example (the fake pipeline's far end)."""
    return TcpWizardApp(Context(), CheckRequest("dtn1.example"), services=services)


def _quick(host: str, port: int) -> CheckRequest:
    return CheckRequest(host, port=port, quick=True, duration_s=0.5)


async def _until(pilot: Pilot[Any], cond: Callable[[], bool], timeout: float = 20.0) -> None:
    steps = int(timeout / 0.05)
    for _ in range(steps):
        if cond():
            await pilot.pause()
            return
        await pilot.pause(0.05)
    raise AssertionError("condition not met in time")


@contextlib.asynccontextmanager
async def _keys_pressed(app: TcpWizardApp, *keys: str) -> AsyncIterator[Pilot[Any]]:
    """The app running at SIZE, its pipeline's work done, then `keys` pressed (a screen's
    number, say)."""
    async with app.run_test(size=SIZE) as pilot:
        await app.workers.wait_for_complete()
        await pilot.press(*keys)
        await pilot.pause()
        yield pilot


async def _save_as(app: TcpWizardApp, pilot: Pilot[Any], out: Path) -> None:
    """Answer the open path prompt with `out`; return once the file is written."""
    prompt = app.screen
    assert isinstance(prompt, PathPrompt)
    prompt.query_one(Input).value = str(out)
    await pilot.press("enter")
    await _until(pilot, out.exists)


@run_async
async def test_host_screen_audits_this_host_before_any_host() -> None:
    app = TcpWizardApp(Context())
    async with app.run_test(size=(80, 24)) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, HostScreen)
        assert isinstance(app.focused, Input)  # no host yet: type one
        findings = screen.query_one(FindingList)
        assert findings.items, "the local audit fills the checklist"
        # Leave the input and walk the list: the detail follows the highlight.
        await pilot.press("tab", "down")
        option = findings.highlighted_option
        assert option is not None
        found = findings.finding_at(option)
        assert found is not None
        detail = screen.query_one("#detail", Markdown)
        assert found[0].observed in detail.source
        assert "no host yet" in str(screen.query_one("#status", Static).render())


@run_async
async def test_enter_host_and_follow_every_screen(serve: Server, tmp_path: Path) -> None:
    defaults = _quick("", serve.port)
    app = TcpWizardApp(Context(), defaults=defaults)
    async with app.run_test(size=SIZE) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        await pilot.press("tab", "n")  # leave the input, then come back to it with n
        assert isinstance(app.focused, Input)
        await pilot.press(*"127.0.0.1", "enter")
        assert app.state.request is not None and app.state.request.host == "127.0.0.1"
        await _until(pilot, lambda: not app.state.running)
        assert app.state.error is None, app.state.error
        report = app.state.report
        assert report is not None and report.transfer is not None
        assert isinstance(app.screen, VerdictScreen)  # followed the run to its end
        factor = str(app.screen.query_one("#factor", Static).render())
        assert report.verdict.limiting_factor in factor

        await pilot.press("1")
        host = app.screen
        assert isinstance(host, HostScreen)
        assert host.query_one(Input).value == "127.0.0.1"
        headings = [str(o.prompt) for o in host.query_one(FindingList).options if o.disabled]
        assert any(h.startswith("Peer:") and "no audit" not in h for h in headings)

        await pilot.press("2")
        path = app.screen
        assert isinstance(path, PathScreen)
        table = path.query_one("#path-table", DataTable)
        assert table.row_count >= 8
        assert "RTT min" in str(table.get_row_at(0)[0])
        assert all(path.query_one(f"#stage-{s}").has_class("done") for s in ("audit", "probe"))

        await pilot.press("3")
        xfer = app.screen
        assert isinstance(xfer, TransferScreen)
        rows = xfer.query_one(ModeRows).rows
        assert {r.mode for r in rows} == {"autotune"}  # --quick measures what apps get
        assert all(r.result is not None and goodput_points(r) for r in rows)
        for plot_id, key in (("goodput", "g"), ("buffer", "b"), ("rtt", "t")):
            await pilot.press(key)
            plot = xfer.query_one(f"#plot-{plot_id}", TimePlot)
            assert plot.series and any(s.points for s in plot.series), plot_id

        # Export the report as JSON from the verdict screen.
        await pilot.press("4", "e")
        out = tmp_path / "report.json"
        await _save_as(app, pilot, out)
        doc = json.loads(out.read_text())
        assert doc["verdict"]["limiting_factor"] == report.verdict.limiting_factor
        assert doc["target"]["port"] == serve.port


@run_async
async def test_cancel_a_running_check(serve: Server) -> None:
    """esc stops the real pipeline at its next stage. The run is held at the peer stage
    until esc was pressed, so the test does not race a fast loopback run."""
    reached, gate = threading.Event(), threading.Event()

    def held(
        req: CheckRequest, ctx: Context, on_event: EventFn | None, cancel: threading.Event | None
    ) -> Report:
        def hold_at_peer(ev: PipelineEvent) -> None:
            if on_event is not None:
                on_event(ev)
            if ev.stage == "peer" and ev.peer is not None:
                reached.set()
                gate.wait(10)

        return run_check(req, ctx, hold_at_peer, cancel)

    req = CheckRequest("127.0.0.1", port=serve.port, modes=("autotune",), duration_s=0.5)
    app = TcpWizardApp(Context(), req, services=Services(run_check=held))
    async with app.run_test(size=SIZE) as pilot:
        await _until(pilot, reached.is_set)
        assert app.state.running
        await pilot.press("escape")
        gate.set()
        await _until(pilot, lambda: not app.state.running)
        assert app.state.cancelled and app.state.report is None
        status = str(app.screen.query_one("#status", Static).render())
        assert "cancelled" in status
        # ...and it can run again to its end.
        await pilot.press("r")
        assert app.run_id == 2
        await _until(pilot, lambda: not app.state.running)
        assert app.state.report is not None and not app.state.cancelled


@run_async
async def test_unresolvable_host_is_an_error_not_a_crash() -> None:
    app = TcpWizardApp(Context(), _quick("no-such-host.invalid", 5301))
    async with app.run_test(size=SIZE) as pilot:
        await _until(pilot, lambda: not app.state.running)
        assert app.state.error is not None and "cannot resolve" in app.state.error
        assert app.is_running


@run_async
async def test_bad_host_entry_is_refused() -> None:
    app = TcpWizardApp(Context(), services=None)
    async with app.run_test(size=SIZE) as pilot:
        await app.workers.wait_for_complete()
        await pilot.press(*"host:99999", "enter")
        await pilot.pause()
        assert app.state.request is None and not app.state.running


def _fix_ctx(tmp_path: Path, is_root: bool) -> Context:
    return Context(
        sysctl_root=str(make_tree(tmp_path / "proc", SMALL_RMEM)),
        sysctl_conf_dir=str(tmp_path / "sysctl.d"),
        state_dir=str(tmp_path / "state"),
        is_root=is_root,
    )


@pytest.mark.parametrize("is_root", [True, False], ids=["root", "user"])
@run_async
async def test_apply_shows_the_diff_and_applies_only_as_root(tmp_path: Path, is_root: bool) -> None:
    ctx = _fix_ctx(tmp_path, is_root)
    fake = FakePipeline(tmp_path)
    app = TcpWizardApp(ctx, CheckRequest("dtn1.example"), services=fake.services())
    async with app.run_test(size=SIZE) as pilot:
        await app.workers.wait_for_complete()
        await pilot.press("4", "a")
        await app.workers.wait_for_complete()
        await pilot.pause()
        dialog = app.screen
        assert isinstance(dialog, ApplyScreen)
        diff = str(dialog.query_one("#diff", Static).render())
        assert "net.ipv4.tcp_rmem" in diff and "60-tcpwizard.conf" in diff
        apply_button = dialog.query_one("#apply")
        assert apply_button.disabled is (not is_root)
        if not is_root:
            assert "needs root" in str(dialog.query_one("#apply-why", Static).render())
            await pilot.press("escape")
            assert isinstance(app.screen, VerdictScreen)
            return
        await pilot.click("#apply")
        await app.workers.wait_for_complete()
        await pilot.pause()
    live = (tmp_path / "proc/net/ipv4/tcp_rmem").read_text().split()
    assert int(live[-1]) >= 1_250_000, "the fake tree got the tuned value"
    assert (tmp_path / "sysctl.d/60-tcpwizard.conf").exists()


@run_async
async def test_copy_and_save_fixes(tmp_path: Path) -> None:
    fake = FakePipeline(tmp_path)
    app = dtn1_app(fake.services())
    copied: list[str] = []

    def copy_to_clipboard(text: str) -> None:
        copied.append(text)

    app.copy_to_clipboard = copy_to_clipboard  # type: ignore[method-assign]
    async with app.run_test(size=SIZE) as pilot:
        await app.workers.wait_for_complete()
        await pilot.press("4")
        fixes = app.screen.query_one(FixList)
        await pilot.press("c")
        assert copied == [fixes.fixes[0].command]
        await pilot.press("s")
        out = tmp_path / "fixes.sh"
        await _save_as(app, pilot, out)
    script = out.read_text()
    assert script.startswith("#!/bin/sh") and fixes.fixes[0].command in script


@run_async
async def test_help_screen_opens_and_closes(tmp_path: Path) -> None:
    app = TcpWizardApp(Context(), services=FakePipeline(tmp_path).services())
    async with app.run_test(size=(80, 24)) as pilot:
        await app.workers.wait_for_complete()
        await pilot.press("tab", "question_mark")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        assert isinstance(app.screen, HostScreen)


@run_async
async def test_mouse_selects_a_finding(tmp_path: Path) -> None:
    app = dtn1_app(FakePipeline(tmp_path).services())
    async with app.run_test(size=SIZE) as pilot:
        await app.workers.wait_for_complete()
        await pilot.press("1")
        screen = app.screen
        findings = screen.query_one(FindingList)
        await pilot.click(FindingList, offset=(5, 3))
        await pilot.pause()
        option = findings.highlighted_option
        assert option is not None
        found = findings.finding_at(option)
        assert found is not None
        assert found[0].observed in screen.query_one("#detail", Markdown).source


@run_async
async def test_light_theme_rebuilds_the_coloured_rows(tmp_path: Path) -> None:
    fake = FakePipeline(tmp_path)
    app = dtn1_app(fake.services())
    async with app.run_test(size=SIZE) as pilot:
        await app.workers.wait_for_complete()
        await pilot.press("1")
        findings = app.screen.query_one(FindingList)

        def badge_styles() -> list[object]:
            prompts = [o.prompt for o in findings.options if isinstance(o.prompt, Text)]
            return [p.spans[0].style for p in prompts if p.spans]

        dark = badge_styles()
        await pilot.press("ctrl+t")
        await pilot.pause()
        assert app.theme == "textual-light"
        light = badge_styles()
        assert dark and len(light) == len(dark) and light != dark  # same rows, new colours


@run_async
async def test_a_prediction_reads_as_one_and_names_the_far_end(tmp_path: Path) -> None:
    from tests.test_golden_formats import predicted

    fake = FakePipeline(tmp_path)
    fake.report = dataclasses.replace(predicted(tmp_path), transfer=fake.report.transfer)
    app = dtn1_app(fake.services())
    async with _keys_pressed(app, "4"):
        screen = app.screen
        assert isinstance(screen, VerdictScreen)
        factor = str(screen.query_one("#factor", Static).render())
        meta = str(screen.query_one("#verdict-meta", Static).render())
        evidence = str(screen.query_one("#evidence", Static).render())
    assert factor == "Predicted Limiting factor: window-scaling"
    assert "far end: TCP port 22" in meta
    assert "handshake: TCP window scaling off" in evidence


def _hop_cells(screen: PathScreen) -> list[list[str]]:
    table = screen.query_one("#hops-table", DataTable)
    return [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]


@pytest.mark.parametrize("blackhole", [False, True], ids=["mtu", "blackhole"])
@run_async
async def test_path_screen_shows_the_hops(tmp_path: Path, blackhole: bool) -> None:
    fake = FakePipeline(tmp_path, hops=four_hops(blackhole))
    req = CheckRequest("dtn1.example", hops=PathOptions())
    app = TcpWizardApp(Context(), req, services=fake.services())
    async with _keys_pressed(app, "2") as pilot:
        screen = app.screen
        assert isinstance(screen, PathScreen)
        assert screen.query_one("#hops-table").display
        title = str(screen.query_one("#hops-title", Static).render())
        assert title.startswith("Hops to dtn1.example (198.51.100.7), icmp")
        rows = _hop_cells(screen)
        assert [r[0] for r in rows] == ["1", "2", "3", "4"]
        assert rows[0][-1] == "rate limited (ICMP)"
        assert rows[1][1] == "wan-core.example.net\n203.0.113.9" and rows[1][5] == "→1500"
        assert rows[1][-1].startswith("RTT jump +47.7 ms")
        assert ("PMTU black hole" in rows[1][-1]) is blackhole
        assert rows[2][-1] == "loss begins"
        mtu = str(screen.query_one("#hops-mtu", Static).render())
        assert mtu.startswith("Path MTU 1500 B (this host's interface 9000 B)")
        # The hops' findings bring their fixes to the verdict screen, as in `check --hops`.
        await pilot.press("4")
        commands = [f.command for f in app.screen.query_one(FixList).fixes]
        assert ("sysctl -w net.ipv4.tcp_mtu_probing=1" in commands) is blackhole


@run_async
async def test_path_screen_without_hops_says_how_to_get_them(tmp_path: Path) -> None:
    app = dtn1_app(FakePipeline(tmp_path).services())
    async with _keys_pressed(app, "2"):
        screen = app.screen
        assert not screen.query_one("#hops-table").display
        hint = str(screen.query_one("#hops-title", Static).render())
        assert hint == "Hops: not probed (start with `tcpwizard tui HOST --hops` to see them)"


def _sequence(screen: TransferScreen) -> TimePlot:
    return screen.query_one("#plot-sequence", TimePlot)


@run_async
async def test_sequence_graph_of_each_transfer(tmp_path: Path) -> None:
    fake = FakePipeline(tmp_path, capture=transfer_capture())
    req = CheckRequest("dtn1.example", capture=True)
    app = TcpWizardApp(Context(), req, services=fake.services())
    async with _keys_pressed(app, "3", "s") as pilot:
        screen = app.screen
        assert isinstance(screen, TransferScreen)
        assert screen.query_one(TabbedContent).active == "sequence"
        plot = _sequence(screen)
        assert plot.title == "untuned up 1/3"
        assert [(s.name, s.marks) for s in plot.series] == [
            ("window edge", False),
            ("acked", False),
            ("sent", False),
            ("retransmitted", True),
        ]
        assert all(s.points for s in plot.series)
        assert "×" in str(plot.render())  # the retransmission's mark
        untuned_sent = plot.series[2].points
        await pilot.press("s")  # again: the next transfer
        assert plot.title == "autotune up 2/3"
        assert plot.series[2].points != untuned_sent and not plot.series[3].points
        await pilot.press("s")
        assert plot.title == "drs up 3/3" and not plot.series
        assert plot.empty_text == "no sequence data for drs up: none of its packets were captured"
        await pilot.press("s")
        assert plot.title == "untuned up 1/3"
        await pilot.press("g", "s")  # from another tab: back to the same transfer
        assert screen.query_one(TabbedContent).active == "sequence"
        assert plot.title == "untuned up 1/3"


@run_async
async def test_sequence_graph_without_a_capture_says_how(tmp_path: Path) -> None:
    app = dtn1_app(FakePipeline(tmp_path).services())
    async with _keys_pressed(app, "3", "s"):
        screen = app.screen
        assert isinstance(screen, TransferScreen)
        plot = _sequence(screen)
        assert not plot.series and plot.empty_text == NOT_CAPTURED
        assert NOT_CAPTURED in str(plot.render())


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("tcpdump") is None, reason="tcpdump as root")
@run_async
async def test_hops_and_capture_over_loopback(serve: Server) -> None:
    """`tui --hops --capture` against a real serve: the hop table of the loopback path and
    the time-sequence graph of each transfer, both ways, from a real tcpdump capture."""
    req = dataclasses.replace(
        _quick("127.0.0.1", serve.port), hops=PathOptions(count=3, settle=False), capture=True
    )
    app = TcpWizardApp(Context(), req)
    async with app.run_test(size=SIZE) as pilot:
        await _until(pilot, lambda: not app.state.running, timeout=60)
        report = app.state.report
        assert report is not None and report.hops is not None, app.state.error
        assert report.capture is not None and report.capture.error is None
        await pilot.press("2")
        await pilot.pause()
        path = app.screen
        assert isinstance(path, PathScreen)
        rows = _hop_cells(path)
        assert rows and rows[-1][0] == "1" and "127.0.0.1" in rows[-1][1]
        await pilot.press("3", "s")
        await pilot.pause()
        xfer = app.screen
        assert isinstance(xfer, TransferScreen)
        plot = _sequence(xfer)
        for label in ("autotune up", "autotune down"):
            assert plot.title.startswith(label), plot.title
            sent = next(s for s in plot.series if s.name == "sent")
            acked = next(s for s in plot.series if s.name == "acked")
            assert len(sent.points) > 10 and acked.points[-1][1] > 1_000_000, label
            await pilot.press("s")
