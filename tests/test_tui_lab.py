"""The TUI over the emulated WAN (root): serve runs in lab host b, the app's pipeline in
host a (its worker thread enters a's network namespace; the threads the pipeline starts
inherit it). The path must look like the lab's: 50 ms, 100 Mbit/s."""

from __future__ import annotations

import asyncio
import socket
import sys
import threading
import time

import pytest

from tcpwizard.context import Context
from tcpwizard.lab import Lab
from tcpwizard.lab.tun import in_netns
from tcpwizard.report import Report
from tcpwizard.run import CheckRequest, EventFn, run_check
from tcpwizard.tui import Services, TcpWizardApp
from tcpwizard.tui.screens.transfer import TransferScreen, rtt_points
from tcpwizard.tui.widgets.plot import TimePlot

PORT = 5301
TCPWIZARD = [sys.executable, "-m", "tcpwizard"]


def _wait_listening(lab: Lab, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with in_netns(lab.ns_a), socket.socket() as s:
            s.settimeout(0.5)
            if s.connect_ex((lab.addr_b, PORT)) == 0:
                return
        time.sleep(0.1)
    raise AssertionError("serve did not start in lab host b")


@pytest.mark.lab
def test_tui_over_the_lab(lab: Lab) -> None:
    lab.popen("b", [*TCPWIZARD, "serve", "--bind", lab.addr_b, "--port", str(PORT)])
    _wait_listening(lab)

    def in_host_a(
        req: CheckRequest, ctx: Context, on_event: EventFn | None, cancel: threading.Event | None
    ) -> Report:
        with in_netns(lab.ns_a):
            return run_check(req, ctx, on_event, cancel)

    req = CheckRequest(lab.addr_b, port=PORT, quick=True, duration_s=1.0)
    app = TcpWizardApp(Context(), req, services=Services(run_check=in_host_a))

    async def drive() -> None:
        async with app.run_test(size=(100, 32)) as pilot:
            for _ in range(600):
                if not app.state.running:
                    break
                await pilot.pause(0.05)
            assert app.state.error is None, app.state.error
            await pilot.press("3", "t")
            screen = app.screen
            assert isinstance(screen, TransferScreen)
            plot = screen.query_one("#plot-rtt", TimePlot)
            assert any(s.points for s in plot.series)
            rtts = [v for s in app.state.series.values() for _, v in rtt_points(s)]
            assert rtts and min(rtts) >= 45  # the RTT plot shows the lab's 50 ms

    asyncio.run(drive())
    report = app.state.report
    assert report is not None and report.path is not None and report.transfer is not None
    assert 48 <= report.path.rtt.min <= 60
    assert report.path.capacity is not None
    assert 70 <= report.path.capacity.mbps <= 115
    # One-second transfers at 50 ms are mostly slow start, and the delay line shares two
    # cores with everything else: ask only that data moved and one mode got going.
    rates = [m.throughput_mbps for m in report.transfer.modes]
    assert all(m.error is None for m in report.transfer.modes), rates
    assert max(rates) > 20, rates
