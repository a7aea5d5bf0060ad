"""A policer and a bloated queue made with kernel parts (nftables' token bucket, a deep
drop-tail buffer) and `check` across them from host a to serve on host b: the verdict, the
host to fix, the policed rate, and the RTT under load against `ping` beside a transfer.
Each check is judged on the majority of its tries (benchmarks/bench_causes.py runs 10 of each at
two rates and two RTTs: docs/bench-causes.md)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest

from benchmarks.bench_causes import RENO, check_run, isolated_env, json_report, ping_run
from tcpwizard.lab import Lab
from tcpwizard.lab.serving import check_pcap, iperf3_serving, serving, tcpwizard_argv
from tcpwizard.lab.spec import HopSpec, LabSpec
from tcpwizard.lab.tools import capturing
from tests.lab_fixtures import LabFactory
from tests.lab_helpers import upload_verdict
from tests.majority import until_decided

pytestmark = pytest.mark.lab
TRIES = 3
POLICED = LabSpec.symmetric(100e6, 0.030, policer_bps=20e6)
BLOATED = LabSpec.symmetric(
    50e6, 0.030, queue_bytes=round(8 * 50e6 * 0.030 / 8), sysctls_a=RENO, sysctls_b=RENO
)

# Reno (its window halves on a loss) through a drop-tail queue of 0.2 BDP, both hosts' buffers
# the kernel's (4-6 MB, 30-50 BDP): the line idles after each halving, ~0.86 of it busy
# (advice/sawtooth.py), and the losses are the queue's overflow: the path, no host to fix.
SHALLOW = LabSpec.symmetric(
    50e6, 0.020, queue_bytes=round(0.2 * 50e6 * 0.020 / 8), sysctls_a=RENO, sysctls_b=RENO
)


def _checks(lab: Lab, expect: tuple[str, str | None]) -> list[dict[str, object]]:
    """check_run until two runs agree on whether the verdict is `expect` (3 at most)."""
    with tempfile.TemporaryDirectory(prefix="tw-causes-") as tmp, serving(lab, "b"):
        return until_decided(
            lambda: check_run(lab, isolated_env(tmp)),
            lambda r: (r["factor"], r["host"]) == expect,
            TRIES,
        )


def test_policer_is_named_on_the_path_with_its_rate(lab_factory: LabFactory) -> None:
    runs = _checks(lab_factory(POLICED), ("policer", "path"))
    named = [r for r in runs if (r["factor"], r["host"]) == ("policer", "path")]
    assert len(named) >= 2, runs
    rates = [float(r["plateau_mbps"]) for r in named if r["plateau_mbps"]]  # type: ignore[arg-type]
    assert sum(abs(x / 20.0 - 1) <= 0.10 for x in rates) >= 2, rates


# A bucket of a third of a slow line under Reno: a window of a handful of segments, a tenth
# of them lost near the loss bound of that share, so the transfer alone reads like random
# loss; the idle probes the check sends after it lose none (advice/idle_follow_up.py).
SMALL_BUCKET = LabSpec.symmetric(
    9e6, 0.030, queue_bytes=round(1.5 * 9e6 * 0.030 / 8), policer_bps=3e6,
    sysctls_a=RENO, sysctls_b=RENO,
)  # fmt: skip


def test_a_small_bucket_is_told_from_random_loss_by_idle_probes(lab_factory: LabFactory) -> None:
    lab = lab_factory(SMALL_BUCKET)
    argv = tcpwizard_argv("check", lab.addr_b, "--json", "--direction", "up", "--modes", "autotune")

    def run(env: dict[str, str]) -> dict[str, Any]:
        doc = json_report(lab, argv, env)
        v = doc["verdict"]
        return {"verdict": (v["limiting_factor"], v["host_to_fix"]), **doc["path"]}

    with tempfile.TemporaryDirectory(prefix="tw-causes-") as tmp, serving(lab, "b"):
        env = isolated_env(tmp)
        runs = until_decided(lambda: run(env), lambda r: r["verdict"] == ("policer", "path"), TRIES)
    named = [r for r in runs if r["verdict"] == ("policer", "path")]
    assert len(named) >= 2, [(r["verdict"], r.get("idle_loss")) for r in runs]
    # Named because the follow-up's probes came back: random loss would have dropped some.
    assert all(r["idle_loss"]["sent"] > 0 and r["idle_loss"]["lost"] == 0 for r in named), runs


def test_policer_on_a_router_is_named(lab_factory: LabFactory) -> None:
    """`lab --hops`: the token bucket on router 2's forward chain, beyond the bottleneck."""
    spec = LabSpec.symmetric(100e6, 0.030, hops=(HopSpec(), HopSpec(policer_bps=25e6)))
    runs = _checks(lab_factory(spec), ("policer", "path"))
    assert sum((r["factor"], r["host"]) == ("policer", "path") for r in runs) >= 2, runs


