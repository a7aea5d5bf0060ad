"""The 100G host checks on recorded facts (ethtool text, tc JSON, sysfs and /proc values):
a tuned 100G host passes at 100 Gbit/s x 100 ms in 8 streams, a stock one is named item by
item with its fix, low rates do not warn, and what cannot be read is "not available here"."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from tcpwizard.checks import SysctlReader, audit
from tcpwizard.checks.hostread import HostReader, RecordedHost, format_cpulist, parse_cpulist
from tcpwizard.checks.model import BdpTarget, HostAudit
from tcpwizard.checks.nicfacts import parse_coalesce, parse_qdiscs, parse_rings

from .fakes import (
    COALESCE_PER_PACKET,
    EGRESS_HOST_CHECKS,
    GIB,
    RINGS_STOCK,
    host_values,
    interface,
    make_tree,
    network,
    tc_fq,
)

T100G = BdpTarget(0.100, 100e9, "flags")
T100M = BdpTarget(0.050, 100e6, "flags")
NEW = (*EGRESS_HOST_CHECKS, "cpu_governor", "cpu_smt", "streams_for_target")
# A DTN tuned as ESnet's pages say: 2 GiB - 1 buffer maxima, tcp_mem for 8 such streams.
TUNED_SYSCTLS: dict[str, str | None] = {
    "net.core.rmem_max": "2147483647",
    "net.core.wmem_max": "2147483647",
    "net.ipv4.tcp_rmem": "4096 131072 1073741824",
    "net.ipv4.tcp_wmem": "4096 16384 1073741824",
    "net.ipv4.tcp_mem": "1000000 4000000 6000000",
}


def run(
    tmp: Path,
    values: dict[str, str],
    target: BdpTarget = T100G,
    streams: int = 8,
    sysctls: dict[str, str | None] | None = None,
    **iface: object,
) -> HostAudit:
    changes: dict[str, object] = {"mtu": 9000, "speed_mbps": 100_000, "txqueuelen": 10000}
    changes.update(iface)
    return audit(
        SysctlReader(make_tree(tmp / "sys", {**TUNED_SYSCTLS, **(sysctls or {})})),
        None,
        target,
        network=network(interface(**changes)),
        ram_bytes=256 * GIB,
        page_size=4096,
        host=RecordedHost(values),
        streams=streams,
    )


def by_id(a: HostAudit) -> dict[str, tuple[str, tuple[str, ...], str]]:
    return {f.id: (f.severity, tuple(x.command for x in f.fixes), f.message) for f in a.findings}


def tuned() -> dict[str, str]:
    # fq paced at the 12.5 Gbit/s share of each of 8 streams (1562500000 bytes/s).
    return host_values("eth0", {"cmd:tc -j qdisc show dev eth0": tc_fq(1_562_500_000)})


def test_a_tuned_100g_host_passes_in_8_streams(tmp_path: Path) -> None:
    a = run(tmp_path, tuned())
    found = by_id(a)
    assert {k: v[0] for k, v in found.items() if v[0] != "ok"} == {}


def test_a_stock_host_is_named_item_by_item_with_its_fix(tmp_path: Path) -> None:
    stock = host_values(
        "eth0",
        {
            "cmd:tc -j qdisc show dev eth0": tc_fq(None, kind="pfifo_fast"),
            "cmd:ethtool -g eth0": RINGS_STOCK,
            "cmd:ethtool -c eth0": COALESCE_PER_PACKET,
            "cmd:ethtool -a eth0": "Pause parameters for eth0:\nAutonegotiate:\toff\n"
            "RX:\toff\nTX:\toff\n",
            "cmd:ethtool -k eth0": "tcp-segmentation-offload: off\n"
            "generic-segmentation-offload: on\ngeneric-receive-offload: off [fixed]",
            **{f"file:/proc/irq/{i}/smp_affinity_list": "0-15" for i in range(120, 124)},
            **{
                f"file:/sys/devices/system/cpu/cpu{c}/cpufreq/scaling_governor": "powersave"
                for c in range(16)
            },
            "file:/sys/devices/system/cpu/smt/active": "1",
            "affinity": "0-15",
        },
    )
    a = run(
        tmp_path,
        stock,
        mtu=1500,
        txqueuelen=1000,
        qdisc="pfifo_fast",
        sysctls={"net.ipv4.tcp_mtu_probing": "0", "net.ipv4.tcp_mem": "188888 251851 377776"},
    )
    f = by_id(a)
    # A 100G NIC on a 100G path: fq for cheap pacing (info), no per-flow maxrate needed.
    assert f["fq_pacing"][:2] == ("info", ("tc qdisc replace dev eth0 root fq",))
    assert f["jumbo_mtu"][0] == "info" and "ip link set dev eth0 mtu 9000" in f["jumbo_mtu"][1]
    assert f["nic_rings"] == ("warn", ("ethtool -G eth0 rx 8192 tx 8192",), f["nic_rings"][2])
    assert f["nic_coalescing"][:2] == ("warn", ("ethtool -C eth0 adaptive-rx on",))
    assert f["nic_flow_control"][:2] == ("info", ("ethtool -A eth0 rx on tx on",))
    # GRO is fixed off by the driver: only TSO can be turned on, and the message says so.
    assert f["nic_offloads"][:2] == ("warn", ("ethtool -K eth0 tso on",))
    assert "fixes gro off" in f["nic_offloads"][2]
    assert f["irq_numa"][0] == "warn"
    assert f["irq_numa"][1][0].startswith("for i in 120 121 122 123; do echo 0-7 >")
    assert f["process_numa"][:2] == (
        "info",
        ("numactl --cpunodebind=0 --membind=0 COMMAND",),
    )
    assert f["cpu_governor"][0] == "warn" and "performance" in f["cpu_governor"][1][0]
    assert f["cpu_smt"][0] == "info"
    assert f["interface_txqueuelen"][0] == "warn"
    assert "ip link set dev eth0 txqueuelen 100000" in f["interface_txqueuelen"][1]
    # 8 streams x (312 MB + 312 MB) = 5 GB against a 1 GB pressure value.
    assert f["streams_for_target"][0] == "warn"
    assert "The pressure value of tcp_mem (1.03 GB) is below the 5 GB" in f["streams_for_target"][2]
    assert any("net.ipv4.tcp_mem" in c for c in f["streams_for_target"][1])


def test_one_stream_for_100g_past_the_int_cap_and_the_core(tmp_path: Path) -> None:
    a = run(tmp_path, tuned(), streams=1)
    sev, fixes, message = by_id(a)["streams_for_target"]
    assert sev == "crit"
    # 2 x 1.25 GB per socket is past 2 GiB - 1; one flow of 30 Gbit/s needs 4 streams.
    assert "past the kernel's per-socket cap" in message
    assert "at least 4 streams, each on its own core" in message
    assert fixes == ("tcpwizard check HOST --bandwidth 100000mbit --rtt 100ms --streams 4",)


def test_more_streams_than_cores_is_said_plainly(tmp_path: Path) -> None:
    values = tuned()
    values["file:/sys/devices/system/cpu/online"] = "0-1"
    values["flow_bps"] = "20000000000"
    a = run(tmp_path, values)
    sev, _, message = by_id(a)["streams_for_target"]
    assert sev == "crit"
    assert "host cannot reach the target: 5 streams want 5 cores and it has 2" in message


def test_low_rates_do_not_warn_and_need_no_flow(tmp_path: Path) -> None:
    stock = host_values(
        "eth0",
        {
            "cmd:ethtool -g eth0": RINGS_STOCK,
            "cmd:ethtool -c eth0": COALESCE_PER_PACKET,
            "file:/sys/devices/system/cpu/smt/active": "1",
            **{
                f"file:/sys/devices/system/cpu/cpu{c}/cpufreq/scaling_governor": "powersave"
                for c in range(16)
            },
            "flow_bps": None,
        },
    )
    a = run(tmp_path, stock, target=T100M, streams=1, speed_mbps=100)
    found = by_id(a)
    assert all(found[c][0] == "ok" for c in NEW), {c: found[c][0] for c in NEW}


def test_unreadable_facts_are_not_available_here(tmp_path: Path) -> None:
    a = run(tmp_path, {"!cmd:ethtool -g eth0": "netlink error: Operation not supported"})
    f = by_id(a)
    assert f["nic_rings"][0] == "info"
    assert "not available here: netlink error: Operation not supported" in f["nic_rings"][2]
    for check in ("nic_coalescing", "irq_numa", "cpu_governor", "cpu_smt"):
        assert f[check][0] == "info" and "not available here" in f[check][2]


def test_mq_root_gets_fq_per_queue(tmp_path: Path) -> None:
    tc = (
        '[{"kind":"mq","handle":"8001:","root":true,"options":{}},'
        '{"kind":"fq_codel","handle":"0:","parent":"8001:2","options":{}},'
        '{"kind":"fq_codel","handle":"0:","parent":"8001:1","options":{}}]'
    )
    # A 100G NIC on a 40 Gbit/s path in 8 streams: each queue's fq holds a flow to 5 Gbit/s.
    path = BdpTarget(0.05, 40e9, "flags")
    a = run(tmp_path, host_values("eth0", {"cmd:tc -j qdisc show dev eth0": tc}), target=path)
    sev, fixes, _ = by_id(a)["fq_pacing"]
    assert sev == "warn"
    assert fixes[0] == (
        "for p in 8001:2 8001:1; do tc qdisc replace dev eth0 parent $p fq maxrate 5000mbit; done"
    )


def test_jumbo_without_probing_warns(tmp_path: Path) -> None:
    a = run(tmp_path, tuned(), sysctls={"net.ipv4.tcp_mtu_probing": "0"})
    assert by_id(a)["jumbo_mtu"][:2] == ("warn", ("sysctl -w net.ipv4.tcp_mtu_probing=1",))


def test_parsers_reject_what_they_do_not_know() -> None:
    assert parse_rings("no rings here") is None
    assert parse_coalesce("") is None
    assert parse_qdiscs("not json") is None
    q = parse_qdiscs(tc_fq(1_250_000_000))
    assert q is not None and q.all_fq and q.maxrates_bps == (10e9,)
    assert parse_cpulist("0-3,8,10-11") == frozenset({0, 1, 2, 3, 8, 10, 11})
    assert format_cpulist({0, 1, 2, 3, 8, 10, 11}) == "0-3,8,10-11"
    with pytest.raises(ValueError):
        parse_cpulist("0-x")


def test_live_reader_records_files_commands_and_reasons(tmp_path: Path) -> None:
    sys_root = tmp_path / "sys"
    (sys_root / "class/net/eth9/device").mkdir(parents=True)
    (sys_root / "class/net/eth9/device/numa_node").write_text("1\n")
    calls: list[tuple[str, ...]] = []

    def runner(argv: object) -> tuple[int, str, str]:
        calls.append(tuple(argv))  # type: ignore[arg-type]
        if "-a" in calls[-1]:
            return 1, "", "netlink error: Operation not supported\n"
        return 0, "Features for eth9:\ngeneric-receive-offload: on\nloopback: off [fixed]\n", ""

    h = HostReader(str(sys_root), str(tmp_path / "proc"), runner=runner, flow_rate=lambda: 1e9)
    assert h.file("/sys/class/net/eth9/device/numa_node") == "1"
    assert h.file("/proc/irq/5/smp_affinity_list") is None
    assert h.command("ethtool", "-a", "eth9") is None
    assert h.command("ethtool", "-k", "eth9", keep=("generic-receive-offload",)) == (
        "generic-receive-offload: on"
    )
    assert h.command("ethtool", "-k", "eth9", keep=("generic-receive-offload",)) is not None
    assert len(calls) == 2  # each program once
    assert h.flow_bps() == 1e9
    replay = RecordedHost(h.values)
    assert replay.file("/sys/class/net/eth9/device/numa_node") == "1"
    assert replay.command("ethtool", "-a", "eth9") is None
    assert replay.why("cmd:ethtool -a eth9") == "netlink error: Operation not supported"
    assert "does not exist" in replay.why("file:/proc/irq/5/smp_affinity_list")
    assert stat.S_ISDIR((sys_root).stat().st_mode)


def test_far_end_host_facts_survive_the_wire(tmp_path: Path) -> None:
    from tcpwizard.checks.facts import HostFacts, audit_facts, facts_from_json, facts_json

    values = tuned()
    direct = run(tmp_path, values)
    facts = HostFacts(
        direct.sysctls,
        network(interface(mtu=9000, speed_mbps=100_000, txqueuelen=10000)),
        256 * GIB,
        4096,
        None,
        tuple(sorted(values.items())),
    )
    back = facts_from_json(json.loads(json.dumps(facts_json(facts))))
    assert dict(back.host_values) == values  # ethtool's lines and tabs intact
    replayed = audit_facts(back, T100G, streams=8)
    assert [(f.id, f.severity, f.observed) for f in replayed.findings] == [
        (f.id, f.severity, f.observed) for f in direct.findings
    ]
    # A far end that predates these checks: every item says why it is not judged.
    old = facts_from_json({k: v for k, v in facts_json(facts).items() if k != "host"})
    rings = next(f for f in audit_facts(old, T100G, streams=8).findings if f.id == "nic_rings")
    assert rings.severity == "info" and "not reported by the far end" in rings.observed


def test_this_machines_own_egress_interface(tmp_path: Path) -> None:
    """The live reader on this machine's real NIC: what ethtool answers is parsed, what it
    refuses is 'not available here' with ethtool's own words."""
    from tcpwizard.checks.netinfo import gather_network

    net = gather_network(None)
    if net.interface is None or net.interface.is_loopback:
        pytest.skip(f"no egress interface here: {net.interface_missing_reason}")
    name = net.interface.name
    reader = HostReader()
    a = audit(
        SysctlReader("/proc/sys"),
        None,
        BdpTarget(0.1, 1e9, "flags"),
        network=net,
        ram_bytes=8 * GIB,
        page_size=4096,
        host=reader,
    )
    found = {f.id: f for f in a.findings}
    for check, option in (
        ("nic_rings", "-g"),
        ("nic_coalescing", "-c"),
        ("nic_flow_control", "-a"),
    ):
        answered = reader.command("ethtool", option, name) is not None
        assert ("not available here" in found[check].observed) != answered, found[check]
        if not answered:
            assert reader.why(f"cmd:ethtool {option} {name}") in found[check].observed
    assert "flow_bps" not in reader.values  # 1 Gbit/s per flow: no loopback flow is timed


