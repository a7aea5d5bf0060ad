"""Reports the scenario matrix measured in the lab (real kernel TCP through the delay line),
judged again by today's rules: paths whose physics the drawing knows (benchmarks/
matrix_draw.py truth), kept where a rule was wrong on them or where a rule's change could
turn them wrong. Each file is the whole `check --json` report, gzipped; the scenario is in
the test's name."""

from __future__ import annotations

import gzip
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from benchmarks.report_evidence import evidence
from tcpwizard.advice import idle_follow_up
from tcpwizard.advice.diagnose import Evidence, diagnose
from tcpwizard.advice.evidence import directions
from tcpwizard.advice.loss_episodes import episodes
from tcpwizard.advice.model import Verdict
from tcpwizard.advice.window_law import lossy_window_share, round_trip_hit
from tcpwizard.measure.model import IdleLoss

CASES = Path(__file__).parent / "data" / "matrix-cases"


def _verdict(scenario: str) -> tuple[str, str | None]:
    doc = json.loads(gzip.decompress((CASES / f"{scenario}.json.gz").read_bytes()))
    v = diagnose(evidence(doc)).verdict
    return v.limiting_factor, v.host_to_fix


@pytest.mark.parametrize(
    ("scenario", "what"),
    [
        ("20261203.93", "BBR down through an 8 Mbit/s bucket on a 67 Mbit/s x 20 ms line"),
        ("20261201.135", "Reno through a 3.7 Mbit/s bucket on a 15 Mbit/s x 86 ms line"),
        ("20261202.153", "Reno through a 472 Mbit/s bucket on a 2.2 Gbit/s x 14 ms line"),
        # The 0.9 s untuned upload at 4.6 Mbit/s fitted in the bucket: no witness against it
        # (read `congestion` on the Reno host before).
        ("20261203.36", "BBR up, Reno down through a 2.8 Mbit/s bucket, 12.6 Mbit/s x 86 ms"),
        # Unpaced bursts queue at the line in front of the bucket (losses at +7 to +69 ms):
        # no full buffer's overflow.
        ("20261204.4", "Reno through a 393 Mbit/s bucket on a 1.1 Gbit/s x 57 ms line"),
        # Losses in over half the intervals, but at 9 % of the line, far below any Reno
        # sawtooth (read `cross-traffic`).
        ("20261204.24", "Reno up, BBR down through a 299 Mbit/s bucket, 2.9 Gbit/s x 82 ms"),
        # 18 segments a loss episode where random loss at its 1.8 % puts 1, at 2.8 x the
        # loss bound (read `congestion` on both hosts).
        ("20261204.102", "Reno through a 33.7 Mbit/s bucket on a 130 Mbit/s x 8.8 ms line"),
        # CUBIC up at 35 Mbit/s, under its backoff's sawtooth, BBR down at the bucket's 56:
        # one bucket, both ways (read `cross-traffic` from the upload's probe streams).
        ("20261209.35", "CUBIC up, BBR down through a 56 Mbit/s bucket, 509 Mbit/s x 57 ms"),
        # Reno down with 4-5 segments a window: its RTT raised by delayed ACKs now and then,
        # read as a queue before (`cross-traffic`).
        ("20261209.25", "BBR up, Reno down through a 1.5 Mbit/s bucket, 11.5 Mbit/s x 6.7 ms"),
        # Beside 1.9 % random loss: the idle probes lost too many to rule it out at the
        # plateau's 10.9 %, the untuned upload under the bucket lost 1.9 % of its segments
        # (read `path-capacity`; and `congestion` for the second).
        ("20261301.22", "BBR through a 93 Mbit/s bucket, 280 Mbit/s x 3.2 ms, 1.9 % loss"),
        ("20261231.12", "BBR through a 34 Mbit/s bucket, 117 Mbit/s x 3.3 ms, 1.9 % loss"),
        # BBR learned the bucket's rate from 27-31 % lost early and lost 0.3-1.6 % after:
        # the idle probes judge what held it, not what it lost once paced (`congestion`).
        ("20261301.38", "BBR through a 2.2 Mbit/s bucket, 5.9 Mbit/s x 115 ms, 1.2 % loss"),
    ],
)
def test_a_policed_path_stays_the_policer(scenario: str, what: str) -> None:
    ev = _checked(scenario)
    v = diagnose(ev).verdict
    assert (v.limiting_factor, v.host_to_fix) == ("policer", "path"), what


