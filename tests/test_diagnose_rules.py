"""The verdict rules on synthetic evidence (the end-to-end scenario suite runs them on the lab).

Numbers are built from the laws the rules encode (window / RTT, Mathis), not copied from a run.
"""

from __future__ import annotations

import dataclasses
import math

import pytest

from tcpwizard.advice.capacity_view import capacity_view
from tcpwizard.advice.diagnose import Evidence, diagnose
from tcpwizard.advice.evidence import directions, settled_rwnd_limited
from tcpwizard.advice.model import Verdict
from tcpwizard.advice.ramp import still_ramping as _still_ramping
from tcpwizard.advice.rules import congestion
from tcpwizard.advice.streams import MAX_STREAMS
from tcpwizard.advice.window_law import mathis_mbps, window_limit_mbps
from tcpwizard.checks.model import Finding, Fix, HostAudit
from tcpwizard.measure.model import (
    CapacityEstimate,
    ModeResult,
    PathEstimate,
    TcpInfoSample,
    TransferSample,
)
from tcpwizard.measure.observe.handshake import HandshakeFacts
from tests.model_builders import TUNED, audit, far_path, fixes, mode, path, samples, transfer_of


def test_healthy_path_is_path_capacity_without_fixes() -> None:
    ev = Evidence(
        audit(), audit(), path(50, 100), transfer_of(mode(94.0)), fixes("net.ipv4.tcp_rmem")
    )
    d = diagnose(ev)

    v = d.verdict
    assert v.limiting_factor == "path-capacity"
    assert d.fixes == ()
    assert v.confidence >= 0.8


def test_small_receiver_buffer_names_the_peer_for_uploads() -> None:
    small = audit(**{"net.ipv4.tcp_rmem": "4096 65536 262144"})
    rtt = 50.0
    got = window_limit_mbps(262144 * 0.5, rtt)
    ev = Evidence(
        audit(),
        small,
        path(rtt, 100),
        transfer_of(mode(got, rwnd=0.9)),
        peer_fixes=fixes("net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"),
    )
    d = diagnose(ev)

    v = d.verdict
    assert v.limiting_factor == "receiver-window"
    assert v.host_to_fix == "peer"
    assert [f.key for f in d.fixes] == ["net.ipv4.tcp_rmem"]
    assert v.wizard_gap.current_mbps == pytest.approx(got)
    assert v.wizard_gap.tuned_mbps == pytest.approx(100)


def test_download_receiver_is_local() -> None:
    small = audit(**{"net.ipv4.tcp_rmem": "4096 65536 262144"})
    ev = Evidence(small, audit(), path(50, 100), transfer_of(mode(20, direction="down", rwnd=0.8)))
    d = diagnose(ev)

    v = d.verdict
    assert (v.limiting_factor, v.host_to_fix) == ("receiver-window", "local")


def test_sender_buffer() -> None:
    ev = Evidence(
        audit(**{"net.ipv4.tcp_wmem": "4096 16384 131072"}),
        audit(),
        path(50, 100),
        transfer_of(mode(10, snd=0.85)),
        fixes("net.ipv4.tcp_wmem"),
    )
    d = diagnose(ev)

    v = d.verdict
    assert (v.limiting_factor, v.host_to_fix) == ("sender-buffer", "local")
    assert d.fixes and d.fixes[0].key == "net.ipv4.tcp_wmem"


def test_small_send_buffer_carries_one_gso_skb_beyond_itself() -> None:
    """A 49 KB tcp_wmem max at the far end, 4.3 ms from us: the window law says ~66 Mbit/s,
    the download moved 106, twice the loss bound of its retransmissions, with no
    sndbuf_limited time (the sender was cwnd-limited now and then). One 64 KB skb beyond
    the buffer is 188 Mbit/s at that RTT: the rate sits inside the buffer's range, so the
    buffer, not the losses."""
    small = audit(**{"net.ipv4.tcp_wmem": "4096 16384 50064"})
    down = mode(106.0, direction="down", retrans=110, nbytes=40_000_000, cc="reno")
    ev = Evidence(audit(), small, path(4.27, 440), transfer_of(mode(420.0), down))
    v = diagnose(ev).verdict
    assert (v.limiting_factor, v.host_to_fix) == ("sender-buffer", "peer")
    assert v.confidence >= 0.75
    assert any("MB in flight" in e for e in v.evidence)


