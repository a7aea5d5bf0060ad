"""`check --pcap` on captures taken by Debian's real tcpdump in the lab during real iperf3
uploads from host a with a known misconfiguration (the analysis runs in host a, so a's
address is "local"):

- the receiver's tcp_rmem max at 256 KB: receiver-window at the far end (also read as pcapng);
- the sender's (a's) tcp_wmem max at 128 KB: sender-buffer here;
- healthy: path-capacity, from headers only;
- window scaling off at the receiver: window-scaling at the far end."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from tcpwizard.lab import Lab, LabSpec
from tcpwizard.lab.serving import check_pcap
from tests.lab_fixtures import LabFactory
from tests.lab_helpers import HEALTHY, RATE, RTT, SMALL_RMEM_B, SMALL_WMEM_A, capture_upload
from tests.schemas import committed_schema

pytestmark = [
    pytest.mark.lab,
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tcpdump") is None, reason="tcpdump not installed"),
    pytest.mark.skipif(shutil.which("iperf3") is None, reason="iperf3 not installed"),
]
SCHEMA = committed_schema("capture")
NO_SCALING_B = LabSpec.symmetric(RATE, RTT, sysctls_b=(("net.ipv4.tcp_window_scaling", "0"),))


def _check(lab: Lab, path: Path) -> tuple[int, Any, str]:
    proc = check_pcap(lab, path)
    doc = json.loads(proc.stdout)
    return proc.returncode, doc, proc.stderr


@pytest.mark.parametrize(
    ("spec", "factor", "host", "fix_key"),
    [
        (SMALL_RMEM_B, "receiver-window", "peer", "net.ipv4.tcp_rmem"),
        (SMALL_WMEM_A, "sender-buffer", "local", "net.ipv4.tcp_wmem"),
        (HEALTHY, "path-capacity", None, None),
        (NO_SCALING_B, "window-scaling", "peer", "net.ipv4.tcp_window_scaling"),
    ],
    ids=["small-rmem-receiver", "small-wmem-sender", "healthy", "no-window-scaling"],
)
def test_capture_is_named(
    lab_factory: LabFactory,
    tmp_path: Path,
    spec: LabSpec,
    factor: str,
    host: str | None,
    fix_key: str | None,
) -> None:
    lab = lab_factory(spec)
    pcap = tmp_path / "upload.pcap"
    iperf3_mbps = capture_upload(lab, pcap)
    code, doc, err = _check(lab, pcap)
    jsonschema.validate(doc, SCHEMA)
    d = doc["diagnosis"]
    assert d is not None, (doc, err)
    v = d["verdict"]
    assert (v["limiting_factor"], v["host_to_fix"]) == (factor, host), v
    flow = d["flow"]
    assert flow["sender"]["address"] == lab.addr_a and flow["receiver"]["port"] == 5201
    assert d["sender_host"] == "local" and d["receiver_host"] == "peer"
    assert flow["handshake"] is True and flow["rtt_min_ms"] == pytest.approx(50, abs=3)
    # The capture's rate is the one iperf3 measured.
    assert flow["rate_mbps"] == pytest.approx(iperf3_mbps, rel=0.15), (flow, iperf3_mbps)
    if fix_key is None:
        assert code == 0 == doc["exit_code"] and d["fixes"] == []
        return
    assert code == 1 == doc["exit_code"]
    if factor == "receiver-window":  # the smallest capture: the same flow as pcapng
        _also_as_pcapng(lab, pcap, tmp_path, factor)
    assert any(f["key"] == fix_key and f["host"] == host for f in d["fixes"]), d["fixes"]
    if factor == "window-scaling":
        assert flow["window_scaling"] is False and flow["max_window"] <= 65535
        assert flow["receiver_syn"]["wscale"] is None and flow["sender_syn"]["wscale"] is not None


def _also_as_pcapng(lab: Lab, pcap: Path, tmp_path: Path, factor: str) -> None:
    from scapy.layers.inet import IP
    from scapy.utils import PcapNgWriter, RawPcapReader

    ng = tmp_path / "upload.pcapng"
    writer = PcapNgWriter(str(ng))
    for data, meta in RawPcapReader(str(pcap)):
        pkt = IP(data)
        pkt.time = meta.sec + meta.usec / 1e6
        writer.write(pkt)
    writer.close()
    code, doc, err = _check(lab, ng)
    assert code == 1, err
    assert doc["diagnosis"]["verdict"]["limiting_factor"] == factor
