"""The scenario matrix without a lab: the drawing is reproducible from its seed, the truth
follows the physics (window law, Mathis, Reno's utilisation, the standing queue), and the
confusion, accuracy and calibration arithmetic is right."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import pytest

from benchmarks.bench_matrix import load_rows, plan, write_tables
from benchmarks.cli import build_parser, main
from benchmarks.matrix_draw import (
    ALL_CAUSES,
    AMBIGUOUS,
    CUBIC_SHARE,
    EXPECTED,
    ONE_WAY_CAUSES,
    RATE_MAX_BPS,
    RATE_MIN_BPS,
    RTT_MAX_S,
    RTT_MIN_S,
    STARVED_SHARE,
    TUNED_MIN,
    Scenario,
    cubic_segments,
    draw,
    draw_all,
    parse_id,
    reno_utilisation,
    standing_queue_bdps,
    truth,
)
from benchmarks.matrix_report import calibration, confusion, ece, right, summary
from tcpwizard.exitcodes import ExitCode


def _plain(**kw: Any) -> Scenario:
    """100 Mbit/s x 50 ms (BDP 625 KB), 1 BDP queue, BBR both ways, tuned 4 MB buffers."""
    base = Scenario(1, 0, "healthy", 100e6, 0.050, 1.0, 0.0, "bbr", "bbr")
    return replace(base, **kw)


def test_the_drawing_is_reproducible_from_the_seed_and_ids_round_trip() -> None:
    first = draw_all(4242, 0, 40)
    assert first == draw_all(4242, 0, 40)
    assert [s.id for s in first[5:8]] == ["4242.5", "4242.6", "4242.7"]
    assert draw(4242, 6) == first[6]  # --replay draws one scenario from its id alone
    assert parse_id("4242.6") == (4242, 6)
    assert draw_all(4243, 0, 40) != first
    for bad in ("4242", "4242.x", "-1.2", ""):
        with pytest.raises(ValueError, match=r"SEED\.INDEX"):
            parse_id(bad)


def test_every_drawn_scenario_stays_in_the_envelope_and_its_cause_binds() -> None:
    drawn = draw_all(99, 0, 300)
    assert {s.cause for s in drawn} == set(ALL_CAUSES)  # 300 draws reach every cause
    for s in drawn:
        assert RATE_MIN_BPS <= s.rate_bps <= RATE_MAX_BPS
        assert RTT_MIN_S <= s.rtt_s <= RTT_MAX_S
        assert truth(s) == EXPECTED[s.cause], s
        s.spec().validate()  # a lab the lab accepts


def test_a_receive_buffer_above_the_bdp_is_path_capacity_and_below_it_binds() -> None:
    bdp = 625_000
    assert truth(_plain(cause="small-rmem-b", rmem_b=4 * bdp)) == ("path-capacity", None)
    # Window about half of rmem (tcp_adv_win_scale 1): 2 x 1/6 BDP of buffer binds.
    assert truth(_plain(cause="small-rmem-b", rmem_b=bdp // 3)) == ("receiver-window", "peer")
    assert truth(_plain(cause="small-rmem-a", rmem_a=bdp // 3)) == ("receiver-window", "local")
    # A buffer of 1 BDP gives a window of 0.45-0.85 BDP: neither binding nor free.
    assert truth(_plain(rmem_b=bdp))[0] == AMBIGUOUS
    assert truth(_plain(wmem_a=bdp // 5)) == ("sender-buffer", "local")
    # A send buffer carries up to one 64 KB TSO skb beyond itself: 16 KB on a 72 KB BDP
    # (85 Mbit/s x 6.8 ms) may fill half of it, so it is not a clean limit.
    assert truth(_plain(rate_bps=85e6, rtt_s=0.0068, wmem_a=16384))[0] == AMBIGUOUS


def test_window_scaling_and_a_stripping_middlebox_bind_only_on_a_wide_path() -> None:
    assert truth(_plain(wscale_b=False)) == ("window-scaling", "peer")
    assert truth(_plain(wscale_a=False)) == ("window-scaling", "local")
    assert truth(_plain(strip_wscale=True)) == ("middlebox", "path")
    # 10 Mbit/s x 20 ms: a BDP of 25 KB, well inside 64 KB.
    assert truth(_plain(rate_bps=10e6, rtt_s=0.020, wscale_b=False)) == ("path-capacity", None)


def test_loss_binds_reno_by_mathis_and_not_bbr() -> None:
    # MSS / RTT x sqrt(1.5 / 0.01) = 3.5 Mbit/s on a 100 Mbit/s line.
    assert truth(_plain(loss=0.01, cc_a="reno")) == ("congestion", "local")
    assert truth(_plain(loss=0.01)) == ("path-capacity", None)
    # 10 Mbit/s x 10 ms: Mathis allows 14 Mbit/s, above the line (the 10-packet queue floor
    # is 1.2 BDP: clean for Reno).
    short = _plain(rate_bps=10e6, rtt_s=0.010, loss=0.01, cc_a="reno", cc_b="reno")
    assert truth(short) == (
        "path-capacity",
        None,
    )


def test_cubic_runs_its_own_response_function_above_renos_bound() -> None:
    """RFC 8312 section 5.1: at 0.1 % loss over 200 ms CUBIC's average window is ~1.054 x
    (0.2 / 0.001)^(3/4) = 56 segments against Reno's sqrt(1.5 / 0.001) = 39: on a 100 Mbit/s
    line both bind; at 1 % over 10 ms Reno's 12 segments win (CUBIC's own is 3.3)."""
    assert cubic_segments(0.2, 0.001) == pytest.approx(56.0, rel=0.01)
    assert cubic_segments(0.01, 0.01) < (1.5 / 0.01) ** 0.5
    big = 40 << 20  # buffers that hold 2.5 MB of BDP and its queue
    reno = _plain(rtt_s=0.2, loss=0.001, cc_a="reno", rmem_a=big, rmem_b=big, wmem_a=big,
                  wmem_b=big)  # fmt: skip
    assert truth(reno) == ("congestion", "local")
    assert truth(replace(reno, cc_a="cubic")) == ("congestion", "local")


def test_cubics_sawtooth_keeps_more_of_a_shallow_queues_line() -> None:
    """beta 0.7: the window falls to 0.7 (1 + B), which stays at or above 1 BDP from B = 0.43
    on; below it linear growth is CUBIC's least share (its concave growth keeps more)."""
    assert reno_utilisation(0.45, 717 / 1024) == 1.0
    assert reno_utilisation(0.0, 0.7) == pytest.approx(0.85)  # linear from 0.7 to 1
    assert reno_utilisation(0.0) < reno_utilisation(0.0, 717 / 1024) < reno_utilisation(0.25, 0.7)
    # The standing queue's median: Reno's (3B - 1)/4; CUBIC's swing is narrower.
    assert standing_queue_bdps(3.0, 0.5) == pytest.approx(2.0)
    assert standing_queue_bdps(3.0, 717 / 1024) > 2.0