@pytest.mark.parametrize(
    ("changes", "severity", "says"),
    [
        ({"ls:/sys/devices/system/node": "node0 online possible"}, "ok", "One NUMA node"),
        ({"ls:/sys/devices/system/node": None}, "info", "NUMA topology not available here"),
        ({"file:/sys/class/net/eth0/device/numa_node": "-1"}, "info", "reports none"),
        ({"file:/sys/devices/system/cpu/online": None}, "info", "online CPUs not available"),
    ],
)
def test_numa_and_cpus_never_guessed(
    tmp_path: Path, changes: dict[str, str | None], severity: str, says: str
) -> None:
    found = {f.id: f for f in run(tmp_path, host_values("eth0", changes)).findings}
    check = "cpu_governor" if "file:/sys/devices/system/cpu/online" in changes else "irq_numa"
    assert found[check].severity == severity
    assert says in found[check].observed + found[check].message


def test_buffers_up_to_the_int_cap_where_ram_allows(tmp_path: Path) -> None:
    """2 streams at 100 Gbit/s x 100 ms: 625 MB windows, 1.25 GB buffers each, past 1 GiB:
    the fix is the kernel's cap itself (2 GiB - 1; 2 GiB would be refused), RAM permitting."""
    small: dict[str, str | None] = {
        "net.ipv4.tcp_rmem": "4096 131072 6291456",
        "net.core.rmem_max": "212992",
    }
    a = run(tmp_path, tuned(), streams=2, sysctls=small)
    f = by_id(a)
    assert f["tcp_rmem"][1] == ('sysctl -w net.ipv4.tcp_rmem="4096 131072 2147483647"',)
    assert f["rmem_max"][1] == ("sysctl -w net.core.rmem_max=2147483647",)
    assert "parallel streams" not in f["tcp_rmem"][2]
    # One stream would need 2.5 GB: past the cap, so 2 streams at least.
    one = by_id(run(tmp_path / "one", tuned(), streams=1, sysctls=small))
    assert "use at least 2 parallel streams (--streams 2)" in one["tcp_rmem"][2]