def test_a_few_losses_do_not_hold_bbr_down_its_receive_window_does() -> None:
    """Our tcp_rmem max is 20 KB; the far end's BBR download moved 14.9 Mbit/s of 70 at
    5.3 ms, window-limited 42 % of the time, with 0.7 % of its segments retransmitted.
    Reno's loss bound at that loss is 31 Mbit/s, but BBR does not back off on loss below
    2 %: the window, not the losses."""
    small = audit(**{"net.ipv4.tcp_rmem": "4096 16384 19998"})
    down = mode(14.9, direction="down", rwnd=0.425, retrans=7, nbytes=1_362_568, cc="bbr")
    ev = Evidence(small, audit(), path(5.3, 70), transfer_of(mode(65.0), down))
    v = diagnose(ev).verdict
    assert (v.limiting_factor, v.host_to_fix) == ("receiver-window", "local")
    reno = dataclasses.replace(down, congestion_control="reno", rwnd_limited=0.0)
    lossy = Evidence(audit(), audit(), path(5.3, 70), transfer_of(mode(65.0), reno))
    assert diagnose(lossy).verdict.limiting_factor == "congestion"  # Reno's bound holds


def test_the_slower_way_speaks_however_sure_the_other_way_is() -> None:
    """Both ways held by this host's buffers: the upload at 5 of 100 Mbit/s by its send
    buffer, the download at 60 by its receive buffer. The upload is the limit a user meets
    first; the download's window, named more surely, is not the one factor."""
    both = audit(
        **{"net.ipv4.tcp_wmem": "4096 16384 32768", "net.ipv4.tcp_rmem": "4096 65536 262144"}
    )
    up = mode(5.0, snd=0.6)
    down = mode(60.0, direction="down", rwnd=0.95)
    v = diagnose(Evidence(both, audit(), path(20, 100), transfer_of(up, down))).verdict
    assert (v.limiting_factor, v.host_to_fix) == ("sender-buffer", "local")
    alike = mode(55.0, snd=0.6)  # within the healthy share of each other: the surer one
    v = diagnose(Evidence(both, audit(), path(20, 100), transfer_of(alike, down))).verdict
    assert v.limiting_factor == "receiver-window"


def test_window_scaling_off_at_receiver_beats_receiver_window() -> None:
    ws_off = audit(**{"net.ipv4.tcp_window_scaling": "0"})
    ceiling = window_limit_mbps(65535, 50)
    ev = Evidence(audit(), ws_off, path(50, 100), transfer_of(mode(ceiling * 0.95, rwnd=0.9)))
    d = diagnose(ev)

    v = d.verdict
    assert (v.limiting_factor, v.host_to_fix) == ("window-scaling", "peer")


def test_window_scaling_off_on_a_short_path_is_not_the_limit() -> None:
    ws_off = audit(**{"net.ipv4.tcp_window_scaling": "0"})
    ev = Evidence(audit(), ws_off, path(1, 100), transfer_of(mode(95)))
    assert diagnose(ev).verdict.limiting_factor == "path-capacity"


def test_loss_with_reno_is_congestion() -> None:
    loss = 0.02
    bound = mathis_mbps(1448, 52, loss)
    assert bound is not None
    nbytes = 2_000_000
    retrans = int(loss * nbytes / 1448)
    ev = Evidence(
        audit(),
        audit(),
        path(52, 90, loss_pct=2.0),
        transfer_of(mode(bound, retrans=retrans, nbytes=nbytes, cc="reno")),
        fixes("net.ipv4.tcp_congestion_control", "net.core.default_qdisc", "net.ipv4.tcp_rmem"),
    )
    d = diagnose(ev)

    v = d.verdict
    assert (v.limiting_factor, v.host_to_fix) == ("congestion", "local")
    keys = {f.key for f in d.fixes}
    assert keys == {"net.ipv4.tcp_congestion_control", "net.core.default_qdisc", "streams"}
    assert "BBR" in v.explanation
    # The work-around: N loss-bound streams reach the 90 Mbit/s path (advice/streams.py).
    streams = next(f for f in d.fixes if f.key == "streams")
    n = int(streams.value)
    assert n == min(MAX_STREAMS, math.ceil(90 / bound))
    assert f"iperf3 -c HOST -P {n}" in streams.command and f"bbcp -s {n}" in streams.command


def test_lossy_path_where_bbr_keeps_the_rate_is_healthy() -> None:
    ev = Evidence(audit(), audit(), path(52, 90, 2.0), transfer_of(mode(80, retrans=900)))
    assert diagnose(ev).verdict.limiting_factor == "path-capacity"


def test_cached_ssthresh() -> None:
    sender = HostAudit(
        "h",
        "6.18",
        (
            Finding(
                "tcp_metrics_cached",
                "warn",
                "cached ssthresh 10 for 10.0.0.2",
                "no cached ssthresh",
                "stale",
                "Section 5",
            ),
        ),
        "reno",
        tuple(TUNED.items()),
    )
    ev = Evidence(
        sender,
        audit(),
        path(100, 100),
        transfer_of(mode(15, cc="reno")),
        fixes("net.ipv4.tcp_no_metrics_save"),
    )
    d = diagnose(ev)

    v = d.verdict
    assert (v.limiting_factor, v.host_to_fix) == ("cached-metrics", "local")


def test_idle_sender_is_application() -> None:
    ev = Evidence(audit(), audit(), path(50, 100), transfer_of(mode(20, busy=0.3)))
    assert diagnose(ev).verdict.limiting_factor == "application"


