"""`check` against far ends that do not run serve, over the emulated WAN with Debian's real
iperf3 binary and real kernel TCP: iperf3 as the far end (measured both ways), a far end
that offers only a plain TCP port (the handshake, a prediction), and one that answers
nothing but ICMP."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from typing import Any

import jsonschema
import pytest

from tcpwizard.lab import Lab, LabSpec
from tcpwizard.lab.ratecheck import over_line
from tcpwizard.lab.serving import iperf3_serving, tcpwizard_argv, wait_port
from tcpwizard.lab.tools import iperf3_tcp
from tests.lab_fixtures import LabFactory
from tests.schemas import committed_schema

pytestmark = [
    pytest.mark.lab,
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("iperf3") is None, reason="iperf3 not installed"),
]
SCHEMA = committed_schema("report")
RATE, RTT = 80e6, 0.060
SMALL_RMEM = LabSpec.symmetric(RATE, RTT, sysctls_b=(("net.ipv4.tcp_rmem", "4096 65536 262144"),))
HEALTHY = LabSpec.symmetric(RATE, RTT)
NO_SCALING = LabSpec.symmetric(RATE, RTT, sysctls_b=(("net.ipv4.tcp_window_scaling", "0"),))


def _check(lab: Lab, *args: str, fmt: str = "--json") -> tuple[int, Any, str]:
    proc = lab.run(
        "a",
        tcpwizard_argv("check", *args, *([fmt] if fmt else []), "--no-history"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    doc = json.loads(proc.stdout) if fmt == "--json" else proc.stdout
    if fmt == "--json":
        assert over_line(doc, lab.line_rate_mbps) == [], "a rate above the lab's line rate"
    return proc.returncode, doc, proc.stderr


def _mode(doc: Any, mode: str, direction: str) -> dict[str, Any]:
    found = [
        m
        for m in doc["transfer"]["modes"]
        if m["mode"] == mode and m["direction"] == direction and m["error"] is None
    ]
    assert found, f"no measured {mode} {direction}: {doc['transfer']['modes']}"
    first: dict[str, Any] = found[0]
    return first


def test_small_receive_buffer_at_an_iperf3_far_end(lab_factory: LabFactory) -> None:
    # Both ways: without serve's reflector the probe is a guess, and the download, which
    # no window holds, is what shows the path carries more than the upload moved. (How
    # close each mode's rate is to iperf3's own client is the healthy test's below.)
    lab = lab_factory(SMALL_RMEM)
    with iperf3_serving(lab, "b"):
        code, doc, _ = _check(lab, lab.addr_b, "--duration", "4")
    jsonschema.validate(doc, SCHEMA)
    v = doc["verdict"]
    assert (v["limiting_factor"], v["host_to_fix"]) == ("receiver-window", "peer"), v
    assert code == doc["exit_code"] == 2
    assert doc["measured"] is True and doc["far_end"]["kind"] == "iperf3"
    assert doc["peer_handshake"]["window_scaling"] is True
    # Held to the window: 256 KB of buffer offers about half of it, ~17 Mbit/s at 60 ms.
    up = _mode(doc, "autotune", "up")
    assert up["throughput_mbps"] < 0.5 * RATE / 1e6, up["throughput_mbps"]
    assert any(f["key"] == "net.ipv4.tcp_rmem" and f["host"] == "peer" for f in doc["fixes"])


def test_healthy_iperf3_far_end_matches_iperf3_itself(lab_factory: LabFactory) -> None:
    lab = lab_factory(HEALTHY)
    with iperf3_serving(lab, "b"):
        code, doc, _ = _check(
            lab,
            lab.addr_b,
            "--modes",
            "untuned,autotune",
            "--direction",
            "both",
            "--duration",
            "3",
        )
    assert doc["verdict"]["limiting_factor"] == "path-capacity", doc["verdict"]
    assert code == 0
    # The same window setting through iperf3's own client (-w 64K is our untuned mode).
    for mode, direction, extra, tolerance in (
        ("untuned", "up", ("-w", "64K"), 0.05),
        ("untuned", "down", ("-w", "64K", "-R"), 0.05),
        ("autotune", "up", (), 0.08),
        ("autotune", "down", ("-R",), 0.08),
    ):
        ref = iperf3_tcp(lab, "a", seconds=3.0, extra=extra).receiver_bps / 1e6
        ours = _mode(doc, mode, direction)["throughput_mbps"]
        assert ours == pytest.approx(ref, rel=tolerance), (mode, direction, ours, ref)


def test_one_off_iperf3_over_ipv6_with_four_streams(lab_factory: LabFactory) -> None:
    lab = lab_factory(HEALTHY)
    with iperf3_serving(lab, "b", 5201, "-1"):
        code, doc, _ = _check(
            lab, lab.addr6_b, "--iperf3-port", "5201", "--streams", "4", "--duration", "2"
        )
    jsonschema.validate(doc, SCHEMA)
    first = doc["transfer"]["modes"][0]
    assert first["error"] is None and first["streams"] == 4 and first["throughput_mbps"] > 40
    later = [m for m in doc["transfer"]["modes"][1:] if m["error"]]
    assert later and "one-off" in later[0]["error"]  # the server ran its one test and left
    assert doc["measured"] is True and code in (0, 1, 2)


def test_busy_iperf3_gives_one_line_and_exit_3(lab_factory: LabFactory) -> None:
    lab = lab_factory(HEALTHY)
    with iperf3_serving(lab, "b"):
        hog = lab.popen("a", ["iperf3", "-c", lab.addr_b, "-t", "20"], stdout=subprocess.DEVNULL)
        try:
            time.sleep(1.0)
            code, doc, _err = _check(lab, lab.addr_b, "--iperf3-port", "5201")
            text_code, text, _ = _check(lab, lab.addr_b, "--iperf3-port", "5201", fmt="")
        finally:
            hog.kill()
            hog.wait()
    jsonschema.validate(doc, SCHEMA)
    assert code == doc["exit_code"] == 3 and "busy" in doc["error"]
    assert text_code == 3 and "busy" in text.splitlines()[1]  # the line under the header


def test_window_scaling_off_behind_a_plain_tcp_port(lab_factory: LabFactory) -> None:
    lab = lab_factory(NO_SCALING)
    web = lab.popen(
        "b",
        [sys.executable, "-m", "http.server", "--bind", lab.addr_b, "8080"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_port(lab, "b", 8080)
        code, doc, _ = _check(lab, lab.addr_b, "--tcp-port", "8080")
        code_p, doc_p, _ = _check(lab, lab.addr_b, "--tcp-port", "8080", "--allow-predicted")
    finally:
        web.kill()
        web.wait()
    jsonschema.validate(doc, SCHEMA)
    v = doc["verdict"]
    assert (v["limiting_factor"], v["host_to_fix"]) == ("window-scaling", "peer"), v
    assert doc["measured"] is False and doc["transfer"] is None
    assert doc["peer_handshake"]["window_scaling"] is False
    assert code == 3  # a prediction is UNKNOWN unless asked for
    assert code_p in (1, 2) and doc_p["verdict"]["limiting_factor"] == "window-scaling"
    assert any(f["key"] == "net.ipv4.tcp_window_scaling" for f in doc["fixes"])


def test_nothing_but_icmp_is_unknown(lab_factory: LabFactory) -> None:
    lab = lab_factory(HEALTHY)
    code, line, _ = _check(lab, lab.addr_b, fmt="--format=nagios")
    assert code == 3 and line.startswith("TCPWIZARD UNKNOWN"), line
    assert "neither tcpwizard serve nor iperf3" in line
    code, doc, _ = _check(lab, lab.addr_b)
    jsonschema.validate(doc, SCHEMA)
    assert code == doc["exit_code"] == 3 and doc["measured"] is False
    assert doc["verdict"]["limiting_factor"] != "path-capacity"
