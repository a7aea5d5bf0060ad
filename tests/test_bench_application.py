"""The application bench's tables: verdicts per view, and the capture's reader shares per
scenario (the measured basis of advice/observation.py STILL_SHARE and HELD_SHARE)."""

from __future__ import annotations

from benchmarks.bench_application import EXPECTED, Outcome, shares_table, table


def _run(scenario: str, edge: float | None, held: float) -> Outcome:
    o = Outcome(scenario, 200e6, 0.15)
    o.views["pcap a"] = EXPECTED[scenario]["pcap a"]
    o.evidence["pcap a"] = {
        "edge_still_share": edge,
        "held_ack_share": held,
        "window_full_share": 0.5,
    }
    return o


def test_shares_table_gives_each_scenarios_range() -> None:
    runs = [
        _run("healthy", 0.0, 0.0),
        _run("healthy", 0.02, 0.01),
        _run("reader-far", 0.91, 0.88),
        _run("reader-far", 0.97, 0.94),
    ]
    text = shares_table(runs)
    assert "| healthy | 2 | 0.00-0.02 | 0.00-0.01 | 0.50-0.50 |" in text
    assert "| reader-far | 2 | 0.91-0.97 | 0.88-0.94 | 0.50-0.50 |" in text


def test_a_share_the_capture_did_not_give_is_a_dash() -> None:
    assert "| scp | 1 | - | 0.20-0.20 |" in shares_table([_run("scp", None, 0.2)])


def test_a_healthy_path_is_right_when_every_view_names_the_path() -> None:
    o = _run("healthy", 0.0, 0.0)
    o.views["conns a"] = ("path-capacity", None)
    o.views["conns b"] = ("receiver-window", "peer")
    assert o.right("pcap a") and o.right("conns a") and not o.right("conns b")
    assert "| healthy | conns b | path-capacity, - | 0 / 1 |" in table([o])
