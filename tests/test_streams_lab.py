"""Parallel streams as the work-around, end to end: a lossy Reno path (20 Mbit/s, 50 ms, 1 %
loss each way): the verdict is congestion, the advice gives N streams with the tools' command
lines, and `check --try-streams` measures N streams at >= 0.8 x min(N x per-stream rate,
capacity) once up to speed, in the same run."""

from __future__ import annotations

import json
import re
import sys

import pytest

from tcpwizard.lab import LabSpec
from tcpwizard.lab.serving import serving
from tcpwizard.measure.wire.spec import MAX_STREAMS
from tests.lab_fixtures import LabFactory

pytestmark = pytest.mark.lab
RENO = (("net.ipv4.tcp_congestion_control", "reno"),)
SPEC = LabSpec.symmetric(20e6, 0.050, loss=0.01, sysctls_a=RENO, sysctls_b=RENO)


def test_lossy_reno_path_gets_n_streams_and_proves_them(lab_factory: LabFactory) -> None:
    lab = lab_factory(SPEC)
    with serving(lab, "b"):
        proc = lab.run(
            "a",
            [sys.executable, "-m", "tcpwizard", "check", lab.addr_b, "--try-streams",
             "--direction", "up", "--json"],
            capture_output=True, text=True, timeout=180, check=False,
        )  # fmt: skip
    doc = json.loads(proc.stdout)
    v = doc["verdict"]
    assert v["limiting_factor"] == "congestion", v
    fix = next(f for f in doc["fixes"] if f["id"] == "parallel_streams")
    n = int(fix["value"])
    assert 2 <= n <= 16
    for tool in (f"iperf3 -c HOST -P {n}", f"globus-url-copy -p {n}", f"bbcp -s {n}",
                 f"rclone copy --multi-thread-streams {n}"):  # fmt: skip
        assert tool in fix["command"]
    per = float(re.search(r"~([0-9.]+) Mbit/s", fix["why"]).group(1))  # type: ignore[union-attr]
    capacity = doc["path"]["capacity_mbps"]
    line = next(e for e in v["evidence"] if "streams moved" in e)
    tried = int(re.search(r"(\d+) streams moved", line).group(1))  # type: ignore[union-attr]
    moved = float(re.search(r"moved ([0-9.]+) Mbit/s", line).group(1))  # type: ignore[union-attr]
    steady = float(re.search(r"\(([0-9.]+) once up to speed\)", line).group(1))  # type: ignore[union-attr]
    assert tried == min(n, MAX_STREAMS)
    assert steady >= moved  # the median of the second half, never below the average
    assert steady >= 0.8 * min(tried * per, capacity), (line, per, capacity)