def test_facts_captured_from_a_real_virtio_nic(tmp_path: Path) -> None:
    """ethtool 6.1 and tc as they answered for this project's VM NIC (virtio_net, Linux
    6.18; tests/data/host-facts-virtio-net.json, from `check --json`'s host_facts): rings of
    256 at their maximum, one interrupt per packet, no pause support, offloads on."""
    captured = json.loads((Path(__file__).parent / "data/host-facts-virtio-net.json").read_text())
    a = run(
        tmp_path, captured, target=BdpTarget(0.05, 10e9, "flags"), streams=1, mtu=1400,
        qdisc="pfifo_fast", speed_mbps=None,
    )  # fmt: skip
    f = {x.id: x for x in a.findings}
    assert f["nic_rings"].severity == "info"  # at its maximum: nothing to grow
    assert f["nic_rings"].observed == "eth0 rx 256/256 tx 256/256 (current/maximum)"
    assert f["nic_coalescing"].severity == "warn"
    assert f["nic_coalescing"].observed == "eth0 adaptive-rx off, rx-usecs 0, rx-frames 1"
    assert "not available here: netlink error: Operation not supported" in (
        f["nic_flow_control"].observed
    )
    assert f["nic_offloads"].severity == "ok"
    assert f["fq_pacing"].observed.startswith("eth0: pfifo_fast; NIC speed unknown")