def _checked(scenario: str, lost: int = 0) -> Evidence:
    """The stored report with the idle round-trip probes today's check sends after the
    transfers where they could decide (advice/idle_follow_up.py), `lost` of them lost (a
    bucket passes them all). Reports measured before a follow-up was sent for BBR have none."""
    ev = _evidence(scenario)
    count, _why = idle_follow_up.wanted(ev.path, ev.transfer)
    if not count or ev.path is None:
        return ev
    return replace(ev, path=replace(ev.path, idle_loss=IdleLoss(count, lost, "udp-echo")))


def test_bbr_held_far_below_the_line_by_random_loss_is_no_policer() -> None:
    """BBR down at 1.7 % random loss over 519 Mbit/s x 53 ms (2,300 segments a window): its
    recoveries overlapped and it held 28-46 Mbit/s, flat, no queue (read `policer` 0.98,
    though the upload's small send buffer at a was the scenario). The check now sends idle
    probes; random loss at that share drops some of them, a bucket none."""
    ev = _evidence("20261229.165")
    count, why = idle_follow_up.wanted(ev.path, ev.transfer)
    assert count > 0 and "download" in why
    random_loss = round(count * (1 - (1 - 0.0174) ** 2))  # there and back
    v = diagnose(_checked("20261229.165", random_loss)).verdict
    assert (v.limiting_factor, v.host_to_fix) == ("sender-buffer", "local")
    assert diagnose(_checked("20261229.165", 0)).verdict.limiting_factor == "policer"


def test_another_transfer_witnesses_random_loss_only_against_most_of_the_losses() -> None:
    """Reno at 0.24 % random loss, 3.1 Gbit/s x 5.1 ms: the autotuned upload lost 0.38 %, the
    other two 0.27-0.28 % of 23,000-27,000 segments, odds of 1 in 175 and 1 in 1,000 at the
    same share.
    No cause lies in that difference: it stays `congestion`, not a bucket; the same report
    with the witness's retransmissions cut below half the share reads `policer`."""
    assert _verdict("20261301.33") == ("congestion", "local")
    doc = json.loads(gzip.decompress((CASES / "20261301.33.json.gz").read_bytes()))
    for m in doc["transfer"]["modes"]:
        if m["direction"] == "up" and m["mode"] != "autotune":
            m["retransmits"] = m["retransmits"] // 4
    assert diagnose(evidence(doc)).verdict.limiting_factor == "policer"


def test_reno_settled_near_its_loss_bound_is_congestion_not_a_policer() -> None:
    """Reno at 0.38 % random loss over 222 ms on a 21.7 Mbit/s line: 7-10 Mbit/s for a
    second before its first cuts, then 1-3.5: its whole average is 3.5 x the loss bound,
    its settled rate near it (read `policer` when the bound was read against the average)."""
    assert _verdict("20261203.80") == ("congestion", "local")


@pytest.mark.parametrize(
    ("scenario", "what"),
    [
        ("20261203.160", "BBR at 1.6 % random loss through a 1-BDP queue, 224 Mbit/s x 166 ms"),
        ("20261203.74", "BBR at 1.9 % random loss, 166 Mbit/s x 237 ms"),
    ],
)
def test_bbr_on_a_lossy_long_path_gets_no_policer_and_no_host_fix(scenario: str, what: str) -> None:
    """Healthy hosts (23-25 MB buffers) on a path that loses segments at random: the
    receiver's autotuning trails the holes (receive-window limited 23-29 % of the time) and
    two overflows of the queue cost the plateau 17 %. Neither is a bucket or a host's
    buffer (read `policer` 0.98 and `receiver-window` on a host before)."""
    factor, host = _verdict(scenario)
    assert factor != "policer" and host not in ("local", "peer"), (what, factor, host)