def test_bloated_queue_is_bufferbloat(lab_factory: LabFactory) -> None:
    runs = _checks(lab_factory(BLOATED), ("bufferbloat", "path"))
    assert sum((r["factor"], r["host"]) == ("bufferbloat", "path") for r in runs) >= 2, runs


def test_a_reno_sawtooth_through_a_shallow_queue_is_the_path(lab_factory: LabFactory) -> None:
    runs = _checks(lab_factory(SHALLOW), ("path-capacity", None))
    assert sum((r["factor"], r["host"]) == ("path-capacity", None) for r in runs) >= 2, runs


def _close_to_ping(p: dict[str, object]) -> bool:
    return p["ratio"] is not None and abs(float(p["ratio"]) - 1) <= 0.10  # type: ignore[arg-type]


def test_rtt_under_load_matches_ping_beside_the_transfer(lab_factory: LabFactory) -> None:
    """The transfer's median RTT under load within 10 % of `ping` in the same second half,
    through a queue that the transfer fills to several BDPs."""
    lab = lab_factory(BLOATED)
    with tempfile.TemporaryDirectory(prefix="tw-causes-") as tmp, serving(lab, "b"):
        pings = until_decided(lambda: ping_run(lab, isolated_env(tmp)), _close_to_ping, TRIES)
    close = [p for p in pings if _close_to_ping(p)]
    assert len(close) >= 2, pings


def _policed_iperf3_upload(lab: Lab, pcap: Path, cc: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Debian's iperf3 uploading through the policer (its own congestion control `cc`), with
    tcpdump on a's interface and `conns` watching the connection half-way: (conns' verdict
    of the data connection, check --pcap's verdict)."""
    with capturing(lab, pcap), iperf3_serving(lab, "b"):
        # Watched past the bucket's second of line rate and the ramp.
        conns_verdict = upload_verdict(lab, ["-t", "9", "-C", cc], 4.0, ["--interval", "3s"])
    pcap_run = check_pcap(lab, pcap)
    pcap_doc: dict[str, Any] = json.loads(pcap_run.stdout)
    diagnosis = pcap_doc["diagnosis"] or {"verdict": {}}
    return conns_verdict, diagnosis["verdict"]


# Reno's upload through the same bucket, driven by `check` and seen by conns and a capture
# at once, is tests/test_three_ways_lab.py's policer case.
@pytest.mark.parametrize("cc", ["bbr"])
def test_conns_and_pcap_name_the_policer_of_an_iperf3_upload(
    lab_factory: LabFactory, tmp_path: Path, cc: str
) -> None:
    lab = lab_factory(POLICED)
    count = iter(range(TRIES))

    def attempt() -> tuple[object, ...]:
        c, p = _policed_iperf3_upload(lab, tmp_path / f"up{next(count)}.pcap", cc)
        return (
            c.get("limiting_factor"),
            c.get("host_to_fix"),
            p.get("limiting_factor"),
            p.get("host_to_fix"),
        )

    def both_policer(n: tuple[object, ...]) -> bool:
        return n[:2] == ("policer", "path") and n[2:] == ("policer", "path")

    named = until_decided(attempt, both_policer, TRIES)
    assert sum(n[:2] == ("policer", "path") for n in named) >= 2, named
    assert sum(n[2:] == ("policer", "path") for n in named) >= 2, named