def test_measured_tuned_mode_is_the_wizard_gap() -> None:
    small = audit(**{"net.ipv4.tcp_rmem": "4096 65536 262144"})
    ev = Evidence(
        audit(), small, path(50, 100), transfer_of(mode(20, rwnd=0.9), mode(93, name="drs"))
    )
    gap = diagnose(ev).verdict.wizard_gap
    assert (gap.current_mbps, gap.tuned_mbps, gap.measured) == (20, 93, True)
    assert gap.tuned_mode == "drs"


def test_the_tuned_side_is_the_best_measured_mode_never_a_lower_one() -> None:
    """DRS slower than static: the gap's tuned side is static's rate, named so; a healthy
    path whose tuned modes were all slower than autotune shows autotune's rate as tuned."""
    small = audit(**{"net.ipv4.tcp_rmem": "4096 65536 262144"})
    modes = (mode(20, rwnd=0.9), mode(60, name="drs"), mode(88, name="static"))
    gap = diagnose(Evidence(audit(), small, path(50, 100), transfer_of(*modes))).verdict.wizard_gap
    assert (gap.tuned_mbps, gap.tuned_mode) == (88, "static")
    healthy = transfer_of(mode(94), mode(80, name="drs"))
    gap = diagnose(Evidence(audit(), audit(), path(50, 100), healthy)).verdict.wizard_gap
    assert gap.tuned_mbps is not None and gap.current_mbps is not None
    assert gap.tuned_mbps >= gap.current_mbps and gap.tuned_mode == "autotune"


def test_audit_only_is_unknown() -> None:
    v = diagnose(Evidence(audit())).verdict
    assert v.limiting_factor == "unknown"


def test_missing_peer_lowers_confidence() -> None:
    small = audit(**{"net.ipv4.tcp_rmem": "4096 65536 262144"})
    with_peer = diagnose(
        Evidence(small, audit(), path(50, 100), transfer_of(mode(20, "autotune", "down", rwnd=0.9)))
    )
    without = diagnose(
        Evidence(small, None, path(50, 100), transfer_of(mode(20, "autotune", "down", rwnd=0.9)))
    )
    assert without.verdict.confidence < with_peer.verdict.confidence
    assert any("missing" in e for e in without.verdict.evidence)


def test_peerless_prediction_from_the_local_window() -> None:
    small = audit(**{"net.ipv4.tcp_rmem": "4096 65536 1048576"})
    v = diagnose(Evidence(small, None, path(100, 500))).verdict
    assert (v.limiting_factor, v.host_to_fix) == ("receiver-window", "local")
    assert v.confidence < 0.5  # a prediction without a peer
    # 62 % of the 1 MiB buffer is advertised once the connection runs (checks/window.py).
    assert v.wizard_gap.current_mbps == pytest.approx(
        window_limit_mbps(0.62 * 1048576, 100), rel=1e-5
    )
    assert v.wizard_gap.measured is False


def test_a_prediction_never_says_healthy() -> None:
    # Buffers that allow the capacity are no proof: without a transfer nothing is healthy.
    v = diagnose(Evidence(audit(), None, path(10, 100))).verdict
    assert v.limiting_factor == "unknown"
    assert v.explanation.startswith("not measured")
    assert "missing: no test transfer" in v.evidence


def _handshake(scaling: bool) -> HandshakeFacts:
    return HandshakeFacts(scaling, 7 if scaling else None, True, True, 1448, 50_000, port=22)


def test_far_end_without_window_scaling_from_the_handshake_is_predicted() -> None:
    ev = Evidence(audit(), None, path(50, 100), peer_handshake=_handshake(False))
    v = diagnose(ev).verdict
    assert (v.limiting_factor, v.host_to_fix) == ("window-scaling", "peer")
    assert "missing: no test transfer" in v.evidence
    assert any("handshake" in e for e in v.evidence)
    assert not ev.measured and v.confidence < 0.5


def test_handshake_with_scaling_names_nothing_at_the_far_end() -> None:
    ev = Evidence(audit(), None, path(50, 100), peer_handshake=_handshake(True))
    assert diagnose(ev).verdict.limiting_factor != "window-scaling"


def test_window_scaling_refused_in_handshake_explains_a_measured_slow_upload() -> None:
    # 64 KB / 50 ms = 10.5 Mbit/s: an upload at that ceiling to an unaudited far end.
    ev = Evidence(
        audit(), None, path(50, 100), transfer_of(mode(10.2)), peer_handshake=_handshake(False)
    )
    v = diagnose(ev).verdict
    assert (v.limiting_factor, v.host_to_fix) == ("window-scaling", "peer")
    assert v.confidence >= 0.7
    assert any("handshake" in e for e in v.evidence)