def test_the_share_of_round_trips_a_random_loss_hits() -> None:
    assert round_trip_hit(0.0, 1e6, 1448) == 0.0
    assert round_trip_hit(0.01, 100 * 1448, 1448) == pytest.approx(1 - 0.99**100)
    hit = round_trip_hit(0.02, 50 * 1448, 1448)
    assert lossy_window_share(0.02, 50 * 1448, 1448) == pytest.approx(1 / (1 + hit))


def test_bbrs_own_queue_on_a_small_bdp_is_no_bufferbloat() -> None:
    """BBR at 7.9 Mbit/s x 2.5 ms through a 10-packet buffer: 10 ms of standing queue, its
    quantization budget (8 segments) over a BDP of less than 2 (read `bufferbloat`)."""
    assert _verdict("20261204.61") == ("path-capacity", None)


def test_a_queue_that_drained_before_the_end_is_no_one_elses() -> None:
    """Reno at 269 Mbit/s x 190 ms through a 0.33-BDP queue: slow start ended at 2.1 s of a
    3.1 s transfer, its overshoot's queue still in the second half's first samples, none in
    the last quarter (read `cross-traffic` at 0.95)."""
    assert _verdict("20261204.55") == ("path-capacity", None)


def test_a_reno_sawtooth_through_a_shallow_queue_is_no_bucket() -> None:
    """Reno down at 84 % of the 1.6 Gbit/s the probe saw (2.9 Gbit/s x 2.6 ms, 0.59-BDP
    queue): its window's peaks at 1.27 BDP over a 0.27-BDP queue keep 89 % of the line
    busy, so its plateau is its own sawtooth's (read `policer`)."""
    assert _verdict("20261204.121") == ("path-capacity", None)


def test_bbrs_own_probing_through_a_shallow_queue_is_the_path() -> None:
    """BBR both ways over 50 Mbit/s x 300 ms through a 0.5-BDP queue (lab, both hosts
    stock): 10 % retransmitted, up at 38 Mbit/s once up to speed, dipping from the line to
    15-25 after each overflow, its RTT at the queue's full depth before the losses. The
    losses are its own window (2 BDP in flight) overflowing the path's buffer; between them
    it filled the line (read `congestion`, "look for a congested or faulty link")."""
    ev = _evidence("lab-bbr-half-bdp-queue-300ms")
    v = diagnose(ev).verdict
    assert (v.limiting_factor, v.host_to_fix) == ("path-capacity", None)
    assert any("overflowing under its own window" in e for e in v.evidence)


def test_a_way_backs_train_the_way_out_confirms_stands_against_a_slower_transfer() -> None:
    """The same lab path: the download's train (no pairs, 0.6) read 50.0 Mbit/s, the
    upload's pairs and train 50.0. Agreeing, they confirm each other: the download is
    judged against 50, not against the 41.4 its own transfer moved (which called it 100 %
    of the path)."""
    from tcpwizard.advice.capacity_view import capacity
    from tcpwizard.advice.evidence import directions

    ev = _evidence("lab-bbr-half-bdp-queue-300ms")
    down = next(d for d in directions(ev) if d.name == "down")
    assert capacity(ev, down) == pytest.approx(50.0, rel=0.01)


def _uncounted(doc: dict[str, Any]) -> dict[str, Any]:
    """The report as a run where the paced sender never waited on the window (the chrono
    counter at 0 throughout): what BBR shows when it paces at the window-bound rate."""
    for m in doc["transfer"]["modes"]:
        m["rwnd_limited"] = 0.0
        for s in m["samples"]:
            if s["tcp_info"] is not None:
                s["tcp_info"]["rwnd_limited_us"] = 0
    return doc


