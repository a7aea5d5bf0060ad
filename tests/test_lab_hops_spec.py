"""Multi-hop lab specs without building anything: `--hops`/`--hop` parsing, validation,
JSON round trip (the state file), addresses."""

from __future__ import annotations

import pytest

from tcpwizard.exitcodes import UsageError
from tcpwizard.lab import hops
from tcpwizard.lab.cliparse import build_spec, hops_from, parse_hop
from tcpwizard.lab.spec import HopSpec, LabSpec


def _hops(count: int, *texts: str) -> tuple[HopSpec, ...]:
    return hops_from(count, [parse_hop(t) for t in texts])


def test_parse_hops() -> None:
    got = _hops(4, "2:rtt=40ms,icmp-ratelimit=1s", "3:loss=1%,mtu=1500", "4:drop-frag-needed")
    assert got == (
        HopSpec(),
        HopSpec(rtt_s=0.040, icmp_ratelimit_ms=1000),
        HopSpec(loss=0.01, mtu=1500),
        HopSpec(drop_frag_needed=True),
    )
    assert _hops(0) == ()


@pytest.mark.parametrize(
    "bad",
    [
        "5:rtt=1ms",
        "x:rtt=1ms",
        "2:colour=blue",
        "2:mtu=big",
        "2:mtu=1000",  # IPv6 needs 1280
        "2:drop-frag-needed=maybe",
        "2:rtt=-1ms",
        "2:loss=100%",
    ],
)
def test_parse_hops_rejects(bad: str) -> None:
    with pytest.raises(UsageError):
        _hops(4, bad)


def test_a_hop_given_twice_is_refused() -> None:
    with pytest.raises(UsageError, match="twice"):
        _hops(3, "2:rtt=1ms", "2:loss=1%")


def test_spec_with_hops_round_trips_and_validates() -> None:
    spec = build_spec(name="x", rtt_s=0.002, rate_bps=100e6, hops=_hops(3, "2:rtt=40ms"))
    assert spec.rtt_s == pytest.approx(0.042)
    assert LabSpec.from_json(spec.to_json()) == spec
    with pytest.raises(UsageError, match="hop 1's link is the lab's bottleneck"):
        LabSpec.symmetric(hops=(HopSpec(rtt_s=0.01),), name="x").validate()
    with pytest.raises(UsageError, match="mtu"):
        LabSpec.symmetric(hops=(HopSpec(), HopSpec(mtu=500)), name="x").validate()
    with pytest.raises(UsageError, match="delay line"):
        LabSpec.symmetric(hops=(HopSpec(),), name="x", backend="netem").validate()


def test_hop_addresses() -> None:
    spec = LabSpec.symmetric(name="demo", hops=(HopSpec(), HopSpec(mtu=1500)))
    a = hops.addresses(spec)
    assert a.a4 == hops.link_addresses("demo", 1).up4
    assert a.b4 == hops.link_addresses("demo", 3).down4
    assert hops.hop_address(spec, 2) == hops.link_addresses("demo", 2).down4
    assert hops.link_mtu(spec, 2) == 1500 and hops.link_mtu(spec, 3) == 1500
    assert hops.routers(spec) == ["demo-r1", "demo-r2"]
