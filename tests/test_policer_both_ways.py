"""One bucket, two ways (advice/rules/policer_both_ways.py): a policer BBR shows one way
explains the losses of a Reno window the other way, at the same plateau."""

from __future__ import annotations

import dataclasses

import pytest

from tcpwizard.advice.diagnose import Evidence, diagnose
from tcpwizard.advice.rules import policer_both_ways
from tcpwizard.measure.model import CapacityEstimate, TransferResult
from tcpwizard.measure.probes.availbw import AvailBandwidth

from .test_policer_bloat_rules import audit, policed, transfer


def two_ways(up_rate: float) -> Evidence:
    """Down: BBR policed at 19.3 Mbit/s of a 100 Mbit/s line over 40 ms, its probe a weak
    one (serve's mini-trains), so its capacity is what it moved. Up: Reno at `up_rate`, one
    retransmission per interval from the start (no burst, no queue): its rate sits within
    the loss bound of its own loss, the congestion rule's signature."""
    ev = policed(cc="bbr")
    assert ev.transfer is not None and ev.path is not None
    down = dataclasses.replace(ev.transfer.modes[0], direction="down")
    n = 20
    up = transfer([up_rate] * n, [40.3] * n, [1] * n, "reno").modes[0]
    weak = CapacityEstimate(100, "mini-trains (down)", 0.6)
    return dataclasses.replace(
        ev,
        local=audit("reno"),
        peer=audit("bbr"),
        path=dataclasses.replace(ev.path, capacity_down=weak),
        transfer=TransferResult((up, down)),
    )


@pytest.mark.parametrize("rate", [19.3, 17.0])
def test_the_other_way_at_the_policed_plateau_is_the_same_bucket(rate: float) -> None:
    d = diagnose(two_ways(rate))
    v = d.verdict
    assert (v.limiting_factor, v.host_to_fix) == ("policer", "path")
    assert any(e.startswith("up: settled at") and "the same plateau" in e for e in v.evidence)
    # Each way's sender paces below the bucket; Reno's is also told of BBR.
    assert {f.host for f in d.fixes if f.id == "policer-fq-maxrate"} == {"local", "peer"}
    assert [f.host for f in d.fixes if f.id == "policer-bbr"] == ["local"]


def test_without_the_law_the_slower_way_reads_congestion_on_this_host(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The control: the up way moved the smaller share of its capacity, so its loss speaks."""
    monkeypatch.setattr(policer_both_ways, "same_bucket", lambda ev, b, c, d: b)
    v = diagnose(two_ways(19.3)).verdict
    assert (v.limiting_factor, v.host_to_fix) == ("congestion", "local")


def test_the_other_way_well_below_the_plateau_keeps_its_own_verdict() -> None:
    """Under the least a Reno sawtooth runs at beneath the bucket (half its rate, less the
    plateau's spread: 0.425 of it) is not the bucket's rate: its loss is its own."""
    v = diagnose(two_ways(6.0)).verdict
    assert (v.limiting_factor, v.host_to_fix) == ("congestion", "local")
    assert not any("the same plateau" in e for e in v.evidence)


def test_a_loss_based_way_down_its_sawtooth_is_the_same_bucket() -> None:
    """Reno cut to half its window at each overflow runs between half the bucket's rate and
    the rate: at 0.47 of it, still the same bucket (the rule read it as its own before)."""
    v = diagnose(two_ways(9.0)).verdict
    assert (v.limiting_factor, v.host_to_fix) == ("policer", "path")
    assert any("the same plateau" in e for e in v.evidence)


def _shared_reading(ev: Evidence) -> Evidence:
    """The available-bandwidth probe through the same bucket: 4 of 10 streams met its
    drops and waits, about a fifth of the line free (scenario matrix 20261201.45)."""
    assert ev.path is not None
    free = AvailBandwidth(22e6, 0.0, 30e6, 100e6, 1.8, 10, 4, 460)
    return dataclasses.replace(ev, path=dataclasses.replace(ev.path, available=free))


def test_a_way_read_as_cross_traffic_at_the_policed_plateau_is_the_same_bucket() -> None:
    v = diagnose(_shared_reading(two_ways(19.3))).verdict
    assert (v.limiting_factor, v.host_to_fix) == ("policer", "path")
    assert any("read there as cross-traffic" in e for e in v.evidence)


def test_without_the_law_the_policed_way_reads_cross_traffic(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(policer_both_ways, "same_bucket", lambda ev, b, c, d: b)
    v = diagnose(_shared_reading(two_ways(19.3))).verdict
    assert v.limiting_factor == "cross-traffic"
