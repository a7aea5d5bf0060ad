"""The far end's facts survive the wire and re-judge to the same audit."""

from __future__ import annotations

import json
from typing import cast

import pytest

from tcpwizard.checks.audit import audit
from tcpwizard.checks.facts import (
    FactsError,
    audit_facts,
    facts_from_json,
    facts_json,
    gather_facts,
)
from tcpwizard.checks.hostread import HostReader
from tcpwizard.checks.model import BdpTarget
from tcpwizard.checks.sysctl import SysctlReader


def test_round_trip_gives_the_same_audit() -> None:
    facts = gather_facts("/proc/sys", "127.0.0.1")
    wire = json.loads(json.dumps(facts_json(facts)))
    back = facts_from_json(wire)
    target = BdpTarget(rtt_s=0.1, rate_bps=1e9, source="measured")
    replayed = audit_facts(back, target, role="peer")
    direct = audit(
        SysctlReader("/proc/sys"),
        "127.0.0.1",
        target,
        network=facts.network,
        ram_bytes=facts.ram_bytes,
        page_size=facts.page_size,
        host=HostReader(),
    )
    assert [(f.id, f.severity, f.observed) for f in replayed.findings] == [
        (f.id, f.severity, f.observed) for f in direct.findings
    ]
    # The far end's fixes are addressed to it.
    assert all(x.host == "peer" for f in replayed.findings for x in f.fixes)


def test_measured_bdp_changes_the_judgement() -> None:
    facts = gather_facts("/proc/sys", None)
    short = audit_facts(facts, BdpTarget(0.001, 10e6, "measured"))
    long_fat = audit_facts(facts, BdpTarget(0.3, 10e9, "measured"))
    sev = {"ok": 0, "info": 1, "warn": 2, "crit": 3}
    assert max(sev[f.severity] for f in long_fat.findings) > max(
        sev[f.severity] for f in short.findings
    )


@pytest.mark.parametrize(
    "data",
    [
        None,
        {},
        {"facts_version": 99},
        {"facts_version": 1, "sysctls": {"a": 1}},
        {"facts_version": 1, "sysctls": {}, "network": {"interface": {"name": 3}}},
    ],
)
def test_malformed_facts_are_rejected(data: object) -> None:
    with pytest.raises(FactsError):
        facts_from_json(data)


def _wire() -> dict[str, object]:
    wire = json.loads(json.dumps(facts_json(gather_facts("/proc/sys", "127.0.0.1"))))
    return cast(dict[str, object], wire)


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("network", "interface", "mtu"), "x"),
        (("network", "interface", "mtu"), None),
        (("network", "interface", "rx_packets"), "1"),
        (("network", "interface", "duplex"), "sideways"),
        (("ram_bytes",), 10**400),
        (("ram_bytes",), True),
    ],
)
def test_hostile_facts_are_rejected_not_crashing(path: tuple[str, ...], value: object) -> None:
    wire = _wire()
    node = wire
    for key in path[:-1]:
        child = node[key]
        if child is None:
            pytest.skip("no interface facts on this machine")
        assert isinstance(child, dict)
        node = child
    node[path[-1]] = value
    with pytest.raises(FactsError):
        facts_from_json(wire)


def test_metrics_items_must_be_objects() -> None:
    wire = _wire()
    wire["network"]["metrics"] = [None]  # type: ignore[index]
    with pytest.raises(FactsError):
        facts_from_json(wire)


def test_terminal_escapes_from_the_far_end_are_neutralised() -> None:
    wire = _wire()
    wire["sysctls"]["kernel.hostname"] = "evil\x1b]0;pwned\x07\x1b[31m"  # type: ignore[index]
    facts = facts_from_json(wire)
    assert "\x1b" not in dict(facts.sysctls)["kernel.hostname"]


def test_unusable_peer_settings_leave_the_check_peerless() -> None:
    from tcpwizard.run import audit_peer

    wire = _wire()
    wire["sysctls"]["net.ipv4.tcp_rmem"] = "a b c"  # type: ignore[index]
    peer, why = audit_peer(facts_from_json(wire), None)
    assert peer is None and why is not None and "could not be judged" in why