def test_a_window_the_sender_filled_holds_it_though_it_never_waited() -> None:
    """BBR uploading to Debian's iperf3 through the far end's 256 KB tcp_rmem (lab, 80 Mbit/s
    x 60 ms, check --direction up): 14.8 Mbit/s, the window it was offered 99 % full. With
    the counter of time it waited at zero (as in the runs that read `path-capacity`), the
    window law on TCP_INFO's snd_wnd still names the far end's receive window; the healthy
    far end's upload (8 % of its window in flight) stays `path-capacity`."""
    case = CASES / "lab-iperf3-far-end-256k-rmem-up.json.gz"
    doc = _uncounted(json.loads(gzip.decompress(case.read_bytes())))
    v = diagnose(evidence(doc)).verdict
    assert (v.limiting_factor, v.host_to_fix) == ("receiver-window", "peer"), v
    assert any("of the window the receiver offered" in e for e in v.evidence)
    assert _verdict("lab-iperf3-far-end-healthy-up") == ("path-capacity", None)


def test_a_queue_that_swung_below_the_idle_probe_is_still_others() -> None:
    """Reno beside 3 TCP flows, 341 Mbit/s x 12.5 ms: the idle probe's echoes all met the
    others' queue (14.3 ms at least), the transfer's smoothed RTT swung 12.9-18.3 ms with a
    window of a fifth of the BDP. Judged against the probe's 14.3 the queue looked like
    noise and the verdict was `congestion` on this host."""
    assert _verdict("20261230.130") == ("cross-traffic", None)


def test_a_shared_flows_peaks_are_no_overflow_of_its_own() -> None:
    """BBR up beside two TCP flows (2.2 Gbit/s x 2.4 ms, 0.93-BDP queue): 28 % of the path
    free, its round-trip peaks lifted where the others gave way. Its own overflow is not
    shown, the sharing is the verdict (read `path-capacity` when a flow's peaks were taken
    for its own without asking whether others were there)."""
    assert _verdict("20261229.125") == ("cross-traffic", None)


def test_a_send_window_below_the_bdp_counts_every_loss_against_its_law() -> None:
    """BBR downloading from a far end whose tcp_wmem max is 347 KB, over 382 ms of a 36
    Mbit/s line at 0.49 % random loss: a 249 KB window, far below the 1.7 MB BDP, held 4.5
    Mbit/s of its law's 5.2. Its four losses came early, none "after the ramp"; a window
    below the BDP overflows no queue, so every one of them held it and the buffer explains
    the plateau (read `policer` 0.98 when only the losses after the ramp were counted)."""
    assert _verdict("20261207.12") == ("sender-buffer", "peer")


def test_a_rate_far_under_what_its_loss_allows_is_held_by_something_else() -> None:
    """CUBIC uploading through a 56 KB tcp_wmem max over 1.06 Gbit/s x 2.7 ms: 141 Mbit/s
    with one retransmission in ~70,000 segments, whose loss bound is 920 Mbit/s. The loss
    did not hold it; the send buffer did (read `congestion` on this host, 0.91, before
    the rate had to lie within the loss law's band)."""
    assert _verdict("20261230.34") == ("sender-buffer", "local")


def test_a_reader_starved_in_another_transfer_outranks_the_window_counter() -> None:
    """The far end's serve at 0.5 % of a core (529 Mbit/s x 17.7 ms): its audit never came,
    the upload at 0.9 Mbit/s was receive-window limited 96 % of the time, and the reader was
    held off the CPU 24 % of that transfer and 67 % of the download. With no audited buffer
    to explain the window, the counter is what a starved reader trips (read
    `receiver-window` at the peer when the starvation of another transfer ranked below it)."""
    assert _verdict("20261207.59") == ("host-cpu", "peer")


def test_a_buffer_others_keep_full_is_no_bloat_below_what_one_flow_would_bloat() -> None:
    """Two Reno flows and a Reno upload through a 1.6 BDP buffer at 307 ms: the available
    bandwidth measured 96.5 of 122 Mbit/s taken and the RTT under load stood the buffer's
    whole depth above idle (read `bufferbloat` 0.96 before)."""
    assert _verdict("20261208.7") == ("cross-traffic", None)


def test_a_bloated_buffer_others_keep_full_is_a_finding_beside_the_sharing() -> None:
    """Two Reno flows through a 4.3 BDP buffer at 2 Gbit/s x 158 ms: the buffer is bloated
    (3.4 BDPs standing), but this transfer moved 7 Mbit/s with none of the path free; the
    sharing holds the rate and the bloat stands beside it (read `bufferbloat` 0.96 before)."""
    doc = json.loads(gzip.decompress((CASES / "20261228.20.json.gz").read_bytes()))
    v = diagnose(evidence(doc)).verdict
    assert (v.limiting_factor, v.host_to_fix) == ("cross-traffic", None)
    assert any(e.startswith("also, up: bufferbloat") for e in v.evidence)


