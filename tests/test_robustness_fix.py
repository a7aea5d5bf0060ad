"""Robustness, `fix` is all or nothing, shown with real sysctls inside throwaway network
namespaces: wherever the tool writes (sysctl.d, its state directory) being read-only, full,
or not a directory, or the kernel refusing one value, leaves the live sysctls byte for byte
as they were, and says so in one line with exit 1 or 65."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tcpwizard.advice.apply import BACKUP_NAME, FILE_NAME
from tcpwizard.checks.model import Fix
from tcpwizard.checks.window import KERNEL_INT_MAX
from tcpwizard.output.json_format import fix_json
from tests.netns_helpers import needs_netns, ns_run, ns_setup, ns_sysctl, temp_netns, veth_up

pytestmark = [needs_netns, pytest.mark.netns]

FIXES = (
    Fix("ws", "sysctl", "local", "net.ipv4.tcp_window_scaling", "1", ""),
    Fix("rmem", "sysctl", "local", "net.ipv4.tcp_rmem", "4096 131072 16777216", ""),
)
WATCHED = ("net.ipv4.tcp_window_scaling", "net.ipv4.tcp_rmem", "net.ipv4.tcp_congestion_control")


@contextmanager
def tmpfs(path: Path, options: str) -> Iterator[Path]:
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], check=True)
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def _fill(path: Path) -> None:
    """Fill a small tmpfs to the last byte."""
    fd = os.open(path / "filler", os.O_WRONLY | os.O_CREAT)
    try:
        while os.write(fd, b"\0" * 1024):
            pass
    except OSError:
        pass  # ENOSPC: full, as wanted
    finally:
        os.close(fd)


def _live(ns: str) -> dict[str, str]:
    return {k: ns_sysctl(ns, k) for k in WATCHED}


def _fix(ns: str, tmp: Path, conf_dir: Path, state: Path, *fixes: Fix) -> tuple[int, str, str]:
    plan = tmp / "plan.json"
    plan.write_text(json.dumps({"fixes": [fix_json(f) for f in fixes]}))
    env = {**os.environ, "TCPWIZARD_SYSCTL_DIR": str(conf_dir), "TCPWIZARD_STATE_DIR": str(state)}
    out = ns_run(
        ns, sys.executable, "-m", "tcpwizard", "fix", "--plan", str(plan), "--yes", env=env
    )
    return out.returncode, out.stdout, out.stderr


def _mistuned(ns: str) -> None:
    assert ns_run(ns, "sysctl", "-w", "net.ipv4.tcp_window_scaling=0").returncode == 0
    assert ns_run(ns, "sysctl", "-w", "net.ipv4.tcp_rmem=4096 65536 262144").returncode == 0


def _read_only(tmp: Path) -> Iterator[tuple[Path, Path]]:
    with tmpfs(tmp / "ro", "ro,size=64k") as ro:
        yield ro / "sysctl.d", tmp / "state"


def _full_disk(tmp: Path) -> Iterator[tuple[Path, Path]]:
    with tmpfs(tmp / "full", "size=16k") as full:
        (full / "sysctl.d").mkdir()
        _fill(full)
        yield full / "sysctl.d", tmp / "state"


def _full_state(tmp: Path) -> Iterator[tuple[Path, Path]]:
    with tmpfs(tmp / "full", "size=16k") as full:
        _fill(full)
        yield tmp / "sysctl.d", full / "state"


def _conf_is_dir(tmp: Path) -> Iterator[tuple[Path, Path]]:
    (tmp / "sysctl.d" / FILE_NAME).mkdir(parents=True)
    yield tmp / "sysctl.d", tmp / "state"


def _conf_dir_is_file(tmp: Path) -> Iterator[tuple[Path, Path]]:
    (tmp / "sysctl.d").write_text("a file\n")
    yield tmp / "sysctl.d", tmp / "state"


def _state_is_file(tmp: Path) -> Iterator[tuple[Path, Path]]:
    (tmp / "state").write_text("a file\n")
    yield tmp / "sysctl.d", tmp / "state"


def _state_read_only(tmp: Path) -> Iterator[tuple[Path, Path]]:
    with tmpfs(tmp / "ro", "ro,size=64k") as ro:
        yield tmp / "sysctl.d", ro / "state"


PLACES: dict[str, Callable[[Path], Iterator[tuple[Path, Path]]]] = {
    "sysctl.d-read-only": _read_only,
    "sysctl.d-full-disk": _full_disk,
    "state-full-disk": _full_state,
    "conf-is-a-directory": _conf_is_dir,
    "sysctl.d-is-a-file": _conf_dir_is_file,
    "state-is-a-file": _state_is_file,
    "state-read-only": _state_read_only,
}


@pytest.mark.parametrize("place", list(PLACES))
def test_unwritable_places_leave_live_sysctls_unchanged(place: str, tmp_path: Path) -> None:
    with temp_netns() as ns, contextmanager(PLACES[place])(tmp_path) as (conf_dir, state):
        _mistuned(ns)
        before = _live(ns)
        code, out, err = _fix(ns, tmp_path, conf_dir, state, *FIXES)
        assert code in (1, 65), (code, out, err)
        lines = err.strip().splitlines()
        assert len(lines) == 1 and "internal error" not in err, err
        assert "nothing was changed" in err or "cannot" in err or "directory" in err, err
        assert _live(ns) == before
        if conf_dir.is_dir() and not (conf_dir / FILE_NAME).is_dir():
            assert not (conf_dir / FILE_NAME).exists()


def test_kernel_refusing_one_value_undoes_the_others(tmp_path: Path) -> None:
    """The second fix names a congestion control no kernel has: the first, already applied,
    is put back, the file and the backup are gone, exit 65."""
    bogus = Fix("cc", "sysctl", "local", "net.ipv4.tcp_congestion_control", "nosuchcc", "")
    conf_dir, state = tmp_path / "sysctl.d", tmp_path / "state"
    with temp_netns() as ns:
        _mistuned(ns)
        before = _live(ns)
        code, _, err = _fix(ns, tmp_path, conf_dir, state, *FIXES, bogus)
        assert code == 65, err
        assert "nosuchcc" in err and "nothing was changed" in err, err
        assert len(err.strip().splitlines()) == 1
        assert _live(ns) == before
        assert not (conf_dir / FILE_NAME).exists()
        assert not (state / BACKUP_NAME).exists()


def _routes(ns: str) -> str:
    return "".join(
        ns_run(ns, "ip", "-d", family, "route", "show", "table", "all").stdout
        for family in ("-4", "-6")
    )


def _route_fix(fix_id: str, prefix: str, command: str) -> Fix:
    return Fix(fix_id, "route", "local", f"route:{prefix}", "", command)


def test_a_refused_route_change_undoes_the_routes_and_sysctls_before_it(tmp_path: Path) -> None:
    """Two sysctls, an IPv4 and an IPv6 route change succeed; then the kernel refuses a route
    change (no route of that prefix has metric 7): the routes, the live values, the file and
    the backup are all as before, exit 65 as for a refused sysctl."""
    conf_dir, state = tmp_path / "sysctl.d", tmp_path / "state"
    with temp_netns() as ns:
        ns_setup(
            ns,
            *veth_up("v0", "v1"),
            ["ip", "addr", "add", "10.77.0.1/24", "dev", "v0"],
            ["ip", "-6", "addr", "add", "fd77::1/64", "dev", "v0", "nodad"],
            ["ip", "route", "add", "10.78.0.0/24", "via", "10.77.0.254", "dev", "v0"],
            ["ip", "route", "add", "10.79.0.0/24", "via", "10.77.0.254", "dev", "v0"],
            ["ip", "-6", "route", "add", "fd78::/64", "via", "fd77::fe", "dev", "v0"],
        )
        _mistuned(ns)
        live, routes = _live(ns), _routes(ns)
        code, _, err = _fix(
            ns,
            tmp_path,
            conf_dir,
            state,
            *FIXES,
            _route_fix("r4", "10.78.0.0/24", "ip route change 10.78.0.0/24 dev v0 initcwnd 20"),
            _route_fix("r6", "fd78::/64", "ip route change fd78::/64 dev v0 initcwnd 20"),
            _route_fix("refused", "10.79.0.0/24", "ip route change 10.79.0.0/24 dev v0 metric 7"),
        )
        assert code == 65, err
        assert len(err.strip().splitlines()) == 1, err
        assert "10.79.0.0/24 dev v0 metric 7" in err, err
        assert "restored 2 live values, 2 routes and the file; nothing was changed" in err
        assert _live(ns) == live
        assert _routes(ns) == routes
        assert not (conf_dir / FILE_NAME).exists()
        assert not (state / BACKUP_NAME).exists()


def test_fix_keeps_an_admins_conf_lines(tmp_path: Path) -> None:
    conf_dir, state = tmp_path / "sysctl.d", tmp_path / "state"
    conf_dir.mkdir()
    original = "# tuned by hand, see ticket 42\nnet.ipv4.tcp_window_scaling = 0\nfoo.bar = 1\n"
    (conf_dir / FILE_NAME).write_text(original)
    with temp_netns() as ns:
        _mistuned(ns)
        code, _, err = _fix(ns, tmp_path, conf_dir, state, *FIXES)
        assert code == 0, err
        text = (conf_dir / FILE_NAME).read_text()
        assert text.startswith("# tuned by hand, see ticket 42\nnet.ipv4.tcp_window_scaling = 1\n")
        assert "foo.bar = 1" in text and "net.ipv4.tcp_rmem = 4096 131072 16777216" in text
        env = {
            **os.environ,
            "TCPWIZARD_SYSCTL_DIR": str(conf_dir),
            "TCPWIZARD_STATE_DIR": str(state),
        }
        out = ns_run(ns, sys.executable, "-m", "tcpwizard", "fix", "--rollback", env=env)
        assert out.returncode == 0, out.stderr
        assert (conf_dir / FILE_NAME).read_text() == original


def _advised(ns: str, *argv: str) -> dict[str, str]:
    out = ns_run(ns, sys.executable, "-m", "tcpwizard", *argv, "--json")
    doc = json.loads(out.stdout)
    if "calc" in doc:
        return {s["key"]: s["value"] for s in doc["calc"]["sysctls"]}
    return {f["key"]: f["value"] for f in doc["fixes"] if f["kind"] == "sysctl"}


@pytest.mark.parametrize(
    "argv",
    [
        ("calc", "--rtt", "200ms", "--bandwidth", "100gbit"),
        ("check", "--rtt", "200ms", "--bandwidth", "100gbit"),
    ],
)
def test_advice_at_100g_200ms_is_taken_by_the_kernel(argv: tuple[str, ...]) -> None:
    with temp_netns() as ns:
        advised = _advised(ns, *argv)
        assert {"net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"} <= set(advised)
        for key, value in advised.items():
            assert all(int(v) <= KERNEL_INT_MAX for v in value.split() if v.isdigit()), key
            if key.startswith("net.ipv4."):  # per namespace: sysctl -w must take it
                out = ns_run(ns, "sysctl", "-w", f"{key}={value}")
                assert out.returncode == 0, (key, value, out.stderr)
                assert ns_sysctl(ns, key) == " ".join(value.split())
