"""The delay line above 1 Gbit/s: the kernel's TCP super-packets cross it whole, at the
configured rate and RTT, and random loss still hits single segments (lab/gso.py)."""

from __future__ import annotations

import shutil

import pytest

from tcpwizard.lab import Lab, LabSpec
from tcpwizard.lab.tools import iperf3_tcp, ping, rtt_tolerance_s

pytestmark = pytest.mark.lab

# 2 Gbit/s: above the plain path's 1 Gbit/s, and well within the 5 Gbit/s two shared cores
# carry (docs/bench-calibrate.md). Buffers: 2 Gbit/s x 10 ms = 2.5 MB in
# flight, advertised at ~0.62 of the receive buffer.
BUFFERS = (
    ("net.ipv4.tcp_rmem", "4096 131072 16777216"),
    ("net.ipv4.tcp_wmem", "4096 16384 16777216"),
)
FAST = LabSpec.symmetric(2e9, 0.010, sysctls_a=BUFFERS, sysctls_b=BUFFERS)
FAST_LOSSY = LabSpec.symmetric(2e9, 0.010, loss=0.01)


def _offloads(lab: Lab) -> str:
    """`ethtool -k wan0` in host a (its TUN feeds the a->b bottleneck)."""
    out: str = lab.run("a", ["ethtool", "-k", "wan0"], capture_output=True, text=True).stdout
    return out


@pytest.mark.parametrize("lab", [FAST], indirect=True)
def test_super_packets_cross_a_fast_line_at_its_rate_and_rtt(lab: Lab) -> None:
    if lab.backend != "delayline":
        pytest.skip("netem segments in the kernel")
    # Within the lab's stated tolerance (lab/tools.py rtt_tolerance_s, as the calibration).
    rtt = ping(lab, "a", count=10, interval_s=0.02).min_s
    assert rtt == pytest.approx(0.010, abs=rtt_tolerance_s(0.010))
    before = lab.stats()["forward"]
    # Client b with -R: the server in a sends, so the data crosses a->b (a's TUN hands over
    # the super-packets) and b, the receiver, reports per-second goodput.
    result = iperf3_tcp(lab, "b", seconds=4, extra=("-R",))
    after = lab.stats()["forward"]
    # Goodput tops out at 1448/1500 of the rate (IP bytes are shaped); the first second is
    # slow start.
    assert 0.92 * 2e9 <= result.steady_bps(1) <= 1.0 * 2e9
    reads = after["super_packets"] - before["super_packets"]
    segments = after["packets_in"] - before["packets_in"]
    # gso_max_segs at 2 Gbit/s: 100 us / 6 us = 16; TCP's own TSO sizing may send fewer.
    assert reads > 0
    assert segments / reads > 2


def test_a_slow_line_keeps_the_kernels_segments(lab: Lab) -> None:
    if lab.backend != "delayline":
        pytest.skip("netem segments in the kernel")
    if shutil.which("ethtool"):
        assert "tcp-segmentation-offload: off" in _offloads(lab)
    before = lab.stats()["forward"]
    iperf3_tcp(lab, "a", seconds=1)
    after = lab.stats()["forward"]
    assert after["packets_in"] - before["packets_in"] > 1000
    assert after["super_packets"] == before["super_packets"]


@pytest.mark.parametrize("lab", [FAST_LOSSY], indirect=True)
def test_random_loss_hits_segments_not_super_packets(lab: Lab) -> None:
    if lab.backend != "delayline":
        pytest.skip("netem segments in the kernel")
    if shutil.which("ethtool"):
        offloads = _offloads(lab)
        assert "tcp-segmentation-offload: on" in offloads
        # USO (Linux 6.2+): the capacity probe's UDP_SEGMENT trains cross as super-packets.
        assert "tx-udp-segmentation: on" in offloads
    before = lab.stats()["forward"]
    # Four streams: one Cubic flow at 1 % loss moves too few segments in 3 s.
    iperf3_tcp(lab, "a", seconds=3, extra=("-P", "4"))
    after = lab.stats()["forward"]
    d = {k: after[k] - before[k] for k in after}
    assert d["packets_in"] > 20_000
    # ~1 % of >20,000 segments: sigma < 0.07 %; a whole super-packet lost per lost segment
    # would show as several times the rate.
    assert 0.008 <= d["lost"] / d["packets_in"] <= 0.012
    assert d["super_packets"] > 0
    assert 0 < d["split"] < d["super_packets"]
