"""A rate limit in a host's own egress queue: tc's output read (checks/shaper.py), the audit's
`interface_shaper` finding, and the verdict (advice/rules/egress_shaper.py): a transfer that
settled at the sender's shaper is `interface` on that host, not a healthy path the probe
measured through the same queue. The tc texts are what this machine's iproute2 printed."""

from __future__ import annotations

from pathlib import Path

import pytest

from tcpwizard.advice.diagnose import Evidence, diagnose
from tcpwizard.checks.audit import audit
from tcpwizard.checks.hostread import RecordedHost
from tcpwizard.checks.model import BdpTarget, HostAudit
from tcpwizard.checks.shaper import Shaper, parse_shaper, tc_rate_bps
from tcpwizard.checks.sysctl import SysctlReader
from tcpwizard.measure.model import ModeResult, TcpInfoSample, TransferResult
from tests.fakes import interface, make_tree, network
from tests.model_builders import path, samples

TBF = (
    '[{"kind":"tbf","handle":"8061:","root":true,"refcnt":3,'
    '"options":{"rate":1250000,"burst":4095,"lat":50000}}]'
)
HTB = (
    '[{"kind":"htb","handle":"1:","root":true,"refcnt":3,"options":{"r2q":10,'
    '"default":"0x10","direct_packets_stat":0,"direct_qlen":1000}}]'
)
HTB_CLASSES = "class htb 1:10 root prio 0 rate 15Mbit ceil 25Mbit burst 1597b cburst 1600b \n"
FQ = '[{"kind":"fq","handle":"8001:","root":true,"options":{"limit":10000,"maxrate":2500000}}]'
CAKE = '[{"kind":"cake","handle":"8002:","root":true,"options":{"bandwidth":3750000}}]'
PLAIN = '[{"kind":"pfifo_fast","handle":"0:","root":true,"options":{"bands":3}}]'
KEY = "cmd:tc -j qdisc show dev eth0"


def test_tc_rates_and_each_shaper_kind() -> None:
    assert tc_rate_bps("25Mbit") == 25e6 and tc_rate_bps("1.5Gbit") == 1.5e9
    assert tc_rate_bps("125000bps") == 1e6 and tc_rate_bps("fast") is None
    assert parse_shaper(TBF) == Shaper("tbf", 10e6, False)
    assert parse_shaper(CAKE) == Shaper("cake", 30e6, False)
    assert parse_shaper(FQ) == Shaper("fq", 20e6, True)
    assert parse_shaper(HTB, HTB_CLASSES) == Shaper("htb", 25e6, False)  # the ceiling
    # htb sends what no class takes unshaped when it has no default class.
    assert parse_shaper(HTB.replace('"0x10"', '"0"'), HTB_CLASSES) is None
    assert parse_shaper(PLAIN) is None and parse_shaper("not json") is None
    # An mq root: a flow is held only when every queue's fq has a maxrate.
    leaf = '{{"kind":"fq","handle":"0:","parent":"8001:{}","options":{{{}}}}}'
    mq = '[{"kind":"mq","handle":"8001:","root":true},' + leaf.format(1, '"maxrate":2500000')
    assert parse_shaper(mq + "," + leaf.format(2, '"maxrate":1250000') + "]") == Shaper(
        "fq", 20e6, True
    )
    assert parse_shaper(mq + "," + leaf.format(2, '"limit":100') + "]") is None


def _audited(tmp: Path, qdisc_json: str, rate_bps: float = 100e6) -> HostAudit:
    return audit(
        SysctlReader(make_tree(tmp / "sys", {})),
        None,
        BdpTarget(0.05, rate_bps, "flags"),
        network=network(interface()),
        ram_bytes=16 << 30,
        page_size=4096,
        host=RecordedHost({KEY: qdisc_json}),
    )


def test_the_audit_names_a_shaper_below_the_target_with_its_fix(tmp_path: Path) -> None:
    f = {x.id: x for x in _audited(tmp_path, TBF).findings}["interface_shaper"]
    assert f.severity == "crit"  # 10 Mbit/s against 100: below half
    assert f.observed == "eth0: tbf holds everything it sends to 10 Mbit/s"
    assert f.fixes[0].command == "tc qdisc del dev eth0 root"
    assert {x.id: x for x in _audited(tmp_path, PLAIN).findings}["interface_shaper"].severity == (
        "ok"
    )
    # A limit at the target's rate (within tc's Mbit step) is no limit.
    at = _audited(tmp_path, TBF, rate_bps=10.5e6)
    assert {x.id: x for x in at.findings}["interface_shaper"].severity == "ok"


def _transfer(mbps: float) -> TransferResult:
    info = TcpInfoSample(50_000, 100, 100, 0, round(mbps * 1e6), 0, 0, 0, 1448)
    rates = [mbps / 4, mbps / 2] + [mbps] * 18
    m = ModeResult(
        "autotune", "up", 1, round(sum(rates) * 1e6 / 8 * 0.25), 5.0, mbps, 4_000_000, 0,
        samples(rates, [info] * len(rates), dt=0.25), 0.0, 0.0, 1.0, "bbr",
    )  # fmt: skip
    return TransferResult((m,))


@pytest.mark.parametrize("qdisc", [TBF, PLAIN])
def test_a_transfer_held_at_the_senders_shaper_is_that_hosts_interface(
    tmp_path: Path, qdisc: str
) -> None:
    """10 Mbit/s of tbf on the sender: the probe saw 9.9 (its trains left through the
    same queue), the transfer settled at 9.3 of goodput. Without the shaper it is the
    path's capacity, healthy."""
    local = HostAudit("a", "6.18", (), "bbr", interface=interface(), host_facts=((KEY, qdisc),))
    peer = HostAudit("b", "6.18", (), "bbr")
    d = diagnose(Evidence(local, peer, path(50.0, 9.9), _transfer(9.3)))
    v = d.verdict
    if qdisc == TBF:
        assert (v.limiting_factor, v.host_to_fix) == ("interface", "local"), v
        assert [f.command for f in d.fixes] == ["tc qdisc del dev eth0 root"]
    else:
        assert (v.limiting_factor, v.host_to_fix) == ("path-capacity", None), v
