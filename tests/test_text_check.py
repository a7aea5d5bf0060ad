"""The `check HOST` text report puts the verdict, the gap and the right host's fix first."""

from __future__ import annotations

import io

from tcpwizard.advice.model import Verdict, WizardGap
from tcpwizard.advice.snippets import setsockopt_fix
from tcpwizard.checks.model import Fix, HostAudit
from tcpwizard.exitcodes import ExitCode
from tcpwizard.measure.model import (
    CapacityEstimate,
    ModeResult,
    PathEstimate,
    RttStats,
    TransferResult,
)
from tcpwizard.output.text import render
from tcpwizard.report import Report, TargetInfo


def test_check_report_order_and_content() -> None:
    audit = HostAudit("near", "6.18", (), "bbr")
    rtt = RttStats(50.1, 50.2, 50.4, 50.2, 0.1, 51.0, 0.0, 0.05, 20, "udp-echo")
    path = PathEstimate(rtt, CapacityEstimate(99.0, "train", 0.9), 620_000, 1.2, "10.0.0.2", 5301)
    modes = (
        ModeResult("autotune", "up", 1, 9_000_000, 3.0, 24.7, 262144, 0, (), 0.8, 0.0, 1.0),
        ModeResult(
            "drs", "up", 1, 30_000_000, 3.0, 91.0, 1_300_000, 2, (), 0.0, 0.0, 1.0, forced=True
        ),
    )
    fixes = (
        Fix(
            "rmem",
            "sysctl",
            "peer",
            "net.ipv4.tcp_rmem",
            "4096 131072 2097152",
            'sysctl -w net.ipv4.tcp_rmem="4096 131072 2097152"',
            why="bounded by tcp_rmem",
        ),
        setsockopt_fix("SO_RCVBUF", 1 << 20, "peer"),
    )
    verdict = Verdict(
        "receiver-window",
        0.8,
        "peer",
        "the receiver's window is too small",
        ("rwnd-limited 80%",),
        WizardGap(24.7, 91.0, True),
    )
    report = Report(
        audit,
        verdict,
        fixes,
        ExitCode.CRITICAL,
        TargetInfo("dtn", "10.0.0.2", 5301),
        audit,
        path,
        TransferResult(modes),
    )
    out = io.StringIO()
    render(report, out, color=False)
    text = out.getvalue()
    assert text.startswith("tcpwizard CRITICAL - dtn (10.0.0.2) from near")
    order = [
        text.index(s)
        for s in (
            "Limiting factor: receiver-window",
            "Wizard gap: you get 24.7 Mbit/s; tuned, this path gives 91.0 Mbit/s (measured)",
            "On the far end (as root):",
            'sysctl -w net.ipv4.tcp_rmem="4096 131072 2097152"',
            "s.setsockopt(socket.SOL_SOCKET",
            "Path",
            "RTT min 50.10 ms",
            "Test transfers",
            "drs*",
        )
    ]
    assert order == sorted(order)
    assert "\x1b[" not in text