def test_short_test_still_ramping_is_not_blamed_on_the_hosts() -> None:
    # 1.5 s on a 100 ms path: slow start is a large share; a burst of slow-start losses.
    ev = Evidence(
        audit(), audit(), path(100, 100), transfer_of(mode(50, retrans=40, nbytes=9_000_000))
    )
    v = diagnose(ev).verdict
    assert v.limiting_factor == "path-capacity"
    assert rule_confidence(v) < 0.5  # the rule's own; the matrix weighs what it is worth


def test_burst_losses_far_above_mathis_are_weak() -> None:
    ev = Evidence(
        audit(), audit(), path(100, 100), transfer_of(mode(50, retrans=400, nbytes=9_000_000))
    )
    v = diagnose(ev).verdict
    assert v.limiting_factor != "congestion"


def test_receive_autotuning_off_limits_the_window_to_the_default() -> None:
    off = audit(**{"net.ipv4.tcp_moderate_rcvbuf": "0"})
    v = diagnose(Evidence(off, None, path(50, 100))).verdict
    assert (v.limiting_factor, v.host_to_fix) == ("receiver-window", "local")


def test_all_modes_failed_is_judged_like_no_transfer() -> None:
    failed = ModeResult("autotune", "up", 1, 0, 0.0, 0.0, 0, 0, (), error="serve refused")
    small = audit(**{"net.ipv4.tcp_rmem": "4096 65536 1048576"})
    v = diagnose(Evidence(small, None, path(100, 500), transfer_of(failed))).verdict
    assert v.limiting_factor == "receiver-window"
    assert "no path was measured" not in v.explanation


def test_a_healthy_way_back_does_not_speak_for_a_slow_way_out() -> None:
    """check measures both ways: Reno into a shallow queue crawls up (its losses come in
    bursts, so the congestion rule is only weakly sure) while BBR back is healthy. The
    verdict is about the slow way, and so is the wizard gap."""
    mss, rtt = 1448, 50
    loss_bytes = 6_000_000
    up = _flat(mode(15.0, retrans=30, nbytes=loss_bytes, cc="reno"))
    down = mode(94.0, direction="down")
    ev = Evidence(audit(), audit(), path(rtt, 100), transfer_of(up, down))
    v = diagnose(ev).verdict
    bound = mathis_mbps(mss, rtt, 30 * mss / loss_bytes)
    assert bound is not None and bound < 15.0 / 3  # a burst by Mathis: weak on its own
    assert (v.limiting_factor, v.host_to_fix) == ("congestion", "local")
    assert v.wizard_gap.current_mbps == pytest.approx(15.0)


def test_an_unexplained_slow_way_is_unknown_not_healthy() -> None:
    up = _flat(mode(30.0))  # no chrono limit, no loss, tuned buffers, no longer ramping
    down = mode(94.0, direction="down")
    v = diagnose(Evidence(audit(), audit(), path(50, 100), transfer_of(up, down))).verdict
    assert v.limiting_factor == "unknown"
    assert any(e.startswith("up: autotune 30.0 Mbit/s") for e in v.evidence)


def test_each_way_is_judged_against_its_own_capacity() -> None:
    """An asymmetric path (100 Mbit/s out, 10 back) reaching both rates is healthy."""
    p = path(50, 100)
    asym = PathEstimate(
        p.rtt,
        p.capacity,
        p.bdp_bytes,
        1.0,
        "10.0.0.2",
        5301,
        True,
        capacity_down=CapacityEstimate(10.0, "train", 0.9),
    )
    ev = Evidence(audit(), audit(), asym, transfer_of(mode(95.0), mode(9.6, direction="down")))
    assert diagnose(ev).verdict.limiting_factor == "path-capacity"


def _flat_reno(retrans_at: list[int]) -> ModeResult:
    """3 s of Reno at a flat 15 Mbit/s on a 100 Mbit/s path, with the sender's cumulative
    retransmissions per 0.25 s sample as given; the smoothed RTT 8 ms above the idle 50 in
    each interval that lost segments (a drop-tail queue is full when it drops), at idle in
    the others."""
    infos = [
        TcpInfoSample(58_000 if r > was else 50_000, 1000, 60, r, 0, 0, 0, 0, 1448)
        for was, r in zip([0, *retrans_at], retrans_at, strict=False)
    ]
    m = mode(15.0, retrans=retrans_at[-1], nbytes=5_600_000, cc="reno")
    return dataclasses.replace(
        m, samples=samples([15.0] * len(retrans_at), infos, dt=0.25, buf=1 << 20)
    )


