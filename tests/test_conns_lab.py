"""`conns` over the emulated WAN, judging connections of real programs (Debian's iperf3,
nginx and curl) with real kernel TCP: nothing in the traffic is written for the test.

- iperf3 -c uploading to a far end whose tcp_rmem max is 256 KB: receiver-window, peer;
  on the far end the same connection is this host's receiver-window (local);
- a healthy upload: path-capacity;
- an upload from a sender whose tcp_wmem max is 128 KB: sender-buffer, here;
- nginx sending to `curl --limit-rate` (a reader that sleeps between reads): application,
  at the peer seen from nginx's side, here seen from curl's."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from tcpwizard.lab import Lab, LabSpec
from tcpwizard.lab.netns import stop
from tcpwizard.lab.serving import iperf3_serving, tcpwizard_argv
from tcpwizard.lab.spec import Side
from tests.lab_fixtures import LabFactory
from tests.lab_helpers import HEALTHY, SMALL_RMEM_B, SMALL_WMEM_A
from tests.nginx_helpers import nginx_missing, nginx_serving
from tests.schemas import committed_schema

pytestmark = [
    pytest.mark.lab,
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("iperf3") is None, reason="iperf3 not installed"),
]
SCHEMA = committed_schema("conns")


def _conns(lab: Lab, side: Side, port: int) -> tuple[int, dict[str, Any]]:
    proc = lab.run(
        side,
        tcpwizard_argv("conns", "--json", "--port", str(port), "--interval", "1.5s"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    doc: dict[str, Any] = json.loads(proc.stdout)
    jsonschema.validate(doc, SCHEMA)
    return proc.returncode, doc


def _iperf3_upload(lab: Lab, seconds: int = 11) -> subprocess.Popen[str]:
    """Long enough for both conns runs (each starts Python, then watches 1.5 s) on a loaded
    machine: a connection that closes mid-interval is not judged."""
    return lab.popen(
        "a",
        ["iperf3", "-c", lab.addr_b, "-t", str(seconds), "-J"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )


def _the_transfer(doc: dict[str, Any]) -> dict[str, Any]:
    busy = [c for c in doc["connections"] if c["verdict"] is not None]
    # The data connection; the control one idles.
    assert len(busy) == 1, [(c["role"], c["send_mbps"], c["recv_mbps"]) for c in doc["connections"]]
    found: dict[str, Any] = busy[0]
    return found


@pytest.mark.parametrize(
    ("spec", "factor", "host", "fix_key"),
    [
        (SMALL_RMEM_B, "receiver-window", "peer", "net.ipv4.tcp_rmem"),
        (HEALTHY, "path-capacity", None, None),
        (SMALL_WMEM_A, "sender-buffer", "local", "net.ipv4.tcp_wmem"),
    ],
    ids=["small-rmem-far-end", "healthy", "small-wmem-here"],
)
def test_iperf3_upload_is_named(
    lab_factory: LabFactory, spec: LabSpec, factor: str, host: str | None, fix_key: str | None
) -> None:
    lab = lab_factory(spec)
    with iperf3_serving(lab, "b"):
        client = _iperf3_upload(lab)
        try:
            time.sleep(3.0)  # past slow start
            code, doc = _conns(lab, "a", 5201)
            far_code, far_doc = _conns(lab, "b", 5201) if factor == "receiver-window" else (0, {})
        finally:
            out, _ = client.communicate(timeout=40)
    assert doc["connections"], f"no connection while iperf3 ran: {out[-600:]}"
    c = _the_transfer(doc)
    v = c["verdict"]
    assert (v["limiting_factor"], v["host_to_fix"]) == (factor, host), v
    assert c["role"] == "sending" and c["process"]["name"] == "iperf3"
    assert c["remote"] == {"address": lab.addr_b, "port": 5201}
    iperf3_mbps = json.loads(out)["end"]["sum_received"]["bits_per_second"] / 1e6
    # The rate conns saw in its interval is the rate iperf3 reports for the whole test.
    assert c["send_mbps"] == pytest.approx(iperf3_mbps, rel=0.25), (c["send_mbps"], iperf3_mbps)
    if fix_key is None:
        assert code == 0 and c["fixes"] == [] and iperf3_mbps > 80
        return
    assert code == 1 == doc["exit_code"]
    assert any(f["key"] == fix_key and f["host"] == host for f in c["fixes"]), c["fixes"]
    if factor == "receiver-window":
        # The far end, looking at the same connection: its own receive window (tcp_rmem).
        fc = _the_transfer(far_doc)
        assert far_code == 1 and fc["role"] == "receiving"
        fv = fc["verdict"]
        assert (fv["limiting_factor"], fv["host_to_fix"]) == ("receiver-window", "local"), fv
        rmem = next(f for f in fc["fixes"] if f["key"] == "net.ipv4.tcp_rmem")
        assert rmem["value"].startswith("4096 65536 ")  # its min and default are kept


def test_slow_reading_curl_is_the_application(lab_factory: LabFactory, tmp_path: Path) -> None:
    missing = nginx_missing()
    if missing:
        pytest.skip(missing)
    lab = lab_factory(HEALTHY)
    with nginx_serving(lab, "b", tmp_path / "nginx") as web:
        # curl --limit-rate sleeps between reads: the reader, not the network, is slow.
        curl = lab.popen(
            "a",
            ["curl", "-s", "-o", "/dev/null", "--limit-rate", "2M", "--max-time", "30", web.url],
        )
        try:
            time.sleep(4.0)  # the receive buffer fills and the window closes
            code_b, at_nginx = _conns(lab, "b", web.port)
            code_a, at_curl = _conns(lab, "a", web.port)
        finally:
            stop(curl)
    c = _the_transfer(at_nginx)
    v = c["verdict"]
    assert c["role"] == "sending" and c["process"]["name"] == "nginx"
    assert (v["limiting_factor"], v["host_to_fix"]) == ("application", "peer"), v
    assert c["fixes"] == [] and code_b == 1, c
    assert c["send_mbps"] < 40, c  # curl reads 16 Mbit/s on average, in bursts
    r = _the_transfer(at_curl)
    rv = r["verdict"]
    assert r["role"] == "receiving" and r["process"]["name"] == "curl"
    assert (rv["limiting_factor"], rv["host_to_fix"]) == ("application", "local"), rv
    assert code_a == 1