def test_a_share_of_the_reno_hosts_run_cubic_where_the_truth_stays() -> None:
    drawn = [draw(20261205, i) for i in range(200)]
    hosts = [cc for s in drawn for cc in (s.cc_a, s.cc_b)]
    loss_based = hosts.count("reno") + hosts.count("cubic")
    assert 0.1 * loss_based < hosts.count("cubic") < CUBIC_SHARE * loss_based
    for s in drawn:
        if s.cause in ("loss-reno", "bufferbloat"):
            assert "cubic" not in (s.cc_a, s.cc_b), s.id
        assert truth(s) in (EXPECTED[s.cause], (AMBIGUOUS, None)), s.id


def test_bbrs_quantization_budget_queues_a_small_bdp_path() -> None:
    """Three TSO goals of at least 2 segments and 2 more: 8 segments over a BDP of 1.6 at
    7.9 Mbit/s x 2.5 ms, 15 ms of queue through a 6-BDP buffer: not clean (5 ms), not the
    2-BDP bloat of a Reno queue either (the 10-packet floor is 6 BDP at that rate)."""
    tiny = _plain(rate_bps=7.9e6, rtt_s=0.0025, queue_bdps=6.0)
    assert truth(tiny) == (AMBIGUOUS, None)
    # The same one-BDP buffer at 100 Mbit/s holds no more than the classic buffer: clean.
    assert truth(replace(tiny, rate_bps=100e6, queue_bdps=1.0)) == ("path-capacity", None)