def test_losses_that_go_on_after_the_ramp_are_congestion() -> None:
    """Reno into a shallow drop-tail queue: each overflow loses several packets, so the rate
    sits well above Mathis's per-packet bound, yet the losses keep coming and the rate stays
    flat. That is the congestion controller's limit, not a short test."""
    late = _flat_reno([4, 4, 6, 6, 8, 8, 10, 10, 12, 14, 16, 20])
    v = diagnose(Evidence(audit(), audit(), path(50, 100), transfer_of(late))).verdict
    assert (v.limiting_factor, v.host_to_fix) == ("congestion", "local")
    assert rule_confidence(v) >= 0.7  # the rule's own; the matrix weighs what it is worth
    assert any("repeated loss events" in e for e in v.evidence)
    # The same flat rate and losses with the RTT at idle throughout, at 15 % of the line:
    # no queue filled, far below any Reno sawtooth and far above the loss bound, a bucket.
    idle = dataclasses.replace(
        late,
        samples=tuple(
            dataclasses.replace(x, tcp_info=dataclasses.replace(x.tcp_info, rtt_us=50_000))
            for x in late.samples
            if x.tcp_info is not None
        ),
    )
    v3 = diagnose(Evidence(audit(), audit(), path(50, 100), transfer_of(idle))).verdict
    assert v3.limiting_factor == "policer"
    early = _flat_reno([20] * 12)  # every loss in slow start: a burst, weakly blamed
    v2 = diagnose(Evidence(audit(), audit(), path(50, 100), transfer_of(early))).verdict
    assert rule_confidence(v2) < 0.5


def rule_confidence(v: Verdict) -> float:
    """A verdict's confidence before the scenario matrix's table weighed it."""
    return v.basis.rule_confidence if v.basis else v.confidence


def test_the_same_limit_both_ways_is_fixed_on_both_hosts() -> None:
    """Both hosts keep the stock 4 MB tcp_wmem max on a 1 Gbit/s x 100 ms path: each way is
    held by its own sender, so the verdict names both hosts and both hosts' fixes."""
    small = audit(**{"net.ipv4.tcp_wmem": "4096 16384 4194304"})
    up = mode(230.0, snd=0.6)
    down = mode(235.0, direction="down", snd=0.6)
    peer_fix = Fix(
        "net.ipv4.tcp_wmem",
        "sysctl",
        "peer",
        "net.ipv4.tcp_wmem",
        "x",
        "sysctl -w",
        answers=("sender-buffer",),
    )
    ev = Evidence(
        small,
        small,
        path(100, 1000),
        transfer_of(up, down),
        fixes("net.ipv4.tcp_wmem"),
        (peer_fix,),
    )
    d = diagnose(ev)
    assert (d.verdict.limiting_factor, d.verdict.host_to_fix) == ("sender-buffer", "both")
    assert {f.host for f in d.fixes} == {"local", "peer"}
    assert any(e.startswith("down: ") or e.startswith("up: ") for e in d.verdict.evidence)


def _flat(m: ModeResult) -> ModeResult:
    """The same transfer with 12 samples at its average rate: it had settled, not ramping."""
    flat = samples([m.throughput_mbps] * 12, dt=0.25, buf=1 << 20)
    return dataclasses.replace(m, samples=flat)


def test_a_test_still_ramping_at_its_end_is_not_blamed_on_the_hosts() -> None:
    """Nothing limited the sender, the windows allow the capacity and the rate was still
    climbing: a short test on a long path, whatever the other way did."""
    rising = samples([2.0 * 1.3**i for i in range(12)], dt=0.25, buf=1 << 20)
    up = dataclasses.replace(mode(30.0), samples=rising)
    v = diagnose(
        Evidence(audit(), audit(), path(200, 100), transfer_of(up, mode(94.0, direction="down")))
    )
    assert v.verdict.limiting_factor == "path-capacity"
    assert "ramping" in v.verdict.explanation


def test_no_capacity_and_no_transfer_is_unknown() -> None:
    """UDP blocked and no transfer: nothing to judge a direction by, and nothing crashes."""
    p = path(50, 100)
    blind = PathEstimate(p.rtt, None, None, 1.0, "10.0.0.2", 5301, True)
    v = diagnose(Evidence(audit(), audit(), blind, None)).verdict
    assert v.limiting_factor == "unknown"


def test_healthy_both_ways_speaks_for_up_and_shows_down() -> None:
    ev = Evidence(
        audit(), audit(), path(50, 100), transfer_of(mode(90.0), mode(96.0, direction="down"))
    )
    v = diagnose(ev).verdict
    assert v.limiting_factor == "path-capacity"
    assert v.explanation.startswith("up: ")
    assert any(e.startswith("down: autotune moved 96.0") for e in v.evidence)


def test_a_peerless_guess_never_excuses_window_scaling_off() -> None:
    """A SYN-pair capacity that reads far too low must not make 64 KB look enough."""
    guess = dataclasses.replace(
        path(50, 7),
        peer=False,
        capacity=CapacityEstimate(7.0, "peerless-tcp-syn-pairs", 0.2),
    )
    ev = Evidence(audit(), None, guess, peer_handshake=_handshake(False))
    assert diagnose(ev).verdict.limiting_factor == "window-scaling"


