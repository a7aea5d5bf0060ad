"""An application that holds the rate, made for real in the lab (lab/app_lab.py) and named
by `conns` in both hosts and by `check --pcap` on a capture of the same transfer:

- Debian's iperf3 uploading to a far end whose `iperf3 -s` reads under a cgroup CPU quota:
  `application` at the far end seen from the sender, here (iperf3) seen from the reader's
  host;
- Debian's OpenSSH scp on a path whose bandwidth-delay product exceeds SSH's 2 MB channel
  window: `application` at both ends, named ssh and sshd, with SSH's own fixes, from
  conns in both hosts and from the capture.

Each judges the majority of up to three transfers (short ones: 7 s each)."""

from __future__ import annotations

import shutil

import pytest

from benchmarks.bench_application import EXPECTED, Outcome, Timing, run_once, spec_for
from tcpwizard.lab.app_lab import ssh_missing
from tests.lab_fixtures import LabFactory

pytestmark = [
    pytest.mark.lab,
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tcpdump") is None, reason="tcpdump not installed"),
    pytest.mark.skipif(shutil.which("iperf3") is None, reason="iperf3 not installed"),
]
SHORT = Timing(transfer_s=7, warmup_s=3.0)
TRIES, NEEDED = 3, 2


def _majority(
    lab_factory: LabFactory, scenario: str, views: tuple[str, ...], rate: float, rtt: float
) -> Outcome:
    """The first run whose `views` were all right, once a majority of tries were."""
    lab = lab_factory(spec_for(rate, rtt))
    outcomes: list[Outcome] = []
    right: list[Outcome] = []
    for _ in range(TRIES):
        outcomes.append(run_once(lab, scenario, views, timing=SHORT))
        right = [o for o in outcomes if all(o.right(v) for v in views)]
        if len(right) >= NEEDED or len(outcomes) - len(right) > TRIES - NEEDED:
            break
    assert len(right) >= NEEDED, [(o.views, o.error) for o in outcomes]
    return right[0]


def test_a_reader_under_a_cpu_quota_is_named_by_conns_and_the_capture(
    lab_factory: LabFactory,
) -> None:
    # conns in both hosts; the capture's verdict on a reader is not yet right in 9 of 10
    # runs (docs/bench-application.md), so it is not what this test judges.
    good = _majority(lab_factory, "reader-far", ("conns a", "conns b"), 200e6, 0.150)
    assert good.processes["conns b"] == "iperf3"  # the reader, named on its own host
    # The reader, not the path: far below the 200 Mbit/s the path carries.
    assert good.mbps["conns a"] < 120


def test_scp_over_a_long_path_is_ssh_s_own_window(lab_factory: LabFactory) -> None:
    missing = ssh_missing()
    if missing:
        pytest.skip(missing)
    good = _majority(lab_factory, "scp", tuple(EXPECTED["scp"]), 200e6, 0.150)
    assert (good.processes["conns a"], good.processes["conns b"]) == ("ssh", "sshd")
    # 2 MB per 150 ms round trip: ~112 Mbit/s, whatever the 200 Mbit/s path allows.
    assert 60 < good.mbps["conns a"] < 125
    assert (good.evidence["conns a"]["app_limited"] or 0) >= 0.5
    assert 1_000_000 < good.evidence["conns a"]["inflight_max"] < 2_600_000
