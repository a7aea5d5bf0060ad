"""`check --avail` over a 200 Mbit/s lab bottleneck, with and without 120 Mbit/s of real
iperf3 UDP cross traffic through it (lab/traffic.py): the available bandwidth, the capacity
that stays, and the verdict `cross-traffic` only when the path is shared."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest

from tcpwizard.lab import Lab, LabSpec
from tcpwizard.lab.ratecheck import over_line
from tcpwizard.lab.serving import run_tcpwizard, serving
from tcpwizard.lab.traffic import CrossTraffic
from tests.lab_fixtures import LabFactory
from tests.schemas import committed_schema

pytestmark = pytest.mark.lab
SPEC = LabSpec.symmetric(200e6, 0.020)
SCHEMA = committed_schema("report")


def check(lab: Lab, direction: str = "up") -> dict[str, Any]:
    proc = run_tcpwizard(
        lab, "a", "check", lab.addr_b, "--avail", "--quick", "--direction", direction,
        "--json", timeout=120,
    )  # fmt: skip
    doc: dict[str, Any] = json.loads(proc.stdout)
    jsonschema.validate(doc, SCHEMA)
    assert over_line(doc, lab.line_rate_mbps) == [], "a rate above the lab's line rate"
    return doc


def test_available_bandwidth_and_cross_traffic_verdict(lab_factory: LabFactory) -> None:
    lab = lab_factory(SPEC)
    with serving(lab, "b"):
        quiet = check(lab)
        with CrossTraffic(lab, udp_bps=120e6, duration_s=60):
            shared = check(lab)
    q_av = quiet["path"]["available"]
    assert q_av["mbps"] >= 0.9 * quiet["path"]["capacity_mbps"]
    assert quiet["verdict"]["limiting_factor"] == "path-capacity"

    av = shared["path"]["available"]
    assert 65 <= av["mbps"] <= 95, av
    assert shared["path"]["capacity_mbps"] >= 170  # the capacity is still there
    v = shared["verdict"]
    assert v["limiting_factor"] == "cross-traffic", v
    assert v["host_to_fix"] is None
    assert not [f for f in shared["fixes"] if f["kind"] == "sysctl"]


def test_cross_traffic_on_the_way_back(lab_factory: LabFactory) -> None:
    """The same UDP traffic from b to a: serve sends the periodic streams, the download is
    judged by them, and the upload's figure (not measured: --direction down) stands for
    nothing."""
    lab = lab_factory(SPEC)
    with serving(lab, "b"):
        quiet = check(lab, "down")
        with CrossTraffic(lab, udp_bps=120e6, duration_s=60, reverse=True):
            shared = check(lab, "down")
    q_av = quiet["path"]["available_down"]
    assert q_av["mbps"] >= 0.9 * q_av["capacity_mbps"], q_av
    assert quiet["verdict"]["limiting_factor"] == "path-capacity"

    assert "available" not in shared["path"]
    av = shared["path"]["available_down"]
    assert 65 <= av["mbps"] <= 95, av
    v = shared["verdict"]
    assert v["limiting_factor"] == "cross-traffic", v
    assert v["explanation"].startswith("down:") and v["host_to_fix"] is None, v
