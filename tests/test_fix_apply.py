"""Applying fixes and rolling back: unit tests on a fake sysctl tree, then real sysctls inside
a throwaway network namespace."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from tcpwizard.advice.apply import (
    FILE_NAME,
    FixError,
    apply_plan,
    fixes_from_report,
    make_plan,
    render_diff,
    rollback,
)
from tcpwizard.advice.plan_guard import check_sysctl, metrics_command, route_command
from tcpwizard.checks.model import Fix
from tcpwizard.output.json_format import fix_json
from tests.netns_helpers import needs_netns, ns_run, ns_setup, ns_sysctl, temp_netns, veth_up

RMEM_FIX = Fix(
    "rmem",
    "sysctl",
    "local",
    "net.ipv4.tcp_rmem",
    "4096 131072 16777216",
    "sysctl -w net.ipv4.tcp_rmem='4096 131072 16777216'",
)
WS_FIX = Fix(
    "ws",
    "sysctl",
    "local",
    "net.ipv4.tcp_window_scaling",
    "1",
    "sysctl -w net.ipv4.tcp_window_scaling=1",
)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "proc_sys"
    (root / "net/ipv4").mkdir(parents=True)
    (root / "net/ipv4/tcp_rmem").write_text("4096\t65536\t262144\n")
    (root / "net/ipv4/tcp_window_scaling").write_text("0\n")
    return root


def test_dry_run_diff_names_every_change(tree: Path, tmp_path: Path) -> None:
    plan = make_plan([RMEM_FIX, WS_FIX], str(tree), str(tmp_path / "sysctl.d"))
    diff = render_diff(plan)
    assert "net.ipv4.tcp_rmem: 4096 65536 262144 -> 4096 131072 16777216" in diff
    assert "+net.ipv4.tcp_window_scaling = 1" in diff
    # A dry run writes nothing.
    assert (tree / "net/ipv4/tcp_window_scaling").read_text() == "0\n"
    assert not (tmp_path / "sysctl.d").exists()


def test_apply_then_rollback_restores_exactly(tree: Path, tmp_path: Path) -> None:
    conf_dir, state = tmp_path / "sysctl.d", tmp_path / "state"
    conf_dir.mkdir()
    other = conf_dir / "99-other.conf"
    other.write_text("vm.swappiness = 10\n")
    before = {p: p.read_text() for p in tree.rglob("*") if p.is_file()}

    report = apply_plan(
        make_plan([RMEM_FIX, WS_FIX], str(tree), str(conf_dir)), str(tree), str(state)
    )
    assert report.complete and len(report.applied) == 2
    assert (tree / "net/ipv4/tcp_window_scaling").read_text().strip() == "1"
    assert "net.ipv4.tcp_rmem = 4096 131072 16777216" in (conf_dir / FILE_NAME).read_text()

    # Idempotent: a second apply changes nothing and keeps the original backup.
    again = apply_plan(
        make_plan([RMEM_FIX, WS_FIX], str(tree), str(conf_dir)), str(tree), str(state)
    )
    assert not again.applied and {s.reason for s in again.skipped} == {"already set"}

    undo = rollback(str(state), str(tree), str(conf_dir))
    assert undo.complete
    after = {p: p.read_text() for p in tree.rglob("*") if p.is_file()}
    assert {p: " ".join(v.split()) for p, v in after.items()} == {
        p: " ".join(v.split()) for p, v in before.items()
    }
    assert not (conf_dir / FILE_NAME).exists()
    assert other.read_text() == "vm.swappiness = 10\n"  # never touches other files
    with pytest.raises(FixError, match="nothing to roll back"):
        rollback(str(state), str(tree), str(conf_dir))


def test_existing_own_file_is_restored_not_deleted(tree: Path, tmp_path: Path) -> None:
    conf_dir, state = tmp_path / "sysctl.d", tmp_path / "state"
    conf_dir.mkdir()
    (conf_dir / FILE_NAME).write_text("net.ipv4.tcp_sack = 1\n")
    apply_plan(make_plan([WS_FIX], str(tree), str(conf_dir)), str(tree), str(state))
    text = (conf_dir / FILE_NAME).read_text()
    assert "net.ipv4.tcp_sack = 1" in text and "net.ipv4.tcp_window_scaling = 1" in text
    rollback(str(state), str(tree), str(conf_dir))
    assert (conf_dir / FILE_NAME).read_text() == "net.ipv4.tcp_sack = 1\n"


def test_missing_key_is_skipped_with_reason(tree: Path, tmp_path: Path) -> None:
    fix = Fix("x", "sysctl", "local", "net.ipv4.tcp_no_such_thing", "1", "sysctl -w ...")
    report = apply_plan(make_plan([fix], str(tree), str(tmp_path)), str(tree), str(tmp_path / "s"))
    assert not report.complete
    assert "does not exist" in report.skipped[0].reason
    assert not (tmp_path / FILE_NAME).exists()


def test_peer_fixes_are_not_applied_locally(tree: Path, tmp_path: Path) -> None:
    peer = Fix("p", "sysctl", "peer", "net.ipv4.tcp_window_scaling", "1", "sysctl -w ...")
    assert make_plan([peer], str(tree), str(tmp_path)).sysctls == ()


@pytest.mark.parametrize(
    "command",
    [
        "rm -rf /",
        "ip link del lo",
        "ip route add 1.2.3.0/24 via 10.0.0.1; reboot",
        "sh -c 'ip route'",
        "ip tcp_metrics flush 'unbalanced",
        "ip tcp_metrics delete not-an-address",
    ],
)
def test_only_tcp_metrics_commands_run_as_other_fixes(command: str) -> None:
    with pytest.raises(FixError):
        metrics_command(Fix("m", "other", "local", "tcp_metrics", "", command))


def test_metrics_commands_accepted() -> None:
    assert metrics_command(Fix("m", "other", "local", "k", "", "ip tcp_metrics flush all"))
    assert metrics_command(Fix("m", "other", "local", "k", "", "ip -6 tcp_metrics delete fd00::2"))


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("kernel.core_pattern", "|/tmp/evil %p"),
        ("kernel.modprobe", "/tmp/evil"),
        ("net.ipv4.ip_forward", "1"),
        ("net.core", "1"),
        ("net.ipv4.tcp_rmem/../x", "1"),
        ("net.ipv4.tcp_congestion_control", "bbr; reboot"),
    ],
)
def test_plan_files_cannot_set_other_sysctls(
    key: str, value: str, tree: Path, tmp_path: Path
) -> None:
    with pytest.raises(FixError):
        check_sysctl(key, value)
    fix = Fix("evil", "sysctl", "local", key, value, "")
    with pytest.raises(FixError):
        make_plan([fix], str(tree), str(tmp_path))


def test_route_fix_must_match_its_key_and_exist() -> None:
    bad_key = Fix("r", "route", "local", "route:10.9.9.0/24", "", "ip route change default dev lo")
    with pytest.raises(FixError, match="not its key"):
        route_command(bad_key)
    missing = Fix(
        "r", "route", "local", "route:10.250.0.0/24", "", "ip route change 10.250.0.0/24 dev lo"
    )
    with pytest.raises(FixError, match="no route"):
        route_command(missing)


@pytest.mark.parametrize(
    "data",
    [
        [],
        {"fixes": "no"},
        {"fixes": [1]},
        {"fixes": [{"id": "a"}]},
        {
            "fixes": [
                {"id": "a", "kind": "shell", "host": "local", "key": "", "value": "", "command": ""}
            ]
        },
    ],
)
def test_bad_plan_files_are_data_errors(data: object) -> None:
    with pytest.raises(FixError):
        fixes_from_report(data)


def _write_plan(path: Path, *fixes: Fix) -> None:
    """A plan file as `check --json` writes one (its `fixes`)."""
    path.write_text(json.dumps({"fixes": [fix_json(f) for f in fixes]}))


def _tw(ns: str, env: dict[str, str], *args: str) -> tuple[int, str, str]:
    out = ns_run(ns, sys.executable, "-m", "tcpwizard", *args, env=env)
    return out.returncode, out.stdout, out.stderr


def _env(sysctl_dir: Path, state_dir: Path) -> dict[str, str]:
    return {
        **os.environ,
        "TCPWIZARD_SYSCTL_DIR": str(sysctl_dir),
        "TCPWIZARD_STATE_DIR": str(state_dir),
    }


def _apply_then_roll_back(ns: str, env: dict[str, str], plan: Path, show: list[str]) -> None:
    """The plan takes the window off the route `show` lists; the rollback puts it back."""
    code, out, err = _tw(ns, env, "fix", "--plan", str(plan), "--yes")
    assert code == 0, out + err
    assert "window" not in ns_run(ns, *show).stdout
    code, out, err = _tw(ns, env, "fix", "--rollback")
    assert code == 0, out + err
    assert "window 65535" in ns_run(ns, *show).stdout


# d0 with an address and a route to the next subnet clamped to a 64 KB window, per family.
ROUTE4_SETUP = (
    *veth_up("d0", "d1"),
    ["ip", "addr", "add", "10.231.0.1/24", "dev", "d0"],
    ["ip", "route", "add", "10.232.0.0/24", "dev", "d0", "window", "65535"],
)
ROUTE6_SETUP = (
    *veth_up("d0", "d1"),
    ["ip", "-6", "addr", "add", "fd00:231::1/64", "dev", "d0", "nodad"],
    ["ip", "-6", "route", "add", "fd00:232::/64", "dev", "d0", "window", "65535"],
)


@needs_netns
@pytest.mark.netns
def test_fix_and_rollback_real_namespace(tmp_path: Path) -> None:
    env = _env(tmp_path / "sysctl.d", tmp_path / "state")
    with temp_netns() as ns:
        assert ns_run(ns, "sysctl", "-w", "net.ipv4.tcp_rmem=4096 65536 262144").returncode == 0
        assert ns_run(ns, "sysctl", "-w", "net.ipv4.tcp_window_scaling=0").returncode == 0
        rmem_max = Fix(
            "core",
            "sysctl",
            "local",
            "net.core.rmem_max",
            "33554432",
            "sysctl -w net.core.rmem_max=33554432",
        )
        plan = tmp_path / "plan.json"
        _write_plan(plan, RMEM_FIX, WS_FIX, rmem_max)
        global_rmem_max = Path("/proc/sys/net/core/rmem_max").read_text()

        code, out, _ = _tw(ns, env, "fix", "--plan", str(plan))
        assert code == 1 and "-> 1" in out  # dry run: diff shown, nothing changed
        assert ns_sysctl(ns, "net.ipv4.tcp_window_scaling") == "0"

        code, out, err = _tw(ns, env, "fix", "--plan", str(plan), "--yes")
        # net.core.rmem_max is global and read-only in a child namespace: skipped, exit 1.
        assert code == 1, err
        assert "skipped  net.core.rmem_max" in out
        assert ns_sysctl(ns, "net.ipv4.tcp_window_scaling") == "1"
        assert ns_sysctl(ns, "net.ipv4.tcp_rmem") == "4096 131072 16777216"
        assert Path("/proc/sys/net/core/rmem_max").read_text() == global_rmem_max
        conf = (tmp_path / "sysctl.d" / FILE_NAME).read_text()
        assert "net.ipv4.tcp_window_scaling = 1" in conf and "rmem_max" not in conf

        code, out, err = _tw(ns, env, "fix", "--rollback")
        assert code == 0, out + err
        assert ns_sysctl(ns, "net.ipv4.tcp_window_scaling") == "0"
        assert ns_sysctl(ns, "net.ipv4.tcp_rmem") == "4096 65536 262144"
        assert not (tmp_path / "sysctl.d" / FILE_NAME).exists()


@needs_netns
@pytest.mark.netns
def test_route_fix_and_rollback_real_namespace(tmp_path: Path) -> None:
    with temp_netns() as ns:
        ns_setup(ns, *ROUTE4_SETUP)
        fix = Fix(
            "route-window",
            "route",
            "local",
            "route:10.232.0.0/24",
            "",
            "ip route replace 10.232.0.0/24 dev d0",
        )
        plan = tmp_path / "plan.json"
        _write_plan(plan, fix)
        env = _env(tmp_path / "d", tmp_path / "s")
        evil = {**json.loads(plan.read_text())}
        evil["fixes"][0]["command"] = "ip route replace 10.232.0.0/24 via 10.231.0.99 dev d0"
        bad = tmp_path / "evil.json"
        bad.write_text(json.dumps(evil))
        code, _, err = _tw(ns, env, "fix", "--plan", str(bad), "--yes")
        assert code == 65 and "would move" in err  # a plan cannot redirect a route
        _apply_then_roll_back(ns, env, plan, ["ip", "route", "show", "10.232.0.0/24"])


def test_a_fix_never_lowers_a_buffer_limit(tree: Path, tmp_path: Path) -> None:
    (tree / "net/ipv4/tcp_rmem").write_text("4096\t262144\t67108864\n")  # tuned for more
    plan = make_plan([RMEM_FIX], str(tree), str(tmp_path))
    (change,) = plan.sysctls
    assert change.new == "4096 262144 67108864" and not change.needed
    (tree / "net/ipv4/tcp_rmem").write_text("4096\t262144\t1048576\n")  # default up, max up
    (change,) = make_plan([RMEM_FIX], str(tree), str(tmp_path)).sysctls
    assert change.new == "4096 262144 16777216" and change.needed


@needs_netns
@pytest.mark.netns
def test_ipv6_route_fix_and_rollback_real_namespace(tmp_path: Path) -> None:
    with temp_netns() as ns:
        ns_setup(ns, *ROUTE6_SETUP)
        fix = {
            "id": "r6",
            "kind": "route",
            "host": "local",
            "key": "route:fd00:232::/64",
            "value": "",
            "command": "ip route change fd00:232::/64 dev d0",
        }
        plan = tmp_path / "plan.json"
        plan.write_text(json.dumps({"fixes": [fix]}))
        env = _env(tmp_path / "d", tmp_path / "s")
        _apply_then_roll_back(ns, env, plan, ["ip", "-6", "route", "show", "fd00:232::/64"])


def test_fix_json_is_json_on_every_path(tree: Path, tmp_path: Path) -> None:
    import io

    from tcpwizard.context import Context
    from tcpwizard.main import main

    plan = tmp_path / "plan.json"
    _write_plan(plan, WS_FIX)

    def fresh_ctx() -> Context:
        return Context(
            sysctl_root=str(tree),
            sysctl_conf_dir=str(tmp_path / "d"),
            state_dir=str(tmp_path / "s"),
            stdout=io.StringIO(),
            stderr=io.StringIO(),
        )

    ctx = fresh_ctx()
    assert main(["fix", "--plan", str(plan), "--json"], ctx) == 1
    doc = json.loads(ctx.stdout.getvalue())  # type: ignore[attr-defined]
    assert doc["dry_run"] is True and doc["sysctls"][0]["new"] == "1"
    (tree / "net/ipv4/tcp_window_scaling").write_text("1\n")
    ctx2 = fresh_ctx()
    assert main(["fix", "--plan", str(plan), "--json"], ctx2) == 0
    assert json.loads(ctx2.stdout.getvalue())["applied"] == []  # type: ignore[attr-defined]
