"""`tcpwizard path` end to end over multi-hop labs: router namespaces with real kernel
forwarding (lab/hops.py), the CLI run inside host a.

- 4 routers, the delay on hop 2, 1 % loss from hop 3 on: hop 2 is the RTT jump, hop 3 where
  loss begins (ICMP, UDP with IP_RECVERR, TCP SYN; IPv4 and IPv6);
- the same with ICMP rate limited at hop 2 and no loss: hop 2 is "rate limited", no loss;
- hosts at MTU 9000 behind a 1500-byte hop: that hop and 1500 named;
- the same with the router dropping its "fragmentation needed": the black hole named, and
  the route fix it prints makes a TCP transfer that stalled complete.
"""

from __future__ import annotations

import contextlib
import json
import sys
import textwrap
from typing import Any

import jsonschema
import pytest

from tcpwizard.lab import Lab, LabSpec
from tcpwizard.lab.serving import run_tcpwizard, serving, wait_port
from tcpwizard.lab.spec import HopSpec
from tests.lab_fixtures import LabFactory
from tests.schemas import committed_schema

pytestmark = pytest.mark.lab
SCHEMA = committed_schema("path")
REPORT_SCHEMA = committed_schema("report")

LOSSY = LabSpec.symmetric(
    100e6, 0.002,
    hops=(HopSpec(), HopSpec(rtt_s=0.040), HopSpec(loss=0.01), HopSpec()),
)  # fmt: skip
RATE_LIMITED = LabSpec.symmetric(
    100e6, 0.002,
    hops=(HopSpec(), HopSpec(rtt_s=0.040, icmp_ratelimit_ms=1000), HopSpec(), HopSpec()),
)  # fmt: skip
JUMBO = LabSpec.symmetric(
    100e6, 0.002, mtu=9000, hops=(HopSpec(), HopSpec(), HopSpec(mtu=1500), HopSpec())
)
BLACKHOLE = LabSpec.symmetric(
    100e6, 0.002, mtu=9000,
    hops=(HopSpec(), HopSpec(drop_frag_needed=True), HopSpec(mtu=1500), HopSpec()),
)  # fmt: skip


def path_json(lab: Lab, target: str, *args: str) -> tuple[dict[str, Any], int]:
    proc = run_tcpwizard(lab, "a", "path", target, "--json", "-n", *args, timeout=90)
    assert proc.stdout, proc.stderr
    doc = json.loads(proc.stdout)
    jsonschema.validate(doc, SCHEMA)
    assert doc["exit_code"] == proc.returncode
    return doc, proc.returncode


FAST = ("--count", "1000", "--interval", "1ms")


@pytest.mark.parametrize(
    ("method", "v6"),
    [("icmp", False), ("icmp", True), ("udp", False), ("tcp", False)],
    ids=["icmp4", "icmp6", "udp4", "tcp4"],
)
def test_rtt_jump_and_loss_start(lab_factory: LabFactory, method: str, v6: bool) -> None:
    lab = lab_factory(LOSSY)
    extra = ("--port", "5301") if method == "tcp" else ()
    target = lab.addr6_b if v6 else lab.addr_b
    # The SYNs' open port: serve, listening before the first probe and gone after this try
    # (the lab is shared by the tries).
    port = serving(lab, "b", 5301) if method == "tcp" else contextlib.nullcontext()
    with port:
        doc, code = path_json(lab, target, "--method", method, *FAST, *extra, "--no-mtu")
    assert doc["reached"] and len(doc["hops"]) == 5
    assert doc["rtt_jump"]["hop"] == 2
    assert 38 < doc["rtt_jump"]["ms"] < 46
    assert doc["loss_start"]["hop"] == 3, doc["hops"]
    assert 0.3 < doc["loss_start"]["loss_pct"] < 3.0
    assert [h["real_loss_pct"] for h in doc["hops"][:2]] == [0.0, 0.0]
    assert code == (2 if doc["loss_start"]["loss_pct"] >= 1.0 else 1)  # critical from 1 %
    finding = next(f for f in doc["findings"] if f["id"] == "path-loss")
    assert "from hop 3" in finding["message"]


def test_rate_limited_hop_is_not_loss(lab_factory: LabFactory) -> None:
    lab = lab_factory(RATE_LIMITED)
    doc, code = path_json(lab, lab.addr_b, "--count", "100", "--interval", "5ms", "--no-mtu")
    hops = doc["hops"]
    assert doc["rate_limited_hops"] == [2]
    assert hops[1]["loss_pct"] > 50 and hops[1]["rate_limited"]
    assert hops[1]["real_loss_pct"] == 0.0
    assert doc["loss_start"] is None
    assert all(h["loss_pct"] == 0.0 for h in hops if h["ttl"] != 2)
    assert code == 0  # facts only: no finding above info
    assert doc["rtt_jump"]["hop"] == 2


