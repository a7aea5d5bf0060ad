"""Lab specs, flag parsing, addresses and the netem command lines: no root needed."""

from __future__ import annotations

import argparse
import os

import pytest

from tcpwizard.cli import build_parser
from tcpwizard.commands.lab import spec_from_args
from tcpwizard.exitcodes import ExitCode, UsageError
from tcpwizard.lab.cliparse import build_spec, parse_queue
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


def _up(*argv: str) -> LabSpec:
    return spec_from_args(build_parser().parse_args(["lab", "up", *argv]))


def test_build_spec_from_flags_with_asymmetric_reverse() -> None:
    spec = _up(
        "--name=x1",
        "--rtt=100ms",
        "--rate=100mbit",
        "--loss=0.5%",
        "--jitter=2ms",
        "--queue=256KB",
        "--reverse=rate=10mbit,loss=1%,delay=30ms",
        "--sysctl=a:net.ipv4.tcp_rmem='4096 65536 131072'",
        "--sysctl=b:net.ipv4.tcp_congestion_control=reno",
    )
    assert spec.forward == LinkSpec(100e6, 0.050, 0.002, 0.005, 256_000)
    assert spec.reverse == LinkSpec(10e6, 0.030, 0.002, 0.01, 256_000)
    assert spec.sysctls_a == (("net.ipv4.tcp_rmem", "4096 65536 131072"),)
    assert spec.sysctls_b == (("net.ipv4.tcp_congestion_control", "reno"),)


def test_defaults_are_a_100mbit_50ms_lab_with_a_one_bdp_queue() -> None:
    spec = _up()
    assert spec == build_spec(name="tw", rtt_s=0.050, rate_bps=100e6)
    assert spec.forward == spec.reverse == LinkSpec(100e6, 0.025, 0.0, 0.0, 625_000)


def test_bdp_queue_uses_each_directions_rate() -> None:
    assert parse_queue("0.5bdp").resolve(100e6, 0.1, 1500) == 625_000
    assert parse_queue("2BDP").resolve(8e6, 0.1, 1500) == 200_000
    assert parse_queue("0.001bdp").resolve(8e6, 0.1, 1500) == 10 * 1500
    assert parse_queue("64KiB").resolve(8e6, 0.1, 1500) == 65536


@pytest.mark.parametrize(
    "bad",
    [
        ["--rtt", "banana"],
        ["--rate", "0mbit"],
        ["--loss", "150%"],
        ["--jitter", "80ms"],  # more than the one-way delay of 25 ms
        ["--queue", "100"],  # less than one packet
        ["--reverse", "rtt=10ms"],
        ["--sysctl", "c:net.ipv4.tcp_rmem=1"],
        ["--sysctl", "a:kernel.panic=1"],
        ["--name", "Bad Name"],
        ["--mtu", "100"],
    ],
)
def test_bad_lab_flags_are_usage_errors(
    bad: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Not root: a value wrongly let through ends in 77, never in a lab being built.
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert main(["lab", "up", "--name", "x", *bad]) == ExitCode.USAGE
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


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
    spec = build_spec(
        name="rt", rtt_s=0.010, rate_bps=10e6, sysctls=[("a", "net.ipv4.tcp_sack", "0")]
    )
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


def test_the_benches_are_not_a_lab_command(capsys: pytest.CaptureFixture[str]) -> None:
    """They run from a checkout (`python -m benchmarks`, tests/test_benchmarks_cli.py)."""
    assert main(["lab", "bench", "--paper"]) == ExitCode.USAGE
    assert "invalid choice: 'bench'" in capsys.readouterr().err


def test_lab_exec_needs_a_command() -> None:
    with pytest.raises(UsageError):
        from tcpwizard.commands.lab import run

        run(argparse.Namespace(lab_command="exec", argv=["--"], name="x", side="a"), None)  # type: ignore[arg-type]