def stored_evidence(scenario: str) -> Evidence:
    """The evidence of a stored report of tests/data/matrix-cases."""
    return evidence(json.loads(gzip.decompress((CASES / f"{scenario}.json.gz").read_bytes())))


_evidence = stored_evidence


@pytest.mark.parametrize(
    ("scenario", "what"),
    [
        # The 20 idle probes lost none where random loss at the transfer's 20.8 % loses 4.2:
        # odds under 1 % (read `cross-traffic` at 0.76 before).
        ("20261207.151", "BBR up, Reno down through a 1.1 Mbit/s bucket, 6.3 Mbit/s x 44 ms"),
        # 20.6 % lost by the download, 0 of 20 idle probes (read `congestion` on both hosts).
        ("20261207.23", "CUBIC up, Reno down through a 1.4 Mbit/s bucket, 6.8 Mbit/s x 11 ms"),
    ],
)
def test_idle_probes_that_lost_nothing_rule_random_loss_out(scenario: str, what: str) -> None:
    assert _verdict(scenario) == ("policer", "path"), what


def test_a_loss_the_idle_probes_cannot_yet_judge_asks_for_more_of_them() -> None:
    """Reno through a 3.1 Mbit/s bucket on an 8.9 Mbit/s x 29 ms line, 9.3 % of the
    download's segments lost near its loss bound: the RTT probe's 20 (none lost) leave
    random loss at 9.3 % with odds of 14 %; the check sends 28 more (0.907^48 < 1 %)."""
    ev = _evidence("20261207.110")
    assert diagnose(ev).verdict.limiting_factor == "congestion"
    count, why = idle_follow_up.wanted(ev.path, ev.transfer)
    assert count == 28 and "download" in why
    path = ev.path
    assert path is not None

    def judged(lost: int) -> Verdict:
        more = IdleLoss(count, lost, "udp-echo")
        return diagnose(replace(ev, path=replace(path, idle_loss=more))).verdict

    silent = judged(0)
    assert (silent.limiting_factor, silent.host_to_fix) == ("policer", "path")
    assert any("round-trip probes at idle lost 0" in line for line in silent.evidence)
    # Random loss at the transfer's share would drop ~6 of 68: a few lost keep it open.
    assert judged(5).limiting_factor == "congestion"


@pytest.mark.parametrize("scenario", ["20261203.80", "20261201.135", "20261208.7"])
def test_no_more_idle_probes_where_they_could_not_change_the_verdict(scenario: str) -> None:
    """Reno at random loss (its rate at the loss bound, the policer test fails on its
    own terms), a bucket the policer test finds already, a path others share."""
    ev = _evidence(scenario)
    assert idle_follow_up.wanted(ev.path, ev.transfer) == (0, "")


def test_random_loss_with_a_handful_of_segments_is_no_shared_path() -> None:
    """Reno at 5 % random loss each way on a 9 Mbit/s x 29 ms lab line (no other traffic),
    4 segments a window: its smoothed RTT 9.6 ms above idle, the samples' mean deviation as
    large (a delayed ACK now and then, not a queue that stands), and the available bandwidth
    measured free: `congestion`, not `cross-traffic` (read 4 times in 6 before)."""
    ev = _evidence("lab-random-loss-5pct")
    v = diagnose(ev).verdict
    assert v.limiting_factor == "congestion"
    # The RTT probe lost 1 of its 20: said beside the loss bound, as random loss would.
    assert any("1 of 20 round-trip probes at idle were lost too" in e for e in v.evidence)


