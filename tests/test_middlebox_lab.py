"""A device that rewrites the TCP handshake, made by the lab with nftables (`lab up
--middlebox`), seen by real programs over the emulated WAN:

- `check` against serve: serve reports the SYN it received (TCP_SAVED_SYN) without the
  window scale option this host sent: `middlebox`, host `path`, never a buffer fix;
- `check --pcap` on Debian's tcpdump of a real iperf3 upload: the SYN carries NOP padding
  where the option was: `middlebox`, host `path`.
Each judged on the majority of its tries."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tcpwizard.lab import LabSpec
from tcpwizard.lab.serving import serving, tcpwizard_argv
from tcpwizard.lab.spec import MiddleboxSpec
from tests.lab_fixtures import LabFactory
from tests.test_pcap_lab import capture_upload

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
    assert verdicts.count(("middlebox", "path")) >= NEEDED, verdicts


@pytest.mark.skipif(shutil.which("tcpdump") is None, reason="tcpdump not installed")
@pytest.mark.skipif(shutil.which("iperf3") is None, reason="iperf3 not installed")
def test_capture_of_iperf3_names_the_device(lab_factory: LabFactory, tmp_path: Path) -> None:
    lab = lab_factory(STRIP_WSCALE)
    verdicts = []
    for i in range(TRIES):
        pcap = tmp_path / f"upload{i}.pcap"
        capture_upload(lab, pcap, seconds=3)
        proc = lab.run(
            "a",
            tcpwizard_argv("check", "--pcap", str(pcap), "--json", "--no-history"),
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        d = json.loads(proc.stdout)["diagnosis"]
        v = d["verdict"]
        verdicts.append((v["limiting_factor"], v["host_to_fix"]))
        if verdicts.count(("middlebox", "path")) >= NEEDED:
            break
    assert verdicts.count(("middlebox", "path")) >= NEEDED, verdicts
