"""A device that rewrites the TCP handshake, made by the lab with nftables (`lab up
--middlebox`), seen by real programs over the emulated WAN:

- `check` against serve: serve reports the SYN it received (TCP_SAVED_SYN) without the
  window scale option this host sent: `middlebox`, host `path`, never a buffer fix;
- `check --pcap` on Debian's tcpdump of a real iperf3 upload: the SYN carries NOP padding
  where the option was: `middlebox`, host `path`;
- `conns --hops` during a real iperf3 upload through routers: the routers' quotes of this
  host's SYN show the option taken out past hop 2: `middlebox`, host `path`.
Each judged on the majority of its tries."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tcpwizard.lab import LabSpec
from tcpwizard.lab.serving import check_pcap, iperf3_serving, serving, tcpwizard_argv
from tcpwizard.lab.spec import HopSpec, MiddleboxSpec
from tests.lab_fixtures import LabFactory
from tests.lab_helpers import capture_upload, upload_verdict

pytestmark = [pytest.mark.lab, pytest.mark.slow]
TRIES, NEEDED = 3, 2
STRIP_WSCALE = LabSpec.symmetric(100e6, 0.050, middlebox=MiddleboxSpec(("window",)))


def test_check_names_the_device_that_strips_window_scaling(lab_factory: LabFactory) -> None:
    lab = lab_factory(STRIP_WSCALE)
    verdicts = []
    with serving(lab, "b"):
        for _ in range(TRIES):
            proc = lab.run(
                "a",
                tcpwizard_argv("check", lab.addr_b, "--json", "--quick", "--no-history"),
                capture_output=True, text=True, timeout=120, check=False,
            )  # fmt: skip
            doc = json.loads(proc.stdout)
            v = doc["verdict"]
            verdicts.append((v["limiting_factor"], v["host_to_fix"]))
            hs = doc["peer_handshake"]
            assert hs["received_syn"]["wscale"] is None and hs["received_syn"]["nops"] > 2
            assert [t["option"] for t in hs["tampering"]] == ["window scaling"]
            # The fix is the device's: never a sysctl or a buffer on either host.
            if v["limiting_factor"] == "middlebox":
                assert [(f["host"], f["kind"]) for f in doc["fixes"]] == [("path", "other")]
            if verdicts.count(("middlebox", "path")) >= NEEDED:
                break
    assert verdicts.count(("middlebox", "path")) >= NEEDED, verdicts


@pytest.mark.skipif(shutil.which("tcpdump") is None, reason="tcpdump not installed")
@pytest.mark.skipif(shutil.which("iperf3") is None, reason="iperf3 not installed")
def test_capture_of_iperf3_names_the_device(lab_factory: LabFactory, tmp_path: Path) -> None:
    lab = lab_factory(STRIP_WSCALE)
    verdicts = []
    for i in range(TRIES):
        pcap = tmp_path / f"upload{i}.pcap"
        capture_upload(lab, pcap, seconds=3)
        d = json.loads(check_pcap(lab, pcap).stdout)["diagnosis"]
        v = d["verdict"]
        verdicts.append((v["limiting_factor"], v["host_to_fix"]))
        if verdicts.count(("middlebox", "path")) >= NEEDED:
            break
    assert verdicts.count(("middlebox", "path")) >= NEEDED, verdicts


HOPS_STRIP = LabSpec.symmetric(
    100e6,
    0.050,
    hops=(HopSpec(), HopSpec(), HopSpec()),
    middlebox=MiddleboxSpec(("window",), hop=2),
)


def _conns_of_an_iperf3_upload(lab: Any, hops: bool) -> dict[str, Any]:
    """Debian's iperf3 uploading from a to b; `conns --json` in a half-way through: the
    verdict of the one busy connection ({} when there is not exactly one)."""
    hops_args = ["--hops"] if hops else []
    with iperf3_serving(lab, "b"):
        return upload_verdict(lab, ["-t", "6"], 2.0, ["--interval", "1.5s", *hops_args])


@pytest.mark.skipif(shutil.which("iperf3") is None, reason="iperf3 not installed")
def test_conns_with_hops_names_the_device_between_hop_2_and_3(lab_factory: LabFactory) -> None:
    """Without hop probes `conns` sees only that the handshake agreed no window scaling
    (`window-scaling`, at the peer: this host offers it); with `--hops` the routers' quotes of
    this host's SYN toward the same port show it taken out past hop 2: `middlebox`, path."""
    lab = lab_factory(HOPS_STRIP)
    plain = _conns_of_an_iperf3_upload(lab, hops=False)
    assert (plain.get("limiting_factor"), plain.get("host_to_fix")) == ("window-scaling", "peer")
    seen = []
    for _ in range(TRIES):
        v = _conns_of_an_iperf3_upload(lab, hops=True)
        seen.append((v.get("limiting_factor"), v.get("host_to_fix")))
        if v.get("limiting_factor") == "middlebox":
            assert any("between hop 2" in e for e in v["evidence"]), v
        if seen.count(("middlebox", "path")) >= NEEDED:
            break
    assert seen.count(("middlebox", "path")) >= NEEDED, seen