def test_reno_utilisation_and_the_standing_queue() -> None:
    assert reno_utilisation(0.0) == pytest.approx(0.75)  # the classic no-buffer figure
    assert reno_utilisation(1.0) == 1.0
    assert 0.88 < reno_utilisation(0.25) < 0.89
    bloat = _plain(cc_a="reno", cc_b="reno", queue_bdps=6.0, rmem_a=40 << 20, rmem_b=40 << 20,
                   wmem_a=40 << 20, wmem_b=40 << 20)  # fmt: skip
    assert truth(bloat) == ("bufferbloat", "path")
    # BBR queues up to ~2 BDP (cwnd gain 2, startup overshoot): 6 BDP of buffer is on the
    # edge, a buffer of 1 BDP or less is clean.
    assert truth(replace(bloat, cc_a="bbr", cc_b="bbr"))[0] == AMBIGUOUS
    assert truth(replace(bloat, cc_a="bbr", cc_b="bbr", queue_bdps=0.9)) == ("path-capacity", None)
    # A window too small to fill the queue cannot bloat it (4 MB: ~2.9 BDP of window at most).
    assert truth(replace(bloat, rmem_a=TUNED_MIN, rmem_b=TUNED_MIN))[0] != "bufferbloat"


def test_policer_and_cross_traffic_truths() -> None:
    assert truth(_plain(policer_bps=20e6)) == ("policer", "path")
    assert truth(_plain(cross_udp_bps=70e6)) == ("cross-traffic", None)
    assert truth(_plain(cross_tcp_flows=3)) == ("cross-traffic", None)
    assert truth(_plain(cross_udp_bps=20e6))[0] == AMBIGUOUS  # leaves 80 %: not clearly held


def test_a_starved_far_end_binds_where_the_line_is_well_above_what_it_moves() -> None:
    starved = _plain(rate_bps=300e6, cpu_share_b=STARVED_SHARE)
    assert truth(starved) == ("host-cpu", "peer")
    assert "b's serve at 0.5% of a core" in replace(starved, cause="cpu-starved-b").describe()
    # At 50 Mbit/s what a starved serve moves (up to 31) is more than half the line.
    assert truth(_plain(rate_bps=50e6, cpu_share_b=STARVED_SHARE))[0] == AMBIGUOUS


def _row(i: int, t: tuple[str, str | None], v: tuple[str, str | None], conf: float) -> Any:
    return {
        "id": f"7.{i}",
        "seed": 7,
        "index": i,
        "scenario": {"cause": "healthy", "rate_bps": 50e6, "rtt_s": 0.03},
        "describe": "x",
        "truth": {"factor": t[0], "host": t[1]},
        "verdict": {"factor": v[0], "host": v[1], "confidence": conf},
        "seconds": 9.0,
        "when": "2026-01-01 00:00 UTC",
    }


def test_confusion_accuracy_and_calibration_arithmetic() -> None:
    pc: tuple[str, str | None] = ("path-capacity", None)
    rw: tuple[str, str | None] = ("receiver-window", "peer")
    rows = [
        _row(0, pc, pc, 0.95),
        _row(1, pc, pc, 0.92),
        _row(2, pc, ("congestion", "local"), 0.91),
        _row(3, rw, rw, 0.55),
        _row(4, rw, ("receiver-window", "local"), 0.5),  # right factor, wrong host: wrong
        _row(5, rw, ("error", None), 0.0),  # a failed check: not scored
    ]
    assert [right(r) for r in rows[:5]] == [True, True, False, True, False]
    bins = calibration(rows[:5])
    assert [(b.lo, b.n) for b in bins] == [(0.5, 2), (0.9, 3)]
    assert bins[1].accuracy == pytest.approx(2 / 3)
    assert bins[1].mean_confidence == pytest.approx(0.9267, abs=1e-4)
    # ECE = 2/5 x |0.5 - 0.525| + 3/5 x |0.6667 - 0.9267|
    assert ece(bins) == pytest.approx(0.4 * 0.025 + 0.6 * 0.26, abs=1e-4)
    assert ece([]) is None
    assert confusion(rows[:5], "host") == {
        "-": {"-": 2, "local": 1},
        "peer": {"peer": 1, "local": 1},
    }
    s = summary(rows)
    assert (s["scored"], s["right"], s["errors"]) == (5, 3, ["7.5"])
    assert s["wrong"] == ["7.2", "7.4"]
    assert s["healthy_host_fixes"] == ["7.2"]
    # A fix on both hosts is a host fix too.
    both = summary([_row(6, pc, ("congestion", "both"), 0.91)])
    assert both["healthy_host_fixes"] == ["7.6"]
    assert s["by_rate"] == {"20-100 Mbit/s": (3, 5)}


