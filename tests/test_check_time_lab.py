"""A check as short as its evidence allows, over the emulated WAN: on a healthy path whose
capacity a sure probe measured, autotuning fills the line and the tuned transfer, which
could show no more, is left out with the reason in the report's notes
(measure/engine/line_filled.py; the time saved: docs/bench-check-time.md)."""

from __future__ import annotations

import tempfile
from typing import Any

import pytest

from benchmarks.bench_causes import isolated_env, json_report
from tcpwizard.lab.serving import serving, tcpwizard_argv
from tcpwizard.lab.spec import LabSpec
from tests.lab_fixtures import LabFactory
from tests.majority import until_decided

pytestmark = pytest.mark.lab
HEALTHY = LabSpec.symmetric(100e6, 0.020, queue_bytes=round(100e6 * 0.020 / 8))


def _summary(doc: dict[str, Any]) -> dict[str, Any]:
    v = doc["verdict"]
    return {
        "verdict": (v["limiting_factor"], v["host_to_fix"]),
        "up": [m["mode"] for m in doc["transfer"]["modes"] if m["direction"] == "up"],
        "left_out": [n for n in doc["notes"] if "drs not run" in n],
        "tuned_mode": v["wizard_gap"]["tuned_mode"],
        "capacity": doc["path"]["capacity"],
    }


def _skipped(r: dict[str, Any]) -> bool:
    return (
        r["verdict"] == ("path-capacity", None)
        and r["up"] == ["untuned", "autotune"]
        and len(r["left_out"]) == 1
        and r["tuned_mode"] == "autotune"
    )


def test_a_healthy_path_runs_no_tuned_transfer_once_autotuning_filled_it(
    lab_factory: LabFactory,
) -> None:
    lab = lab_factory(HEALTHY)
    argv = tcpwizard_argv("check", lab.addr_b, "--json")
    with tempfile.TemporaryDirectory(prefix="tw-time-") as tmp, serving(lab, "b"):
        env = isolated_env(tmp)
        runs = until_decided(lambda: _summary(json_report(lab, argv, env)), _skipped)
    assert sum(_skipped(r) for r in runs) >= 2, runs