@pytest.mark.parametrize("v6", [False, True], ids=["ipv4", "ipv6"])
def test_jumbo_host_behind_a_1500_hop(lab_factory: LabFactory, v6: bool) -> None:
    lab = lab_factory(JUMBO)
    doc, code = path_json(lab, lab.addr6_b if v6 else lab.addr_b, "--count", "3")
    m = doc["mtu"]
    assert (m["local_mtu"], m["path_mtu"], m["hop"], m["blackhole"]) == (9000, 1500, 2, False)
    assert m["hop_address"] == doc["hops"][1]["address"]
    finding = next(f for f in doc["findings"] if f["id"] == "path-mtu-smaller")
    assert finding["severity"] == "warn" and "9000" in finding["message"]
    assert code == 1


SENDER = textwrap.dedent(
    """
    import socket, sys
    s = socket.create_connection((sys.argv[1], 5409), timeout=5)
    s.settimeout(4)
    try:
        s.sendall(bytes(2_000_000))
        s.shutdown(socket.SHUT_WR)
        print(s.recv(64).decode())
    except OSError as exc:
        print("stalled:", exc)
    """
)
RECEIVER = textwrap.dedent(
    """
    import socket
    srv = socket.create_server(("", 5409), family=socket.AF_INET6, dualstack_ipv6=True)
    for _ in range(2):
        c, _a = srv.accept()
        c.settimeout(8)
        n = 0
        try:
            while chunk := c.recv(1 << 16):
                n += len(chunk)
            c.sendall(str(n).encode())
        except OSError:
            pass
        c.close()
    """
)


def test_pmtu_black_hole_named_and_fixed(lab_factory: LabFactory) -> None:
    lab = lab_factory.fresh(BLACKHOLE)
    doc, code = path_json(lab, lab.addr_b, "--count", "3")
    m = doc["mtu"]
    assert m["blackhole"] and m["path_mtu"] == 1500 and m["blackhole_hop"] == 2
    assert code == 2
    hole = next(f for f in doc["findings"] if f["id"] == "path-pmtu-blackhole")
    assert "hop 2" in hole["message"]
    fixes = {f["id"]: f for f in doc["fixes"]}
    assert fixes["tcp_mtu_probing"]["command"] == "sysctl -w net.ipv4.tcp_mtu_probing=1"

    server = lab.popen("b", [sys.executable, "-c", RECEIVER])
    try:
        wait_port(lab, "b", 5409)  # the sender must not race the receiver's start
        before = lab.run("a", [sys.executable, "-c", SENDER, lab.addr_b],
                         capture_output=True, text=True, timeout=30).stdout  # fmt: skip
        assert before.startswith("stalled"), before
        # The fix as printed, on the host it names (this one).
        route = fixes["route_mtu"]["command"].split()
        assert lab.run("a", route, capture_output=True, timeout=10).returncode == 0
        after = lab.run("a", [sys.executable, "-c", SENDER, lab.addr_b],
                        capture_output=True, text=True, timeout=30).stdout  # fmt: skip
        assert after.strip() == "2000000", after
    finally:
        server.kill()
        server.wait()


def test_check_hops_names_the_black_hole(lab_factory: LabFactory) -> None:
    """`check --hops` through the same black hole: the hops section names it, its fixes are
    in the report's, and it is critical whatever the transfers did."""
    lab = lab_factory(BLACKHOLE)
    with serving(lab, "b"):
        proc = run_tcpwizard(
            lab, "a", "check", lab.addr_b, "--hops", "--quick", "--hops-count", "3", "--json",
            timeout=120,
        )  # fmt: skip
    doc = json.loads(proc.stdout)
    jsonschema.validate(doc, REPORT_SCHEMA)
    hole = next(f for f in doc["hops"]["findings"] if f["id"] == "path-pmtu-blackhole")
    assert "hop 2" in hole["message"] and "1500" in hole["message"]
    commands = [f["command"] for f in doc["fixes"]]
    assert "sysctl -w net.ipv4.tcp_mtu_probing=1" in commands
    assert any("mtu lock 1500" in c for c in commands)
    assert proc.returncode == doc["exit_code"] == 2
