"""One transfer seen three ways: `check` uploading to Debian's iperf3 on host b, `conns`
watching that upload's connection while it runs, and tcpdump capturing it for
`check --pcap`. For each cause all three can see from host a, the three name the same
factor and host to fix, judged on the majority of tries.

The causes: the far end's receive buffer (b's tcp_rmem), this host's send buffer (a's
tcp_wmem), SACK off in a on a lossy path, and a token-bucket policer on the path (Reno
hosts, so the bucket's drops are the sender's only signal). Each adapter fills its own
evidence (the check's report, one connection's TCP_INFO over an interval, a capture's
packet headers), so one verdict across them says the three judges read the same physics.
The machinery and two more causes (window scaling off at the far end, a healthy path) are
the bench's (`python -m benchmarks three-ways`, benchmarks/bench_three_ways.py).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from benchmarks.bench_three_ways import CASES, SUITE_CASES, seen_three_ways
from tests.lab_fixtures import LabFactory
from tests.majority import until_decided

pytestmark = [
    pytest.mark.lab,
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("iperf3") is None, reason="iperf3 not installed"),
    pytest.mark.skipif(shutil.which("tcpdump") is None, reason="tcpdump not installed"),
]
TRIES = 3


@pytest.mark.parametrize("cause", SUITE_CASES)
def test_one_transfer_seen_three_ways_gives_one_verdict(
    lab_factory: LabFactory, tmp_path: Path, cause: str
) -> None:
    case = CASES[cause]
    lab = lab_factory(case.spec)
    tries = iter(range(TRIES))
    runs = until_decided(
        lambda: seen_three_ways(lab, tmp_path / f"try{next(tries)}.pcap"),
        lambda seen: set(seen.values()) == {case.expect},
        TRIES,
    )
    agreeing = [seen for seen in runs if set(seen.values()) == {case.expect}]
    assert len(agreeing) >= 2, runs
