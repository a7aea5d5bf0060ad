"""One engine for both views: a situation told natively as a live connection's TCP_INFO
(`conns`) and as one direction of a capture (`check --pcap`) becomes an Observation the one
ladder judges alike, and both judges' public functions name the same factor."""

from __future__ import annotations

import dataclasses

import pytest

from tcpwizard.advice import ladder
from tcpwizard.advice.capture import judge_direction
from tcpwizard.advice.conns import judge
from tcpwizard.advice.observation import WSCALE_KEY, from_capture, from_conn
from tcpwizard.measure.observe.capture import FlowDirection, SynOptions
from tcpwizard.measure.observe.conns import ConnObservation
from tests.capture_data import flow
from tests.conns_data import SYSCTLS, obs

SENDER, RECEIVER = "10.0.0.1", "10.0.0.2"  # the capture's two ends (tests/capture_data.py)
FREE = dict(window_full_share=0.0, max_window=6_000_000, window_p50=6_000_000)
LOSSY_CONN = dict(send_mbps=2.0, delivery_rate_mbps=2.0, retransmits=20, congestion_control="cubic")
LOSSY_FLOW = dict(
    FREE,
    steady_mbps=2.0,
    retransmits=100,
    retransmitted_bytes=150_000,
    loss_episodes=6,
    late_loss_episodes=3,
)
RECEIVING = dict(send_mbps=0.01, recv_mbps=20.0, rcv_rtt_ms=30.2)

# (factor, host, the connection, the captured flow, the capture's local end)
CASES: dict[str, tuple[str, str | None, ConnObservation, FlowDirection, str]] = {
    "path-capacity": ("path-capacity", None, obs(), flow(**FREE, rtt_p50_ms=80.0), SENDER),
    "receiver-window": (
        "receiver-window",
        "peer",
        obs(rwnd_limited=0.4, busy=0.9),
        flow(),
        SENDER,
    ),
    "receiver-window, seen from the receiver": (
        "receiver-window",
        "local",
        obs(**RECEIVING),
        flow(),
        RECEIVER,
    ),
    "window-scaling": (
        "window-scaling",
        "peer",
        obs(rwnd_limited=0.5, snd_wnd_max=65_535, snd_wnd_min=65_535, window_scaling=False),
        flow(
            scaling=False,
            receiver_syn=SynOptions(1460, None, True, True, 65535),
            max_window=65_535,
            window_p50=65_535,
        ),
        SENDER,
    ),
    "sender-buffer": ("sender-buffer", "local", obs(sndbuf_limited=0.5), flow(**FREE), SENDER),
    "application, the reader not reading": (
        "application",
        "peer",
        obs(rwnd_limited=0.5, zero_window=True),
        flow(zero_windows=12, zero_window_s=1.0),
        SENDER,
    ),
    "application, this host's reader not reading": (
        "application",
        "local",
        obs(**RECEIVING, rqueue_max=3_000_000, rcvbuf=6_291_456),
        flow(zero_windows=12, zero_window_s=1.0),
        RECEIVER,
    ),
    "application, the sender idle": (
        "application",
        "local",
        obs(busy=0.3),
        flow(**FREE, idle_share=0.6),
        SENDER,
    ),
    "congestion": ("congestion", "local", obs(**LOSSY_CONN), flow(**LOSSY_FLOW), SENDER),
}


@pytest.mark.parametrize("case", CASES)
def test_both_views_reach_the_same_step(case: str) -> None:
    factor, host, conn, captured, local = CASES[case]
    sysctls = {**SYSCTLS, WSCALE_KEY: "1"}
    seen = [
        ladder.find(from_conn(conn, sysctls)),
        ladder.find(from_capture(captured, lambda a: a == local)),
    ]
    for found in seen:
        assert isinstance(found, ladder.Finding)
        assert (found.factor, found.host) == (factor, host)
    live = judge(conn, sysctls).verdict
    assert live is not None
    assert (live.limiting_factor, live.host_to_fix) == (factor, host)
    wire = judge_direction(captured, lambda a: a == local, sysctls).verdict
    assert (wire.limiting_factor, wire.host_to_fix) == (factor, host)


def test_what_is_left_differs_by_vantage() -> None:
    """Held by no window, no loss and no queue: the sender's kernel counted no send-buffer
    stall, so its congestion window at the path's rate; on the wire the same flat flight
    with no queue is read as the send buffer, which a capture cannot count."""
    live = ladder.find(from_conn(obs(), SYSCTLS))
    wire = ladder.find(from_capture(flow(**FREE), lambda a: a == SENDER))
    assert isinstance(live, ladder.Finding) and isinstance(wire, ladder.Finding)
    assert (live.step, live.factor) == ("rest", "path-capacity")
    assert (wire.step, wire.factor, wire.host) == ("rest", "sender-buffer", "local")


def test_an_unscaled_window_offered_here_is_window_scaling_from_both_ends() -> None:
    """The window this host offers stuck at 64 KB without scaling: `conns` on the receiver
    and a capture there both name window scaling (a bigger buffer would change nothing),
    the far end's to fix where this host's own setting is on."""
    unscaled = obs(**RECEIVING, window_scaling=False, rcv_wnd_max=65_535, rcv_wnd_min=65_535)
    sysctls = {**SYSCTLS, WSCALE_KEY: "1"}
    live = ladder.find(from_conn(unscaled, sysctls))
    assert isinstance(live, ladder.Finding)
    assert (live.factor, live.host) == ("window-scaling", "peer")
    diag = judge(unscaled, sysctls)
    assert diag.verdict is not None and diag.verdict.limiting_factor == "window-scaling"
    assert [f.key for f in diag.fixes] == ["net.ipv4.tcp_window_scaling"]
    captured = dataclasses.replace(
        flow(scaling=False, receiver_syn=SynOptions(1460, None, True, True, 65535)),
        max_window=65_535,
        window_p50=65_535,
    )
    wire = ladder.find(from_capture(captured, lambda a: a == RECEIVER))
    assert isinstance(wire, ladder.Finding) and wire.factor == "window-scaling"


def test_a_loss_far_under_what_it_allows_is_no_congestion_in_either_view() -> None:
    """One retransmission in two million segments (a connection) or 1.5 KB lost of 15 MB
    (a capture) at 2 Mbit/s: far under the least such loss leaves a sender (the loss law's
    timeout floor), so the losses did not hold it, in both views (the check's rule reads
    the same band: advice/window_law.py held_by_loss)."""
    sysctls = {**SYSCTLS, WSCALE_KEY: "1"}
    conn = obs(**{**LOSSY_CONN, "retransmits": 1, "segs_out": 2_000_000})
    captured = flow(**{**LOSSY_FLOW, "retransmitted_bytes": 1_500})
    for found in (
        ladder.find(from_conn(conn, sysctls)),
        ladder.find(from_capture(captured, lambda a: a == SENDER)),
    ):
        assert not (isinstance(found, ladder.Finding) and found.factor == "congestion")
    live = judge(conn, sysctls).verdict
    assert live is not None and live.limiting_factor != "congestion"
    wire = judge_direction(captured, lambda a: a == SENDER, sysctls).verdict
    assert wire.limiting_factor != "congestion"