@pytest.mark.parametrize("scaling", [False, True])
def test_an_unscaled_window_keeps_a_transfer_at_its_law_from_speaking_for_the_path(
    scaling: bool,
) -> None:
    """iperf3 far end, scaling refused: 64 KB / 50 ms = 10.5 Mbit/s and the upload moved 9.4.
    The kernel's receive-window chronograph counted 10 % (it stops whenever TSQ ends a send
    round first), so only the window law can say the window may have held it."""
    guess = dataclasses.replace(
        path(50, 100),
        peer=False,
        capacity=CapacityEstimate(100.0, "peerless-tcp-syn-pairs", 0.2),
    )
    ev = Evidence(
        audit(), None, guess, transfer_of(mode(9.4, rwnd=0.1)), peer_handshake=_handshake(scaling)
    )
    v = diagnose(ev).verdict
    if scaling:  # a window that allowed more: the transfer's rate is the path's
        assert v.limiting_factor == "path-capacity"
    else:
        assert (v.limiting_factor, v.host_to_fix) == ("window-scaling", "peer")


def test_a_loss_recoverys_burst_at_the_end_is_not_a_ramp() -> None:
    # A healthy BBR transfer into a one-BDP queue: every loss leaves the receiver a round
    # trip with nothing in order, then the held data at once (319 Mbit/s on a 100 Mbit/s
    # path). The sender's TCP_INFO delivery rate stays at the path's rate throughout.
    goodput = [1, 3, 8, 16, 32, 65, 96, 97, 62, 0, 223, 74, 93, 0, 25, 234, 79, 70, 0, 49, 319]
    delivery = [1, 2, 3, 8, 16, 32, 65, 94, 96, 97, 97, 97, 74, 84, 97, 97, 42, 62, 82, 101, 101]
    infos = [TcpInfoSample(100_000, 1000, 900, 0, int(r * 1e6), 0, 0, 0, 1448) for r in delivery]
    sent = samples(goodput, infos, buf=4 << 20)
    m = dataclasses.replace(mode(67.0, nbytes=17_000_000), samples=sent, seconds=2.1)
    assert not _still_ramping(m)
    # Without the sender's view the goodput's medians still see no climb.
    bare = dataclasses.replace(m, samples=samples(goodput, buf=4 << 20))
    assert not _still_ramping(bare)
    ramp = dataclasses.replace(m, samples=sent[:9])  # cut in slow start: still climbing
    assert _still_ramping(ramp)


def test_a_climb_its_drain_hides_is_still_a_ramp() -> None:
    """A rate still climbing when the writer stopped, then its drain's collapse: the
    collapse is read out (as the settled rate reads it), and the climb before it remains."""
    climb = [5.0, 28, 33, 71, 110, 112, 123, 143, 148, 158, 172, 202]
    drained = samples([*climb, 48, 25, 0], dt=0.1, buf=1 << 20)
    m = dataclasses.replace(mode(103.0), samples=drained, write_s=1.2)
    assert _still_ramping(m)
    # Without the writer's stop the collapse is the transfer's own: no climb in its last quarter.
    assert not _still_ramping(dataclasses.replace(m, write_s=None))


def test_a_window_held_below_a_buffer_that_allows_the_path_is_not_the_buffer() -> None:
    """The sender waited for the receiver's window 85 % of the time, but the receiver's 32 MB
    tcp_rmem allows the 100 Mbit/s x 50 ms path many times over: data left unread held the
    window, and a larger buffer would change nothing. With the receiver's process measured
    held off the CPU, that is the verdict; without it the buffer is named only weakly."""
    from tcpwizard.measure.observe.hostload import HostLoad

    slow = mode(4.0, rwnd=0.85)
    v = diagnose(Evidence(audit(), audit(), path(50, 100), transfer_of(slow))).verdict
    assert v.limiting_factor != "receiver-window" or v.confidence < 0.4
    # The window law's 3,328 Mbit/s is a bound, shown as one: no figure above the line.
    allows = [e for e in v.evidence if "buffer allows" in e]
    assert allows and all("more than the 100.0 Mbit/s capacity" in e for e in allows), allows
    starved = HostLoad(4.0, (), 0.003, 0.003, 0.3)
    held = dataclasses.replace(slow, receiver_load=starved)
    v = diagnose(Evidence(audit(), audit(), path(50, 100), transfer_of(held))).verdict
    assert (v.limiting_factor, v.host_to_fix) == ("host-cpu", "peer")
    small = audit(**{"net.ipv4.tcp_rmem": "4096 65536 262144"})
    v = diagnose(Evidence(audit(), small, path(50, 100), transfer_of(slow))).verdict
    assert (v.limiting_factor, v.host_to_fix) == ("receiver-window", "peer")
    assert v.confidence >= 0.7
    # An application that fixed SO_RCVBUF stopped autotuning: tcp_rmem is no ceiling of
    # its buffer, so the window counter names the buffer whatever the sysctl allows.
    fixed = dataclasses.replace(slow, rcv_autotuning=False)
    v = diagnose(Evidence(audit(), audit(), path(50, 100), transfer_of(fixed))).verdict
    assert (v.limiting_factor, v.host_to_fix) == ("receiver-window", "peer")
    assert v.confidence >= 0.7


