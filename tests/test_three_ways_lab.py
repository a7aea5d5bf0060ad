"""One transfer seen three ways: `check` uploading to Debian's iperf3 on host b, `conns`
watching that upload's connection while it runs, and tcpdump capturing it for
`check --pcap`. For each cause all three can see from host a, the three name the same
factor and host to fix, judged on the majority of tries.

The causes: the far end's receive buffer (b's tcp_rmem), this host's send buffer (a's
tcp_wmem), SACK off in a on a lossy path, and a token-bucket policer on the path (Reno
hosts, so the bucket's drops are the sender's only signal). Each adapter fills its own
evidence (the check's report, one connection's TCP_INFO over an interval, a capture's
packet headers), so one verdict across them says the three judges read the same physics.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from benchmarks.bench_causes import RENO
from tcpwizard.lab import Lab, LabSpec
from tcpwizard.lab.serving import check_pcap, iperf3_serving, tcpwizard_argv
from tcpwizard.lab.tools import capturing
from tests.lab_fixtures import LabFactory
from tests.majority import until_decided

pytestmark = [
    pytest.mark.lab,
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("iperf3") is None, reason="iperf3 not installed"),
    pytest.mark.skipif(shutil.which("tcpdump") is None, reason="tcpdump not installed"),
]
TRIES = 3
IPERF3_PORT = 5201
RATE, RTT = 80e6, 0.060  # BDP 600 KB: every buffer below holds one connection to a fraction
SECONDS = 5  # the upload: past slow start (~10 round trips here) with room for 3 conns samples
CASES = {
    "receiver-window": (
        LabSpec.symmetric(RATE, RTT, sysctls_b=(("net.ipv4.tcp_rmem", "4096 65536 262144"),)),
        ("receiver-window", "peer"),
    ),
    "sender-buffer": (
        LabSpec.symmetric(RATE, RTT, sysctls_a=(("net.ipv4.tcp_wmem", "4096 16384 131072"),)),
        ("sender-buffer", "local"),
    ),
    # SACK off in a, Reno under 0.5 % random loss: check reads a's audit, conns a's own
    # setting and TCP_INFO's options, the capture a's SYN.
    "sack-off": (
        LabSpec.symmetric(RATE, RTT, loss=0.005, sysctls_a=(*RENO, ("net.ipv4.tcp_sack", "0"))),
        ("congestion", "local"),
    ),
    "policer": (
        LabSpec.symmetric(100e6, 0.030, policer_bps=20e6, sysctls_a=RENO, sysctls_b=RENO),
        ("policer", "path"),
    ),
}
Named = tuple[Any, Any]


def _named(verdict: dict[str, Any] | None) -> Named:
    v = verdict or {}
    return v.get("limiting_factor"), v.get("host_to_fix")


def _conns_sample(lab: Lab) -> list[Named]:
    """`conns --json` over one second in a: the verdict of each busy sending connection to
    iperf3's port (the upload; its control connection is idle, so it has no verdict)."""
    run = lab.run(
        "a",
        tcpwizard_argv("conns", "--json", "--port", str(IPERF3_PORT), "--interval", "1s"),
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    doc = json.loads(run.stdout)
    return [
        _named(c["verdict"])
        for c in doc["connections"]
        if c["role"] == "sending" and c["verdict"] is not None
    ]


def _upload_in_capture(doc: dict[str, Any], sender: str) -> Named:
    """The capture's verdict of the largest flow from `sender` to iperf3's port."""
    flows = [d for d in [doc["diagnosis"], *doc["others"]] if d is not None]
    ours = [
        d
        for d in flows
        if d["flow"]["sender"]["address"] == sender and d["flow"]["receiver"]["port"] == IPERF3_PORT
    ]
    if not ours:
        return (None, None)
    return _named(max(ours, key=lambda d: d["flow"]["bytes"])["verdict"])


def seen_three_ways(lab: Lab, pcap: Path) -> dict[str, Named]:
    """One upload from a to b's iperf3 driven by `check` (kernel autotuning only: one
    connection, the one whose verdict the check gives), watched by `conns` until the check
    ends and captured by tcpdump: each way's (factor, host). conns' reading is the one most
    of its samples gave after the first (which may still see slow start)."""
    argv = tcpwizard_argv(
        "check", lab.addr_b, "--direction", "up", "--modes", "autotune",
        "--duration", f"{SECONDS}s",
        "--json", "--no-history",
    )  # fmt: skip
    samples: list[list[Named]] = []
    # The report goes to a file: a pipe nobody reads until the check ends holds 64 KB, and a
    # lossy upload's report is larger (the check then blocked on its write until the deadline).
    report_file = pcap.with_suffix(".json")
    with capturing(lab, pcap), iperf3_serving(lab, "b"), report_file.open("w") as sink:
        check = lab.popen("a", argv, stdout=sink, stderr=subprocess.DEVNULL, text=True)
        deadline = time.monotonic() + 120
        while check.poll() is None and time.monotonic() < deadline:
            samples.append(_conns_sample(lab))
        check.wait(timeout=60)
    report = json.loads(report_file.read_text())
    pcap_run = check_pcap(lab, pcap)
    busy = [named for sample in samples for named in sample]
    conns = Counter(busy[1:] or busy).most_common(1)
    return {
        "check": _named(report["verdict"]),
        "conns": conns[0][0] if conns else (None, None),
        "pcap": _upload_in_capture(json.loads(pcap_run.stdout), lab.addr_a),
    }


@pytest.mark.parametrize("cause", list(CASES))
def test_one_transfer_seen_three_ways_gives_one_verdict(
    lab_factory: LabFactory, tmp_path: Path, cause: str
) -> None:
    spec, expect = CASES[cause]
    lab = lab_factory(spec)
    tries = iter(range(TRIES))
    runs = until_decided(
        lambda: seen_three_ways(lab, tmp_path / f"try{next(tries)}.pcap"),
        lambda seen: set(seen.values()) == {expect},
        TRIES,
    )
    agreeing = [seen for seen in runs if set(seen.values()) == {expect}]
    assert len(agreeing) >= 2, runs