def test_every_format_carries_the_streams_and_the_findings(tmp_path: Path) -> None:
    import io

    from tcpwizard.output.registry import emit
    from tcpwizard.report import local_report

    paced = {"flow_bps": "20000000000", "cmd:tc -j qdisc show dev eth0": tc_fq(1_562_500_000)}
    report = local_report(run(tmp_path, host_values("eth0", paced)))
    out = {}
    for fmt in ("text", "json", "prometheus", "nagios"):
        buf = io.StringIO()
        emit(report, fmt, buf)
        out[fmt] = buf.getvalue()
    assert "in 8 streams" in out["text"] and "streams_for_target" in out["text"]
    doc = json.loads(out["json"])
    assert doc["host"]["streams"] == 8 and doc["host"]["host_facts"]["flow_bps"]
    assert any(f["id"] == "nic_rings" for f in doc["host"]["findings"])
    assert "streams_for_target" in out["prometheus"]
    assert out["nagios"].startswith("TCPWIZARD OK")  # a tuned host: 5 cores of 16 for 8 streams


def test_fix_plan_lists_link_and_nic_steps_as_manual(tmp_path: Path) -> None:
    from tcpwizard.advice.apply import make_plan
    from tcpwizard.checks.model import Fix

    steps = [
        Fix("a", "other", "local", "mtu", "9000", "ip link set dev eth0 mtu 9000"),
        Fix("b", "other", "local", "rings", "rx 8192", "ethtool -G eth0 rx 8192"),
        Fix("c", "other", "local", "tcp_metrics", "", "ip tcp_metrics flush all"),
    ]
    plan = make_plan(steps, str(make_tree(tmp_path / "sys")), str(tmp_path / "conf"))
    assert [m.id for m in plan.manual] == ["a", "b"]
    assert [r.argv for r in plan.routes] == [("ip", "tcp_metrics", "flush", "all")]