def test_a_tuned_transfer_a_starved_far_end_held_is_no_capacity() -> None:
    """Without a probe (serve too starved of CPU to answer it, scenario matrix 20261127.134)
    a forced DRS upload the starved receiver held to 4.2 Mbit/s, its window shut 69 % of the
    time, is not the path's capacity: the download carried 42 Mbit/s. The far end's CPU,
    not a healthy path, is the verdict."""
    from tcpwizard.measure.observe.hostload import HostLoad

    starved = HostLoad(5.1, (), 0.004, 0.0, 0.68)
    up = dataclasses.replace(
        mode(4.2, name="drs", rwnd=0.69, nbytes=2_100_000),
        forced=True,
        rcv_autotuning=False,
        receiver_load=starved,
    )
    down = dataclasses.replace(
        mode(42.0, direction="down", busy=0.15, nbytes=31_000_000),
        sender_load=dataclasses.replace(starved, starved=0.44),
    )
    v = diagnose(Evidence(audit(), None, None, transfer_of(up, down))).verdict
    assert (v.limiting_factor, v.host_to_fix) == ("host-cpu", "peer")
    # The same upload with nothing holding it does speak for the path.
    free = dataclasses.replace(up, rwnd_limited=0.0, receiver_load=None)
    ev = Evidence(audit(), None, None, transfer_of(free, down))
    assert capacity_view(ev, directions(ev)[0])[0] == pytest.approx(4.2)


def _stalled_in(rates: list[float], stalls_ms: list[float], rtt_ms: float) -> ModeResult:
    """A BBR download sampled every 0.25 s at `rates`, waiting for the receive window
    `stalls_ms` of each interval (TCP_INFO's cumulative counters)."""
    got, busy, rwnd, delivered = [], 0, 0, 0
    for i, (r, st) in enumerate(zip(rates, stalls_ms, strict=True)):
        busy += 250_000
        rwnd += round(st * 1e3)
        delivered += round(r * 1e6 / 8 * 0.25)
        ti = TcpInfoSample(round(rtt_ms * 1e3), 100, 400, 0, round(r * 1e6), busy, rwnd, 0, 1448)
        got.append(TransferSample(0.25 * (i + 1), r, 0, 0, tcp_info=ti, delivered_bytes=delivered))
    nbytes = delivered
    return ModeResult(
        "autotune", "down", 1, nbytes, 0.25 * len(rates), nbytes * 8 / 0.25 / len(rates) / 1e6,
        4_000_000, 0, tuple(got), rwnd / busy, 0.0, 1.0, "bbr",
    )  # fmt: skip


def test_a_window_that_held_only_the_ramp_does_not_hold_the_settled_rate() -> None:
    """BBR down a 45.8 Mbit/s x 136 ms path (matrix 20261128.73): receive-window limited 20 %
    of the transfer, all of it while autotuning grew the window behind startup, none once
    the rate had settled at the path's. The receiver's buffer allows the path, so the
    transfer speaks for it: `path-capacity`, not a buffer fix that would change nothing.
    Stalls that go on in the settled half still keep it from speaking for the path."""
    rates = [5.0, 15.0, 30.0, 36.0, 37.0, 37.5, 38.0, 37.5, 38.0, 37.5, 38.0, 37.5]
    ramp = _stalled_in(rates, [150.0, 150.0, 150.0, 150.0, 0, 0, 0, 0, 0, 0, 0, 0], 136.0)
    assert ramp.rwnd_limited == pytest.approx(0.2)
    assert settled_rwnd_limited(ramp) == 0.0
    # The download's capacity from a train the far end sent (a weaker estimate, 0.6).
    both = dataclasses.replace(
        path(136, 45.8), capacity_down=CapacityEstimate(45.8, "train (down)", 0.6)
    )
    up = mode(44.0)
    v = diagnose(Evidence(audit(), audit(), both, transfer_of(up, ramp))).verdict
    assert v.limiting_factor == "path-capacity", v
    held = _stalled_in(rates, [0, 0, 0, 0, 0, 0, 100.0, 100.0, 100.0, 100.0, 100.0, 100.0], 136.0)
    assert settled_rwnd_limited(held) == pytest.approx(0.4)
    v = diagnose(Evidence(audit(), audit(), both, transfer_of(up, held))).verdict
    assert v.limiting_factor != "path-capacity", v


