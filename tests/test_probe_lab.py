"""probe end to end over the emulated WAN (tcpwizard.lab delay line): min RTT within
max(0.2 ms, 2 %) of the configured RTT and capacity within 5 % of the configured rate on
a clean path, with serve in host b and probe in host a."""

from __future__ import annotations

import json
import statistics
import sys
import time
from contextlib import AbstractContextManager
from typing import Any

import pytest

from tcpwizard.lab import Lab, LabSpec
from tcpwizard.lab.serving import run_tcpwizard, serving

pytestmark = pytest.mark.lab

SLOW_LONG = LabSpec.symmetric(10e6, 0.200)
FAST_SHORT = LabSpec.symmetric(100e6, 0.020)


def serve_on_b(lab: Lab, *extra: str) -> AbstractContextManager[object]:
    return serving(lab, "b", 5301, *extra)


def probe_path(lab: Lab, host: str) -> dict[str, Any]:
    out = run_tcpwizard(lab, "a", "probe", host, "--json", timeout=60)
    assert out.returncode in (0, 1, 2), out.stderr  # the verdict's code; 3 = no path
    path: dict[str, Any] = json.loads(out.stdout)["path"]
    return path


def check_path(lab: Lab, runs: int = 3, host: str | None = None) -> list[dict[str, Any]]:
    """Median of a few probes: one run disturbed by the other work on this small machine
    must not decide; the benchmark reports every run."""
    rtt_ms = lab.rtt_s * 1e3
    rate = lab.spec.forward.rate_bps / 1e6
    with serve_on_b(lab):
        paths = [probe_path(lab, host or lab.addr_b) for _ in range(runs)]
    mins = [p["rtt_ms"]["min"] for p in paths]
    ups = [p["capacity_mbps"] for p in paths]
    downs = [p["capacity_down"]["mbps"] for p in paths]
    assert abs(statistics.median(mins) - rtt_ms) <= max(0.2, 0.02 * rtt_ms), mins
    assert statistics.median(ups) == pytest.approx(rate, rel=0.05), ups
    assert statistics.median(downs) == pytest.approx(rate, rel=0.05), downs
    for p in paths:
        assert p["peer"] is True and p["rtt_ms"]["loss_pct"] == 0
        assert p["duration_s"] < 3.0
        expected_bdp = p["capacity_mbps"] * 1e6 / 8 * p["rtt_ms"]["min"] / 1e3
        assert p["bdp_bytes"] == pytest.approx(expected_bdp, rel=0.01)
    return paths


def test_probe_default_lab_100mbit_50ms(lab: Lab) -> None:
    check_path(lab)


@pytest.mark.parametrize("lab", [SLOW_LONG, FAST_SHORT], indirect=True)
def test_probe_other_paths(lab: Lab) -> None:
    check_path(lab)


def test_probe_over_ipv6(lab: Lab) -> None:
    check_path(lab, runs=3, host=lab.addr6_b)


def test_peerless_probe_marks_lower_confidence(lab: Lab) -> None:
    # No serve on b: ICMP echo (we are root) and ICMP pairs, with the missing evidence named.
    t0 = time.monotonic()
    path = probe_path(lab, lab.addr_b)
    assert time.monotonic() - t0 < 10
    assert path["peer"] is False and path["rtt_ms"]["method"] == "icmp"
    rtt_ms = lab.rtt_s * 1e3
    assert abs(path["rtt_ms"]["min"] - rtt_ms) <= max(0.2, 0.02 * rtt_ms)
    assert any("no serve" in n for n in path["notes"])
    if path["capacity"] is not None:
        assert path["capacity"]["confidence"] <= 0.35


def test_peerless_tcp_syn_pairs(lab: Lab) -> None:
    # No serve, but an open TCP port (like an SSH server): connect-time RTT, SYN pairs.
    listener = lab.popen(
        "b",
        [
            sys.executable,
            "-c",
            "import socket,time\ns=socket.socket();s.bind(('',2222));s.listen(128);time.sleep(30)",
        ],
    )
    try:
        time.sleep(0.3)
        out = run_tcpwizard(
            lab, "a", "probe", lab.addr_b, "--tcp-port", "2222", "--json", timeout=60
        )
    finally:
        listener.kill()
        listener.wait()
    assert out.returncode in (0, 1, 2), out.stderr  # the verdict's code; 3 = no path
    path = json.loads(out.stdout)["path"]
    assert path["peer"] is False and path["rtt_ms"]["method"] == "tcp-connect"
    rtt_ms = lab.rtt_s * 1e3
    assert abs(path["rtt_ms"]["min"] - rtt_ms) <= max(0.2, 0.02 * rtt_ms)
    cap = path["capacity"]
    # Pairs alone are at the mercy of timing noise (the emulator releases the small answers
    # in batches, which compresses their spacing): hence the low confidence, no accuracy
    # claim; the benchmark reports what they measure.
    assert cap["method"] == "peerless-tcp-syn-pairs" and cap["confidence"] <= 0.35
    assert cap["mbps"] > 0 and "lower confidence" in cap["note"]
