"""The TUI's Textual-free parts: host entry parsing, the run state folded from Events, the
fixes script, the hops table, the time-sequence graph's series, the plot's axis helpers,
and the `tui` command line."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from tcpwizard.cli import DEFAULT_PORT, build_parser
from tcpwizard.exitcodes import PermissionRequired, UsageError
from tcpwizard.measure.farends.interface import Progress
from tcpwizard.measure.probes.hops import PathOptions
from tcpwizard.run import CheckRequest, Event
from tcpwizard.tui.screens.path import hops_hint
from tcpwizard.tui.screens.transfer import sequence_series
from tcpwizard.tui.state import RunState
from tcpwizard.tui.text import HOP_COLUMNS, fixes_script, hop_rows, parse_target, path_rows
from tcpwizard.tui.widgets.plot import bresenham, nice_max
from tests.tui_data import FakePipeline, four_hops, path_estimate, pressed_flow


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("dtn.example", ("dtn.example", 5301)),
        (" dtn.example:7000 ", ("dtn.example", 7000)),
        ("192.0.2.7:1", ("192.0.2.7", 1)),
        ("::1", ("::1", 5301)),
        ("2001:db8::7", ("2001:db8::7", 5301)),
        ("[2001:db8::7]:7000", ("2001:db8::7", 7000)),
        ("[::1]", ("::1", 5301)),
    ],
)
def test_parse_target(text: str, expected: tuple[str, int]) -> None:
    assert parse_target(text, 5301) == expected


@pytest.mark.parametrize(
    "text", ["", "  ", "host:0", "host:65536", "host:x", "[::1", "[::1]x", "a b"]
)
def test_parse_target_refuses(text: str) -> None:
    with pytest.raises(UsageError):
        parse_target(text, 5301)


def test_run_state_follows_the_events(tmp_path: Path) -> None:
    fake = FakePipeline(tmp_path)
    state = RunState()
    state.start(CheckRequest("dtn1.example"), None)
    assert state.stage_state("audit") == "pending"
    events: list[Event] = []
    report = fake.run_check(CheckRequest("dtn1.example"), None, events.append, None)  # type: ignore[arg-type]
    for ev in events:
        state.apply(ev)
        if ev.stage == "probe" and ev.path is not None:
            assert state.stage_state("audit") == "done"
            assert state.stage_state("probe") == "running"
            assert state.stage_state("transfer") == "pending"
    assert state.local is report.host and state.peer is report.peer
    assert [s.label for s in state.series.values()] == ["untuned up", "autotune up", "drs up"]
    assert all(s.result is not None and s.fraction == 1.0 for s in state.series.values())
    assert len(state.series["drs", "up"].samples) == 20
    state.finish(report)
    assert not state.running and state.report is report
    assert all(state.stage_state(s) == "done" for s in ("audit", "transfer", "diagnose"))


def test_run_state_fraction_and_failure() -> None:
    state = RunState()
    state.start(CheckRequest("h"), None)
    p = Progress("autotune", "up", "sample", 1.0, 1000, 8.0, 4.0, None)
    state.apply(Event("transfer", "autotune", transfer=p))
    assert state.series["autotune", "up"].fraction == 0.25
    state.fail("cancelled", cancelled=True)
    assert state.cancelled and not state.running
    assert state.stage_state("transfer") == "stopped"


def test_fixes_script_groups_by_host_and_comments_code(tmp_path: Path) -> None:
    report = FakePipeline(tmp_path).report
    script = fixes_script(report.fixes, "dtn1.example")
    assert script.startswith("#!/bin/sh\n")
    assert "# --- on this host ---" in script
    for fix in report.fixes:
        assert fix.command in script


def test_path_rows() -> None:
    rows = dict(path_rows(path_estimate()))
    assert rows["RTT min"] == "50.100 ms"
    assert rows["BDP"] == "625 KB"
    assert rows["peer"] == "tcpwizard serve"


def test_hop_rows_carry_the_marks_of_the_analysis() -> None:
    rows = [dict(zip(HOP_COLUMNS, r, strict=True)) for r in hop_rows(four_hops())]
    assert [r["hop"] for r in rows] == ["1", "2", "3", "4"]
    assert rows[0]["found here"] == "rate limited (ICMP)" and rows[0]["loss"] == "20.0%"
    assert rows[1]["address"] == "wan-core.example.net\n203.0.113.9"
    assert rows[1]["found here"] == "RTT jump +47.7 ms" and rows[1]["MTU"] == "→1500"
    assert (rows[1]["min ms"], rows[1]["med ms"]) == ("48.10", "48.13")
    assert rows[2]["found here"] == "loss begins"
    assert rows[3]["found here"] == "" and rows[3]["MTU"] == ""
    blackhole = hop_rows(four_hops(blackhole=True))[1]
    assert blackhole[-1] == "RTT jump +47.7 ms\nPMTU black hole"


def test_hops_hint_says_how_to_get_hops() -> None:
    state = RunState()
    assert "--hops" in hops_hint(state)
    state.start(CheckRequest("h", hops=PathOptions()), None)
    assert "comes with its result" in hops_hint(state)
    state.fail("unreachable", cancelled=False)
    assert hops_hint(state) == "Hops: none, the check did not finish"


def test_sequence_series_of_a_transfer_pressed_against_its_window() -> None:
    flow = pressed_flow()
    edge, acked, sent, retransmitted = sequence_series(flow)
    assert [edge.name, acked.name, sent.name] == ["window edge", "acked", "sent"]
    highs = [v for _t, v in sent.points]
    assert highs == sorted(highs) and highs[-1] == max(end for _t, _a, end in flow.data)
    # Steps: each ACK holds until the next one.
    assert acked.points[:3] == (
        (flow.acks[0][0], flow.acks[0][1]),
        (flow.acks[1][0], flow.acks[0][1]),
        (flow.acks[1][0], flow.acks[1][1]),
    )
    assert acked.points[-1] == (flow.acks[-1][0], flow.acks[-1][1])
    assert len(edge.points) == 2 * len(flow.window) - 1
    assert retransmitted.marks and len(retransmitted.points) == len(flow.retransmits) == 1
    assert not (edge.marks or acked.marks or sent.marks)


@pytest.mark.parametrize(
    ("v", "top"), [(0, 1.0), (0.3, 0.5), (1, 1), (7.3, 10), (94, 100), (120, 200), (2.2e6, 2.5e6)]
)
def test_nice_max(v: float, top: float) -> None:
    assert nice_max(v) == pytest.approx(top)


def test_line_joins_both_ends() -> None:
    dots = bresenham(0, 0, 5, 2)
    assert dots[0] == (0, 0) and dots[-1] == (5, 2)
    assert all(abs(a[0] - b[0]) <= 1 and abs(a[1] - b[1]) <= 1 for a, b in itertools.pairwise(dots))


def test_tui_command_line() -> None:
    args = build_parser().parse_args(["tui"])
    assert args.command == "tui" and args.host is None and args.port == DEFAULT_PORT
    args = build_parser().parse_args(["tui", "dtn", "--port", "7000", "--quick"])
    assert (args.host, args.port, args.quick) == ("dtn", 7000, True)
    assert (args.hops, args.capture) == (False, False)
    args = build_parser().parse_args(["tui", "dtn", "--hops", "--capture"])
    assert (args.hops, args.capture) == (True, True)


def test_tui_request_from_args(tmp_path: Path) -> None:
    from tcpwizard.commands.tui import request_from_args
    from tcpwizard.context import Context

    secret = tmp_path / "secret"
    secret.write_text("s3cret\n")
    secret.chmod(0o600)
    args = build_parser().parse_args(["tui", "dtn", "--secret-file", str(secret), "--quick"])
    req = request_from_args(args, Context(is_root=False))
    assert (req.host, req.secret, req.quick, req.force_buffers) == ("dtn", b"s3cret", True, False)
    assert request_from_args(args, Context(is_root=True)).force_buffers  # as `check` does
    assert (req.hops, req.capture) == (None, False)
    with pytest.raises(UsageError):
        request_from_args(build_parser().parse_args(["tui", "--port", "0"]), Context())


def test_tui_hops_and_capture_options() -> None:
    from tcpwizard.commands.tui import request_from_args
    from tcpwizard.context import Context

    args = build_parser().parse_args(["tui", "dtn", "--hops", "--capture"])
    req = request_from_args(args, Context(is_root=True))
    assert req.hops == PathOptions() and req.capture  # `path`'s defaults
    with pytest.raises(PermissionRequired, match="--capture runs tcpdump: needs root"):
        request_from_args(args, Context(is_root=False))