def test_a_small_windows_delayed_acks_are_no_queue_before_a_bucket() -> None:
    """Reno through a 1.9 Mbit/s bucket on a 5.1 Mbit/s x 16 ms line, 4 segments a window:
    its RTT 7 ms above idle, the samples' deviation 4.4 ms (a delayed ACK now and then), read
    as a queue and `cross-traffic`. Without it the losses are judged: random loss at 11 %
    with the RTT probe's 20 back is not yet ruled out, 18 more silent probes would."""
    ev = _evidence("20261204.189")
    assert diagnose(ev).verdict.limiting_factor == "congestion"
    count, _why = idle_follow_up.wanted(ev.path, ev.transfer)
    path = ev.path
    assert path is not None and count == 18
    silent = replace(path, idle_loss=IdleLoss(count, 0, "udp-echo"))
    v = diagnose(replace(ev, path=silent)).verdict
    assert (v.limiting_factor, v.host_to_fix) == ("policer", "path")


def test_a_ramp_its_drain_hid_is_still_a_ramp_not_a_policers_plateau() -> None:
    """BBR down at 1.9 % random loss on a 4 Gbit/s x 31 ms line climbed 110 to 202 Mbit/s
    over 8 round trips, then drained at 48, 25, 0: the climb is no plateau, and the upload's
    small receive buffer at b is the verdict (read `policer` 0.98 before)."""
    assert _verdict("20261228.87") == ("receiver-window", "peer")


def test_a_queue_others_keep_is_no_policers_queue_free_plateau() -> None:
    """Four TCP flows through a 0.42 BDP queue at 3.7 Gbit/s x 2.6 ms kept 0.7 ms standing
    under this transfer's plateau: more than any queue-free flow stands above idle (0.06-
    0.41 ms), so others' queue, and no policer's (read `policer` 0.98 before, when the
    policer's floor was 1 ms and the same 0.7 ms was both)."""
    assert _verdict("20261228.54") == ("cross-traffic", None)


def test_bbrs_startup_queue_in_front_of_a_bucket_is_no_queue_at_its_losses() -> None:
    """BBR down through a 20 Mbit/s bucket on the way back of a 100 Mbit/s x 40 ms lab line:
    its startup's queue stood in front of the bucket through eight 100 ms intervals of losses
    in a row (1.1-2 x idle), then the rate held 19 Mbit/s with the RTT at idle. Each of
    those intervals was taken for an episode of its own, so half the losses "came with a
    queue" and the verdict was `congestion` (0.58); the run is the ramp's overshoot."""
    ev = _evidence("lab-bbr-policed-way-back-20m-of-100m-40ms")
    down = next(d for d in directions(ev) if d.name == "down")
    m = down.current
    assert m is not None and m.congestion_control == "bbr"
    idle = ev.path.rtt.min if ev.path else 0.0
    apart = episodes(m, idle)
    assert len(apart) > 10 and sum(max(e) > 1.5 * idle for e in apart[1:]) >= 3
    ramp, *later = episodes(m, idle, first_run=True)
    assert len(ramp) > 8 and max(ramp) > 1.9 * idle  # the overshoot, its queue with it
    assert later and all(max(e) < 1.05 * idle for e in later)  # the bucket's, at idle
    v = diagnose(ev).verdict
    assert (v.limiting_factor, v.host_to_fix) == ("policer", "path")


def test_renos_overshoot_through_a_bucket_is_one_episode_and_the_bucket_is_named() -> None:
    """Reno down through the same bucket: ten lossy intervals in a row after slow start (a
    burst at 1.4 x idle among them, its window sent back to back queuing in front of the
    bucket), then one loss at idle two seconds later. Read interval by interval, half the
    episodes had a queue and the verdict was `congestion` on the sender (0.81)."""
    ev = _evidence("lab-reno-policed-way-back-20m-of-100m-40ms")
    down = next(d for d in directions(ev) if d.name == "down")
    assert down.current is not None and down.current.congestion_control == "reno"
    v = diagnose(ev).verdict
    assert (v.limiting_factor, v.host_to_fix) == ("policer", "path")


