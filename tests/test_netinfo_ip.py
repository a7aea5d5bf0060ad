"""The audit's route and interface facts read through `ip -j` (far ends running the zipapp
have no pyroute2) equal what pyroute2 reads, in a throwaway namespace with a route that
carries metrics (window, rtt, initcwnd), for a target and for the default route."""

from __future__ import annotations

import json
import sys

import pytest

from .netns_helpers import needs_netns, ns_run, temp_netns

COMPARE = """
import dataclasses, json, sys
from tcpwizard.checks import netinfo
target = sys.argv[1] or None
out = {}
for name, lookup in (("pyroute2", netinfo.lookup_egress), ("ip", netinfo.lookup_egress_with_ip)):
    info, reason = lookup(target)
    facts = dataclasses.asdict(info) if info else None
    for key in list(facts or {}):
        if key.endswith(("_packets", "_dropped", "_errors")):  # IPv6 chatter moves them
            del facts[key]
    out[name] = [facts, reason]
print(json.dumps(out))
"""

SETUP = (
    ("link", "add", "tw0", "type", "veth", "peer", "name", "tw1"),
    ("link", "set", "tw0", "up"),
    ("link", "set", "tw1", "up"),
    ("addr", "add", "10.9.9.1/24", "dev", "tw0"),
    (
        "route",
        "add",
        "10.8.0.0/16",
        "via",
        "10.9.9.2",
        "dev",
        "tw0",
        "window",
        "65535",
        "rtt",
        "40ms",
        "initcwnd",
        "20",
    ),
    ("route", "add", "default", "via", "10.9.9.3", "dev", "tw0"),
)


@needs_netns
@pytest.mark.netns
@pytest.mark.parametrize("target", ["10.8.1.1", "10.9.9.7", ""])
def test_ip_fallback_reads_what_pyroute2_reads(target: str) -> None:
    with temp_netns("twt-ipj") as ns:
        for args in SETUP:
            assert ns_run(ns, "ip", *args).returncode == 0, args
        out = ns_run(ns, sys.executable, "-c", COMPARE, target)
        assert out.returncode == 0, out.stderr
        both = json.loads(out.stdout)
    assert both["ip"] == both["pyroute2"]
    info = both["ip"][0]
    assert info is not None and info["name"] == "tw0"
    if target == "10.8.1.1":
        assert info["route"] == {
            "destination": "10.8.0.0/16",
            "gateway": "10.9.9.2",
            "window": 65535,
            "rtt_ms": 40,
            "initcwnd": 20,
            "initrwnd": None,
        }