def test_the_tables_are_rebuilt_from_every_chunk(tmp_path: Path) -> None:
    store = tmp_path / "matrix.jsonl"
    pc: tuple[str, str | None] = ("path-capacity", None)
    import json

    with store.open("a") as f:
        f.write(json.dumps(_row(0, pc, pc, 0.9)) + "\n")
        f.write(json.dumps(_row(1, pc, ("congestion", "local"), 0.9)) + "\n")
        f.write(json.dumps(_row(1, pc, pc, 0.9)) + "\n")  # a replay: the latest row counts
    rows = load_rows(store)
    assert [r["verdict"]["factor"] for r in rows] == ["path-capacity", "path-capacity"]
    text = write_tables(tmp_path, rows)
    assert "2/2 (100%)" in text
    assert (tmp_path / "bench-matrix.json").exists()
    assert "| 7.1 |" not in (tmp_path / "bench-matrix.md").read_text()  # no wrong cases


def _args(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["matrix", *argv])


def test_the_arguments_name_the_scenarios() -> None:
    seed, scenarios = plan(_args("3", "--seed", "11", "--from", "5"))
    assert seed == 11 and [s.id for s in scenarios] == ["11.5", "11.6", "11.7"]
    seed, scenarios = plan(_args("--replay", "11.6"))
    assert seed == 11 and scenarios == [draw(11, 6)]
    fresh = {plan(_args("1"))[0] for _ in range(5)}
    assert len(fresh) > 1  # a fresh seed each run


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["matrix"], "give N"),
        (["matrix", "0"], "argument N: use 1-1000"),
        (["matrix", "--replay", "3"], "SEED.INDEX"),
        (["matrix", "2", "--replay", "3.1"], "runs one scenario"),
        (["matrix", "2", "--seed", "x"], "not a whole number"),
    ],
)
def test_matrix_usage_errors(
    argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == ExitCode.USAGE
    err = capsys.readouterr().err
    assert err.startswith("benchmarks: error:") and needle in err and err.count("\n") == 1


def test_matrix_needs_root_before_any_lab(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    import os

    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert main(["matrix", "2", "--seed", "5", "--out", str(tmp_path)]) == ExitCode.NO_PERMISSION
    err = capsys.readouterr().err
    assert "root" in err and err.count("\n") == 1
    assert not (tmp_path / "matrix.jsonl").exists()


def test_half_the_draws_run_over_ipv6_and_keep_their_envelope() -> None:
    drawn = [draw(424242, i) for i in range(200)]
    v6 = sum(s.ipv6 for s in drawn)
    assert 70 <= v6 <= 130  # binomial(200, 0.5): outside this is ~1 in 3000
    s = next(s for s in drawn if s.ipv6)
    assert ", IPv6" in s.describe()
    assert summary([])["by_family"] == {}


def test_the_family_and_cubic_leave_every_recorded_draw_as_it_was() -> None:
    """The family, CUBIC and the one-way causes come from generators of their own: the
    scenarios of the last recorded runs (docs/bench-matrix-runs.jsonl, seeds of runs 14-16,
    drawn before there was any) are drawn again field for field, but for Reno hosts that now
    run CUBIC and a path's cause that now acts on b -> a alone."""
    path = Path(__file__).resolve().parents[1] / "docs" / "bench-matrix-runs.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    recent = [r for r in rows if r["seed"] in (31415926, 27182818, 16180339)]
    assert len(recent) == 120
    turned = 0
    for r in recent:
        again = asdict(draw(r["seed"], r["scenario"]["index"]))
        again.pop("ipv6")
        back = again.pop("way_back")
        assert not back or r["scenario"]["cause"] in ONE_WAY_CAUSES, r["id"]
        was = dict(r["scenario"])
        for host in ("cc_a", "cc_b"):
            if again[host] != was[host]:
                assert (was[host], again[host]) == ("reno", "cubic"), r["id"]
                turned += 1
            again.pop(host), was.pop(host)
        assert again == was, r["id"]
    assert turned > 0


def test_every_drawn_rate_falls_in_a_band_that_holds_it() -> None:
    """Rates up to the delay line's ceiling are drawn: a 4.9 Gbit/s scenario is counted in
    a band whose label holds it, not in the 400-1000 one."""
    from benchmarks.matrix_draw import RATE_MAX_BPS, RATE_MIN_BPS
    from benchmarks.matrix_report import RATE_BANDS_MBPS, rate_band

    for bps in (RATE_MIN_BPS, 399e6, 999e6, 1.2e9, 4.89e9, RATE_MAX_BPS * 0.999):
        label = rate_band({"scenario": {"rate_bps": bps}})
        lo, hi = (float(x) for x in label.split()[0].split("-"))
        assert lo <= bps / 1e6 < hi, (bps, label)
    assert RATE_BANDS_MBPS[-1][1] * 1e6 >= RATE_MAX_BPS


def test_the_run_allows_the_congestion_controls_it_draws_and_puts_the_list_back(
    tmp_path: Path,
) -> None:
    """A namespace picks only from the initial one's allowed list ("reno bbr" on this
    machine): the run adds CUBIC for its scenarios and restores the list; what the kernel
    lacks is said."""
    from benchmarks.bench_matrix import ALLOWED_CC, AVAILABLE_CC, allowing

    allowed, available = tmp_path / ALLOWED_CC, tmp_path / AVAILABLE_CC
    allowed.parent.mkdir(parents=True)
    allowed.write_text("reno bbr\n")
    available.write_text("reno bbr cubic\n")
    with allowing({"reno", "cubic", "bbr", "vegas"}, tmp_path) as missing:
        assert allowed.read_text() == "reno bbr cubic"
        assert missing == ["vegas"]
    assert allowed.read_text() == "reno bbr"


def test_a_third_of_the_path_causes_act_on_the_way_back_alone() -> None:
    drawn = [draw(20261321, i) for i in range(600)]
    one_way = [s for s in drawn if s.cause in ONE_WAY_CAUSES]
    back = [s for s in one_way if s.way_back]
    # binomial(n, 1/3): within 4 standard deviations
    n = len(one_way)
    assert abs(len(back) - n / 3) <= 4 * (n * 2 / 9) ** 0.5, (len(back), n)
    assert not any(s.way_back for s in drawn if s.cause not in ONE_WAY_CAUSES)
    for s in back:
        assert truth(s) in (EXPECTED[s.cause], (AMBIGUOUS, None)), s.id
        assert s.describe().endswith(", b -> a only")
        spec = s.spec()
        if s.policer_bps is not None:  # the bucket on b -> a alone
            assert spec.forward.policer_bps is None and spec.reverse.policer_bps is not None
        if s.policer_bps is not None:
            assert s.policed_on(up=False) and not s.policed_on(up=True)
        else:
            assert s.cross_on(up=False) and not s.cross_on(up=True)
    assert any(s.cross_udp_bps or s.cross_tcp_flows for s in back)
    assert any(s.policer_bps for s in back)
    # the others as always: a bucket both ways, cross traffic a -> b
    both = next(s for s in one_way if s.policer_bps and not s.way_back)
    assert both.policed_on(up=True) and both.policed_on(up=False)
    upward = next(s for s in one_way if s.cross_udp_bps and not s.way_back)
    assert upward.cross_on(up=True) and not upward.cross_on(up=False)
