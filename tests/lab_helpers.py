"""What several lab test files share: the 100 Mbit/s x 50 ms lab with one host's buffer
shrunk, an iperf3 upload captured by tcpdump for the tests that judge a capture, and an
iperf3 upload that `conns` watches. Specs are
module constants so the session's lab cache builds each lab once across files."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tcpwizard.lab import Lab, LabSpec
from tcpwizard.lab.netns import stop
from tcpwizard.lab.serving import iperf3_serving, tcpwizard_argv
from tcpwizard.lab.tools import capturing

RATE, RTT = 100e6, 0.050
SMALL_RMEM = (("net.ipv4.tcp_rmem", "4096 65536 262144"),)
SMALL_WMEM = (("net.ipv4.tcp_wmem", "4096 16384 131072"),)
HEALTHY = LabSpec.symmetric(RATE, RTT)
SMALL_RMEM_A = LabSpec.symmetric(RATE, RTT, sysctls_a=SMALL_RMEM)
SMALL_RMEM_B = LabSpec.symmetric(RATE, RTT, sysctls_b=SMALL_RMEM)
SMALL_WMEM_A = LabSpec.symmetric(RATE, RTT, sysctls_a=SMALL_WMEM)
SMALL_WMEM_B = LabSpec.symmetric(RATE, RTT, sysctls_b=SMALL_WMEM)


def capture_upload(lab: Lab, path: Path, seconds: int = 5) -> float:
    """tcpdump on a's WAN interface (headers only) during an iperf3 upload to b; the
    goodput iperf3 reported, Mbit/s."""
    with capturing(lab, path), iperf3_serving(lab, "b"):
        out = lab.run(
            "a",
            ["iperf3", "-c", lab.addr_b, "-t", str(seconds), "-J"],
            capture_output=True,
            text=True,
            timeout=seconds + 30,
            check=True,
        )
    mbps: float = json.loads(out.stdout)["end"]["sum_received"]["bits_per_second"] / 1e6
    return mbps


def upload_verdict(
    lab: Lab, iperf3_args: Sequence[str], watch_after_s: float, conns_args: Sequence[str]
) -> dict[str, Any]:
    """Debian's iperf3 uploading from a to b (an iperf3 server must be running in b);
    `conns --json` in a once `watch_after_s` have passed: the verdict of the one busy
    connection ({} when there is not exactly one)."""
    upload = lab.popen(
        "a",
        ["iperf3", "-c", lab.addr_b, *iperf3_args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        time.sleep(watch_after_s)
        conns = lab.run(
            "a",
            tcpwizard_argv("conns", "--json", "--port", "5201", *conns_args),
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        upload.wait(timeout=30)
    finally:
        stop(upload)
    busy = [c for c in json.loads(conns.stdout)["connections"] if c["verdict"] is not None]
    verdict: dict[str, Any] = busy[0]["verdict"] if len(busy) == 1 else {}
    return verdict
