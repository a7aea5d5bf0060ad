"""A policer and a bloated queue made with kernel parts (nftables' token bucket, a deep
drop-tail buffer) and `check` across them from host a to serve on host b: the verdict, the
host to fix, the policed rate, and the RTT under load against `ping` beside a transfer.
Each check is judged on the majority of its tries (lab/bench_causes.py runs 10 of each at
two rates and two RTTs: docs/bench-causes.md)."""

from __future__ import annotations

import tempfile

import pytest

from tcpwizard.lab import Lab
from tcpwizard.lab.bench_causes import RENO, _env, check_run, ping_run
from tcpwizard.lab.serving import serving
from tcpwizard.lab.spec import HopSpec, LabSpec
from tests.lab_fixtures import LabFactory

pytestmark = pytest.mark.lab
TRIES = 3
POLICED = LabSpec.symmetric(100e6, 0.030, policer_bps=20e6)
BLOATED = LabSpec.symmetric(
    50e6, 0.030, queue_bytes=round(8 * 50e6 * 0.030 / 8), sysctls_a=RENO, sysctls_b=RENO
)


def _checks(lab: Lab, tries: int = TRIES) -> list[dict[str, object]]:
    with tempfile.TemporaryDirectory(prefix="tw-causes-") as tmp, serving(lab, "b"):
        return [check_run(lab, _env(tmp)) for _ in range(tries)]


def test_policer_is_named_on_the_path_with_its_rate(lab_factory: LabFactory) -> None:
    runs = _checks(lab_factory(POLICED))
    named = [r for r in runs if (r["factor"], r["host"]) == ("policer", "path")]
    assert len(named) >= 2, runs
    rates = [float(r["plateau_mbps"]) for r in named if r["plateau_mbps"]]  # type: ignore[arg-type]
    assert sum(abs(x / 20.0 - 1) <= 0.10 for x in rates) >= 2, rates


def test_policer_on_a_router_is_named(lab_factory: LabFactory) -> None:
    """`lab --hops`: the token bucket on router 2's forward chain, beyond the bottleneck."""
    spec = LabSpec.symmetric(100e6, 0.030, hops=(HopSpec(), HopSpec(policer_bps=25e6)))
    runs = _checks(lab_factory(spec))
    assert sum((r["factor"], r["host"]) == ("policer", "path") for r in runs) >= 2, runs


def test_bloated_queue_is_bufferbloat_and_rtt_under_load_matches_ping(
    lab_factory: LabFactory,
) -> None:
    lab = lab_factory(BLOATED)
    runs = _checks(lab)
    assert sum((r["factor"], r["host"]) == ("bufferbloat", "path") for r in runs) >= 2, runs
    with tempfile.TemporaryDirectory(prefix="tw-causes-") as tmp, serving(lab, "b"):
        pings = [ping_run(lab, _env(tmp)) for _ in range(TRIES)]
    close = [p for p in pings if p["ratio"] is not None and abs(float(p["ratio"]) - 1) <= 0.10]
    assert len(close) >= 2, pings