def test_others_queue_on_the_way_back_is_no_policers_queue_free_plateau() -> None:
    """Two BBR flows of others on the way back of a 100 Mbit/s x 50 ms lab line: the echoes
    at 94-100 ms (their median 4 ms above their minimum), the download's share of 24 Mbit/s
    at 100 ms, "no queue" against that minimum, read `policer` 0.98. The available-bandwidth
    streams run on the upload only and found it free; nothing vouches for the way back."""
    ev = _evidence("lab-two-bbr-flows-on-the-way-back-100m-50ms")
    assert ev.path is not None and ev.path.rtt.p50 - ev.path.rtt.min > 3.0
    v = diagnose(ev).verdict
    assert v.limiting_factor != "policer"
    assert v.confidence < 0.7  # no cause the evidence holds: a weak reading, said as such


def test_a_download_far_below_its_train_is_no_sure_path_capacity() -> None:
    """60 Mbit/s of others' UDP on the way back of a 100 Mbit/s x 50 ms lab line: the
    download moved 43 against its train's 100 (weak: no pairs that way, and the upload's
    pairs disagreed), the transfer's rate was taken for the capacity and both ways read
    healthy at 0.95 with nothing said. The claim for both ways is as sure as the doubted
    one, and its doubt is shown."""
    ev = _evidence("lab-udp-60m-on-the-way-back-100m-50ms")
    v = diagnose(ev).verdict
    assert v.limiting_factor == "path-capacity" and v.host_to_fix is None
    assert v.confidence <= 0.85
    assert any(e.startswith("down: probe said") and "others' traffic" in e for e in v.evidence)


@pytest.mark.parametrize(
    "scenario",
    [
        # 60 Mbit/s of others' UDP on the way back of a 100 Mbit/s x 50 ms lab line: 39 of
        # 100 free (6 of 6 streams loaded); read a doubted `path-capacity` before.
        "lab-udp-60m-on-the-way-back-streams-back-100m-50ms",
        # Two BBR flows of others on the way back: 18 free, the download's 24 a share of
        # the rest; read a weak `congestion` before (and `policer` 0.98 before that).
        "lab-two-bbr-flows-on-the-way-back-streams-back-100m-50ms",
    ],
)
def test_others_on_the_way_back_measured_by_streams_sent_back(scenario: str) -> None:
    """A download that fell short has the available bandwidth measured that way (serve
    sends the streams): others' traffic on the way back reads `cross-traffic` for it."""
    ev = _evidence(scenario)
    assert ev.path is not None and ev.path.available is None
    av = ev.path.available_down
    assert av is not None and av.direction == "down" and av.loaded == av.streams
    v = diagnose(ev).verdict
    assert v.limiting_factor == "cross-traffic" and v.host_to_fix is None, v
    assert v.explanation.startswith("down:")


def test_a_bucket_on_the_way_back_is_no_traffic_of_others() -> None:
    """The streams sent back through a 20 Mbit/s bucket on a 100 Mbit/s x 40 ms line: the
    faster ones emptied it and the one sent again lost what a bucket loses, so the way back
    reads free, and the download `policer`."""
    ev = _evidence("lab-bbr-policed-way-back-streams-back-20m-of-100m-40ms")
    assert ev.path is not None
    av = ev.path.available_down
    assert av is not None and av.loaded == 0 and "token bucket" in av.note
    v = diagnose(ev).verdict
    assert v.limiting_factor == "policer" and v.explanation.startswith("down:"), v


def test_a_bucket_read_by_the_streams_sent_back_does_not_vouch_for_a_queue_free_way() -> None:
    """Two TCP flows of others on the way back of a 100 Mbit/s x 50 ms line: the stream
    sent again lost 23 % after passing whole (their sawtooth's drops), so the streams read a
    bucket and the way back free; the idle echoes' median stood 2 ms above their minimum, a
    queue no bucket makes. Read `policer` 0.98 when that reading vouched for the way."""
    ev = _evidence("lab-two-tcp-flows-on-the-way-back-read-as-a-bucket-100m-50ms")
    assert ev.path is not None and ev.path.rtt.p50 - ev.path.rtt.min > 1.0
    av = ev.path.available_down
    assert av is not None and av.emptied_bucket and av.free_share == 1.0
    v = diagnose(ev).verdict
    assert v.limiting_factor == "cross-traffic" and v.host_to_fix is None, v
