"""A keyword builder for one captured flow direction, as measure/observe/capture.py reads
it: by default a window-limited 25 Mbit/s x 50 ms transfer."""

from __future__ import annotations

from tcpwizard.measure.observe.capture import FlowDirection, SynOptions


def flow(**kw: object) -> FlowDirection:
    base: dict[str, object] = dict(
        sender="10.0.0.1",
        sender_port=40000,
        receiver="10.0.0.2",
        receiver_port=5201,
        handshake=True,
        sender_syn=SynOptions(1460, 7, True, True, 64240),
        receiver_syn=SynOptions(1460, 7, True, True, 65160),
        scaling=True,
        bytes=15_000_000,
        data_packets=10_400,
        retransmits=0,
        retransmitted_bytes=0,
        loss_episodes=0,
        late_loss_episodes=0,
        first_t=0.0,
        last_t=5.0,
        rate_mbps=24.0,
        steady_mbps=25.0,
        rtt_min_ms=50.2,
        rtt_p50_ms=50.6,
        rtt_samples=5000,
        mss=1448,
        max_window=162_432,
        window_p50=162_432,
        inflight_p50=160_000,
        inflight_max=162_000,
        window_full_share=0.7,
        zero_windows=0,
        zero_window_s=0.0,
        idle_share=0.0,
    )
    base.update(kw)
    return FlowDirection(**base)  # type: ignore[arg-type]


# Losses that go on after slow start with the window never full and no queue: 300 segments
# sent again in 6 loss episodes of the second half, the sender settled at 3 Mbit/s.
LOSSY = dict(
    window_full_share=0.0,
    retransmits=300,
    retransmitted_bytes=150_000,
    loss_episodes=12,
    late_loss_episodes=6,
    steady_mbps=3.0,
)


def lossy_flow(**kw: object) -> FlowDirection:
    """A window-free flow (6 MB offered) held by its losses (LOSSY)."""
    return flow(**{"max_window": 6_000_000, "window_p50": 6_000_000, **LOSSY, **kw})