def test_a_check_whose_transfers_all_failed_says_why_not_as_measured() -> None:
    """serve accepted the connection but never answered (a far end starved of CPU, scenario
    matrix 20261127.57): `unknown`, naming what stopped the transfers."""
    why = "serve at b did not answer in time"
    failed = ModeResult("autotune", "up", 1, 0, 0.0, 0.0, 0, 0, (), error=why)
    ev = Evidence(audit(), None, path(30.0, 1000.0), transfer_of(failed))
    v = diagnose(ev).verdict
    assert v.limiting_factor == "unknown"
    assert v.explanation.startswith("not measured: every test transfer failed (serve at b")
    assert "missing: serve at b did not answer in time" in v.evidence


def _held_and_lossy() -> Evidence:
    """BBR through a 16 KB receive window at ~2.7 % loss over 3.1 ms: the window law and
    BBR's loss bound both near 25 Mbit/s; the sender was receive-window limited 53 % of the
    time."""
    small = audit(**{"net.ipv4.tcp_rmem": "4096 16384 16384"})
    up = _flat(mode(21.1, rwnd=0.53, retrans=193, nbytes=10_550_000))
    return Evidence(audit(), small, path(3.1, 101), transfer_of(up))


def test_a_sender_a_window_held_most_of_the_time_is_the_windows_not_its_losses() -> None:
    v = diagnose(_held_and_lossy()).verdict
    assert (v.limiting_factor, v.host_to_fix) == ("receiver-window", "peer")


def test_without_the_window_share_the_loss_bound_names_congestion(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The control: the same evidence with the window's share ignored reads as loss — on
    the path, as the sender paces (BBR): no host setting removes those losses."""
    monkeypatch.setattr(congestion, "WINDOW_HELD_SHARE", 1.01)
    v = diagnose(_held_and_lossy()).verdict
    assert (v.limiting_factor, v.host_to_fix) == ("congestion", "path")


def test_the_capacity_is_never_below_what_a_faster_mode_delivered() -> None:
    """A weak probe (bunched arrivals) yields to a transfer nothing held back, but not below
    what another mode delivered: a DRS upload that spoke for the path at 1.7 Gbit/s beside
    an autotuned one at 4.4 that a window held read "moved 4.11 Gbit/s of 1.73 Gbit/s
    capacity" (scenario matrix 20261230.173)."""
    weak = dataclasses.replace(
        path(2.9, 4640.0),
        capacity=CapacityEstimate(4640.0, "train", 0.5, limited_by="coalescing"),
    )
    drs = mode(1700.0, name="drs")
    held = mode(4360.0, rwnd=0.6)
    ev = Evidence(audit(), audit(), weak, transfer_of(held, drs))
    cap, how = capacity_view(ev, directions(ev)[0])
    assert cap is not None and cap >= 4360.0
    assert "autotune, its bytes delivered" in how
    # Without the faster mode the one that spoke sets it.
    alone = Evidence(audit(), audit(), weak, transfer_of(drs))
    assert capacity_view(alone, directions(alone)[0])[0] == pytest.approx(1700.0, rel=0.05)


def test_a_peerless_guess_does_not_call_a_window_held_upload_healthy() -> None:
    """An iperf3 far end whose 256 KB tcp_rmem held the upload at 15 Mbit/s of an 80
    Mbit/s x 60 ms path (21.2 once up to speed), receive-window limited 30 % of the time;
    SYN pairs guessed 23.5
    Mbit/s (`path-capacity` at 0.72 in the lab). The guess cannot outweigh the sender's
    own counters; with no window holding the sender it still speaks."""
    guess = CapacityEstimate(23.5, "peerless-tcp-syn-pairs", 0.35)
    held = mode(21.2, rwnd=0.3)  # 21.2 Mbit/s once up to speed: 0.9 of the guess
    ev = Evidence(audit(), None, far_path(guess), transfer_of(held))
    v = diagnose(ev).verdict
    assert v.limiting_factor == "receiver-window" and v.host_to_fix == "peer", v
    free = mode(21.0, rwnd=0.02)
    v = diagnose(Evidence(audit(), None, far_path(guess), transfer_of(free))).verdict
    assert v.limiting_factor == "path-capacity", v


def test_the_way_outs_estimate_confirms_the_way_backs_train() -> None:
    """A down train (0.6, no pairs) that agrees within AGREE with a confident up estimate
    takes its confidence; a way back that differs (an asymmetric line) or an estimate that
    flagged its own limit stays as measured."""
    from tcpwizard.advice.evidence import corroborated

    up = CapacityEstimate(50.0, "capprobe-pairs+train", 0.9)
    down = CapacityEstimate(50.4, "train (down)", 0.6)
    confirmed = corroborated(down, up)
    assert confirmed.confidence == 0.9 and confirmed.mbps == 50.4
    assert "agrees with the way out's 50.0 Mbit/s" in confirmed.note
    assert corroborated(CapacityEstimate(10.0, "train (down)", 0.6), up).confidence == 0.6
    limited = dataclasses.replace(up, limited_by="sender")
    assert corroborated(down, limited).confidence == 0.6
    assert corroborated(down, dataclasses.replace(up, confidence=0.5)).confidence == 0.6
    assert corroborated(down, None) is down
