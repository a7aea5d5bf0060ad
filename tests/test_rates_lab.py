"""Rates a user can trust, over the emulated WAN: on a path two other TCP flows share, the
rate reported is what our flow got (the bytes the far end's kernel took in, counted by
nftables), not the line rate; and no rate in `lab demo`'s output exceeds the lab's line rate
(docs/transfer.md, "How rates are computed")."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from typing import Any

import pytest

from tcpwizard.lab import Lab, LabSpec
from tcpwizard.lab.ratecheck import TOLERANCE, over_line
from tcpwizard.lab.serving import serving
from tcpwizard.lab.traffic import CrossTraffic
from tests.lab_fixtures import LabFactory
from tests.majority import until_decided

pytestmark = pytest.mark.lab
SPEC = LabSpec.symmetric(100e6, 0.020)
PORT = 5301
TABLE = "twrates"
HEADERS = 52  # IPv4 + TCP with timestamps, per data packet


def _counter(lab: Lab) -> tuple[int, int]:
    """(bytes, packets) of TCP to serve's port that reached b's kernel."""
    out = lab.run("b", ["nft", "-j", "list", "table", "inet", TABLE],
                  capture_output=True, text=True, check=True).stdout  # fmt: skip
    for item in json.loads(out)["nftables"]:
        rule = item.get("rule")
        if rule is None:
            continue
        for expr in rule["expr"]:
            if "counter" in expr:
                return int(expr["counter"]["bytes"]), int(expr["counter"]["packets"])
    raise AssertionError("no counter in the nft table")


def _check(lab: Lab) -> dict[str, Any]:
    proc = lab.run(
        "a",
        [sys.executable, "-m", "tcpwizard", "check", lab.addr_b, "--port", str(PORT),
         "--modes", "autotune", "--direction", "up", "--duration", "4", "--json"],
        capture_output=True, text=True, timeout=90, check=False,
    )  # fmt: skip
    doc: dict[str, Any] = json.loads(proc.stdout)
    return doc


def _settled_mbps(samples: list[dict[str, Any]]) -> float:
    """The receiver's own count over the second half: bytes / time, no windows."""
    first, last = samples[len(samples) // 2 - 1], samples[-1]
    got = last["delivered_bytes"] - first["delivered_bytes"]
    return float(got * 8 / (last["t_s"] - first["t_s"]) / 1e6)


def _judge(doc: dict[str, Any], counted_bytes: int, line_mbps: float) -> str:
    m = next(m for m in doc["transfer"]["modes"] if m["mode"] == "autotune")
    counted = counted_bytes * 8 / m["seconds"] / 1e6
    current = doc["verdict"]["wizard_gap"]["current_mbps"]
    settled = _settled_mbps(m["samples"])
    # The verdict's current rate: once up to speed where the path is the limit (what the
    # receiver counted over the settled part), else the whole transfer's (what nft counted).
    healthy = doc["verdict"]["limiting_factor"] == "path-capacity"
    truth = settled if healthy else counted
    # nft counts the whole span; a timed rate stops where the sender stopped writing, and
    # autotune's send buffer (megabytes at ~30 Mbit/s: a second or more) then drains at
    # whatever the shared path gives: the two spans' rates differ by that drain's share.
    tolerance = 0.05 if healthy else 0.10
    ok = (
        m["error"] is None
        # The transfer's bytes are those that reached the far end's kernel (its timed rate,
        # throughput_mbps, stops where the sender stopped writing: docs/transfer.md).
        and abs(m["bytes"] - counted_bytes) <= 0.05 * counted_bytes
        and current is not None
        and abs(current - truth) <= tolerance * truth
        # Two other flows take their share: ours is not the line rate.
        and current < 0.8 * line_mbps
        and not over_line(doc, line_mbps)
    )
    return (
        f"{'ok' if ok else 'BAD'}: {m['bytes'] * 8 / m['seconds'] / 1e6:.1f} reported, "
        f"{counted:.1f} counted "
        f"by nft; verdict {doc['verdict']['limiting_factor']} at {current}, "
        f"{settled:.1f} received over the second half; over the line: "
        f"{over_line(doc, line_mbps)}"
    )


def test_on_a_shared_path_the_rate_is_what_our_flow_got(lab_factory: LabFactory) -> None:
    if shutil.which("nft") is None:
        pytest.skip("nftables is not installed (make system-deps)")
    lab = lab_factory.fresh(SPEC)
    rules = (
        f"table inet {TABLE} {{\n chain input {{\n"
        "  type filter hook input priority 0; policy accept;\n"
        f"  tcp dport {PORT} counter\n }}\n}}\n"
    )
    lab.run("b", ["nft", "-f", "-"], input=rules, text=True, check=True)

    def attempt() -> str:
        before = _counter(lab)
        doc = _check(lab)
        after = _counter(lab)
        # What reached b's kernel less each packet's headers: the payload our flow
        # got (the control connection's few lines are well within the tolerance).
        got = after[0] - before[0] - HEADERS * (after[1] - before[1])
        return _judge(doc, got, lab.line_rate_mbps)

    with serving(lab, "b", PORT), CrossTraffic(lab, tcp_flows=2, duration_s=60):
        tries = until_decided(attempt, lambda t: t.startswith("ok"))
    assert sum(t.startswith("ok") for t in tries) >= 2, tries


RATE = re.compile(r"(\d+(?:\.\d+)?) ([MG])bit/s(?! per MB)")
NIC_SPEED = re.compile(r"NIC\s+\d+(?:\.\d+)?\s+[MG]bit/s|\d+(?:\.\d+)?\s+[MG]bit/s\s+NIC")


def test_no_rate_in_the_demo_exceeds_the_line_rate() -> None:
    if shutil.which("iperf3") is None:
        pytest.skip("iperf3 is not installed")
    proc = subprocess.run(
        [sys.executable, "-m", "tcpwizard", "lab", "demo"],
        capture_output=True, text=True, timeout=240, check=False,
    )  # fmt: skip
    if "root" in proc.stderr and proc.returncode != 0:
        pytest.skip("the lab needs root")
    assert proc.returncode == 0, proc.stderr[-600:]
    # An interface's link speed is a fact of the device (the lab's veth says 10 Gbit/s),
    # not a figure measured on the path.
    text = NIC_SPEED.sub("", proc.stdout)
    rates = [float(v) * (1000 if unit == "G" else 1) for v, unit in RATE.findall(text)]
    assert rates, proc.stdout
    assert max(rates) <= 100 * TOLERANCE, [r for r in rates if r > 100 * TOLERANCE]
