"""Lab specs, flag parsing, addresses and the netem command lines: no root needed."""

from __future__ import annotations

import argparse
import os

import pytest

from tcpwizard.exitcodes import ExitCode, UsageError
from tcpwizard.lab.cliparse import build_spec, queue_bytes
from tcpwizard.lab.netem import netem_commands
from tcpwizard.lab.spec import LabSpec, LinkSpec, addresses_for, parse_side_sysctl
from tcpwizard.lab.state import LabRecord, StateDir
from tcpwizard.main import main


def test_symmetric_spec_splits_rtt_and_defaults_queue_to_one_bdp() -> None:
    spec = LabSpec.symmetric(100e6, 0.050)
    assert spec.forward.delay_s == spec.reverse.delay_s == pytest.approx(0.025)
    assert spec.rtt_s == pytest.approx(0.050)
    assert spec.queue_bytes(spec.forward) == 625_000


def test_tiny_bdp_queue_is_floored_to_ten_packets() -> None:
    spec = LabSpec.symmetric(1e6, 0.001)
    assert spec.queue_bytes(spec.forward) == 10 * 1500


def test_build_spec_from_flags_with_asymmetric_reverse() -> None:
    spec = build_spec(
        name="x1",
        rtt="100ms",
        rate="100mbit",
        loss="0.5%",
        jitter="2ms",
        queue="256KB",
        reverse="rate=10mbit,loss=1%,delay=30ms",
        sysctls=[
            "a:net.ipv4.tcp_rmem='4096 65536 131072'",
            "b:net.ipv4.tcp_congestion_control=reno",
        ],
    )
    assert spec.forward == LinkSpec(100e6, 0.050, 0.002, 0.005, 256_000)
    assert spec.reverse == LinkSpec(10e6, 0.030, 0.002, 0.01, 256_000)
    assert spec.sysctls_a == (("net.ipv4.tcp_rmem", "4096 65536 131072"),)
    assert spec.sysctls_b == (("net.ipv4.tcp_congestion_control", "reno"),)


def test_bdp_queue_uses_each_directions_rate() -> None:
    assert queue_bytes("0.5bdp", 100e6, 0.1, 1500) == 625_000
    assert queue_bytes("2BDP", 8e6, 0.1, 1500) == 200_000


@pytest.mark.parametrize(
    "bad",
    [
        {"rtt": "banana"},
        {"rate": "0mbit"},
        {"loss": "150%"},
        {"jitter": "80ms"},  # more than the one-way delay of 25 ms
        {"queue": "100"},  # less than one packet
        {"reverse": "rtt=10ms"},
        {"sysctls": ["c:net.ipv4.tcp_rmem=1"]},
        {"sysctls": ["a:kernel.panic=1"]},
        {"name": "Bad Name"},
        {"mtu": 100},
    ],
)
def test_bad_lab_flags_are_usage_errors(bad: dict[str, object]) -> None:
    kw: dict[str, object] = {"name": "x", "rtt": "50ms", "rate": "100mbit"} | bad
    with pytest.raises(UsageError):
        build_spec(**kw)  # type: ignore[arg-type]


def test_global_memory_sysctls_are_refused_with_a_reason() -> None:
    with pytest.raises(UsageError, match="global, not per network namespace"):
        parse_side_sysctl("a:net.core.rmem_max=8388608")


def test_addresses_are_stable_private_and_distinct_per_side() -> None:
    x, y = addresses_for("lab1"), addresses_for("lab1")
    assert x == y
    assert x.a4.startswith("10.199.") and x.b4.startswith("10.199.")
    assert x.a4 != x.b4 and x.a6 != x.b6
    assert x.a6.startswith("fd00:7477:")


def test_netem_commands_follow_tc_netem_and_tbf_syntax() -> None:
    link = LinkSpec(100e6, 0.025, 0.002, 0.01, 625_000)
    netem, tbf = netem_commands(link, 625_000, 1500, "wan0")
    assert netem[:8] == ["qdisc", "add", "dev", "wan0", "root", "handle", "1:", "netem"]
    assert netem[8:11] == ["delay", "25000us", "2000us"]
    assert netem[11:13] == ["loss", "1%"]
    assert tbf[4:9] == ["parent", "1:1", "handle", "10:", "tbf"]
    assert tbf[tbf.index("rate") + 1] == "100000000bit"
    assert tbf[tbf.index("limit") + 1] == "625000"
    assert int(tbf[tbf.index("burst") + 1]) >= 3000


def test_state_records_round_trip(tmp_path: object) -> None:
    state = StateDir(str(tmp_path))
    spec = build_spec(name="rt", rtt="10ms", rate="10mbit", sysctls=["a:net.ipv4.tcp_sack=0"])
    record = LabRecord("rt", "delayline", "rt-a", "rt-b", spec, pid=42, owner_pid=7, created=1.0)
    state.write(record)
    assert state.names() == ["rt"]
    assert state.read("rt") == record
    state.remove("rt")
    assert state.records() == []


def test_lab_without_root_exits_77(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    for argv in (["lab", "up", "--name", "nr"], ["lab", "status"], ["lab", "down", "--all"]):
        assert main(argv) == ExitCode.NO_PERMISSION
        err = capsys.readouterr().err.strip()
        assert err.startswith("tcpwizard: error:") and "root" in err and "\n" not in err


# --probes and --transfer are wired (measure/bench_probes.py, measure/bench_transfer.py):
# as root they would run minutes of benchmark here.
@pytest.mark.parametrize("what", ["paper"])
def test_other_benches_are_clean_usage_errors(
    what: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["lab", "bench", f"--{what}"]) == ExitCode.USAGE
    assert "not available yet" in capsys.readouterr().err


def test_lab_exec_needs_a_command() -> None:
    with pytest.raises(UsageError):
        from tcpwizard.commands.lab import run

        run(argparse.Namespace(lab_command="exec", argv=["--"], name="x", side="a"), None)  # type: ignore[arg-type]
