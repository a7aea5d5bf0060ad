"""A shaper in host a's own egress queue (the kernel's tbf on the lab interface, 20 Mbit/s on a
100 Mbit/s x 30 ms path): `check` from a to serve on b names `interface` on this host with
the tc command, not a healthy path (the probe's trains leave through the same queue, so the
path reads 20 Mbit/s). Judged on the majority of its tries."""

from __future__ import annotations

import tempfile

import pytest

from benchmarks.bench_causes import check_run, isolated_env
from tcpwizard.lab import Lab
from tcpwizard.lab.lab import IFNAME
from tcpwizard.lab.serving import serving
from tcpwizard.lab.spec import LabSpec
from tests.lab_fixtures import LabFactory
from tests.majority import until_decided

pytestmark = pytest.mark.lab
TRIES = 3
# tbf's bucket holds one GSO super-packet (64 KB) so it shapes them rather than dropping them.
SHAPER = ["tc", "qdisc", "replace", "dev", IFNAME, "root", "tbf", "rate", "20mbit",
          "burst", "64kb", "latency", "50ms"]  # fmt: skip


def _shaped(lab: Lab) -> Lab:
    root = lab.run("a", ["tc", "-j", "qdisc", "show", "dev", IFNAME], capture_output=True,
                   text=True, check=True).stdout  # fmt: skip
    if '"netem"' in root:
        pytest.skip("this lab emulates the path with netem on the same interface")
    lab.run("a", SHAPER, check=True)
    return lab


def test_a_shaper_in_the_senders_egress_queue_is_its_interface(lab_factory: LabFactory) -> None:
    lab = _shaped(lab_factory.fresh(LabSpec.symmetric(100e6, 0.030)))
    with tempfile.TemporaryDirectory(prefix="tw-shaper-") as tmp, serving(lab, "b"):
        runs = until_decided(
            lambda: check_run(lab, isolated_env(tmp)),
            lambda r: (r["factor"], r["host"]) == ("interface", "local"),
            TRIES,
        )
    assert sum((r["factor"], r["host"]) == ("interface", "local") for r in runs) >= 2, runs
