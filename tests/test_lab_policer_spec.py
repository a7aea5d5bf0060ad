"""The lab's policer: its spec fields, validation, JSON round trip, `lab up` flags and the
nftables rules it loads (the lab tests run them: tests/test_causes_lab.py)."""

from __future__ import annotations

import pytest

from tcpwizard.exitcodes import UsageError
from tcpwizard.lab.cliparse import build_spec, parse_hop, parse_policer, parse_reverse
from tcpwizard.lab.policer import forward_rules, ingress_rules, limit_expr
from tcpwizard.lab.spec import HopSpec, LabSpec, LinkSpec


def test_policer_round_trips_through_json() -> None:
    spec = LabSpec.symmetric(
        100e6, 0.05, name="p", policer_bps=20e6, policer_burst_bytes=65536,
        hops=(HopSpec(), HopSpec(policer_bps=5e6)),
    )  # fmt: skip
    spec.validate()
    assert LabSpec.from_json(spec.to_json()) == spec


def test_old_state_files_without_policer_still_load() -> None:
    data = LabSpec.symmetric(100e6, 0.05, name="p").to_json()
    for link in ("forward", "reverse"):
        del data[link]["policer_bps"], data[link]["policer_burst_bytes"]
    assert LabSpec.from_json(data).forward.policer_bps is None


@pytest.mark.parametrize(
    ("link", "message"),
    [
        (LinkSpec(1e8, 0.01, policer_bps=0.0), "policer rate must be at least"),
        (LinkSpec(1e8, 0.01, policer_burst_bytes=9000), "needs a policer rate"),
        (LinkSpec(1e8, 0.01, policer_bps=1e6, policer_burst_bytes=100), "must hold a packet"),
    ],
)
def test_bad_policers_are_refused(link: LinkSpec, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        link.validate("a->b", 1500)


def test_flags_build_a_policer_each_way_unless_reverse_says_otherwise() -> None:
    pol = parse_policer("rate=20mbit,burst=64KB")
    assert (pol.rate_bps, pol.burst_bytes) == (20e6, 64_000)
    spec = build_spec(name="p", rtt_s=0.05, rate_bps=100e6, policer=pol)
    assert spec.forward.policer_bps == spec.reverse.policer_bps == 20e6
    off = build_spec(
        name="p", rtt_s=0.05, rate_bps=100e6, policer=pol, reverse=parse_reverse("policer=off")
    )
    assert (off.forward.policer_bps, off.reverse.policer_bps) == (20e6, None)
    assert parse_policer("5mbit").rate_bps == 5e6


def test_hop_policer_flag() -> None:
    k, hop = parse_hop("2:policer=25mbit,policer-burst=32KB")
    assert (k, hop.policer_bps, hop.policer_burst_bytes) == (2, 25e6, 32_000)
    with pytest.raises(UsageError, match="policer-burst needs"):
        parse_hop("2:policer-burst=32KB")
    with pytest.raises(UsageError, match="policer-burst needs"):
        parse_reverse("policer-burst=32KB")


def test_nft_rules_drop_what_exceeds_the_rate_in_bytes() -> None:
    assert limit_expr(20e6, None) == "limit rate over 2500000 bytes/second counter drop"
    assert "burst 65536 bytes" in limit_expr(20e6, 65536)
    assert 'iifname "wan0" limit rate over' in ingress_rules(8e6, None, "wan0")
    assert "hook prerouting priority -300" in ingress_rules(8e6, None, "wan0")
    assert "hook forward" in forward_rules(8e6, None, "l2")
