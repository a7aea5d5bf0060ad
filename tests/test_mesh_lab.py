"""The lab's mesh (lab/mesh.py): N hosts behind a hub, each path across two emulated access
links; built and removed completely, also when the body fails."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.lab_fixtures import RUN_ID, lab_unavailable

pytestmark = pytest.mark.lab


def _skip_without_lab() -> None:
    reason = lab_unavailable()
    if reason:
        pytest.skip(reason)


def _namespaces() -> set[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True)
    return {line.split()[0] for line in out.stdout.splitlines() if line.strip()}


def test_mesh_paths_cross_two_links_and_nothing_is_left() -> None:
    _skip_without_lab()
    from tcpwizard.lab.mesh import Mesh, MeshSpec

    mesh = Mesh(MeshSpec(hosts=4, delay_s=0.005), f"twm-{RUN_ID}-a", owner_pid=os.getpid())
    with mesh:
        assert set(mesh.namespaces) <= _namespaces()
        ping = mesh.run(
            1, ["ping", "-n", "-c", "3", "-i", "0.2", mesh.addr(2)], capture_output=True, text=True
        )
        assert ping.returncode == 0, ping.stdout
        rtt_min = float(ping.stdout.split("=")[-1].split("/")[0])
        assert 19.0 <= rtt_min < 30.0  # 4 x 5 ms one-way
        fwd = mesh.run(0, ["sysctl", "-n", "net.ipv4.ip_forward"], capture_output=True, text=True)
        assert fwd.stdout.strip() == "0"  # hosts do not forward; only the hub does
    assert not set(mesh.namespaces) & _namespaces()


def test_mesh_is_removed_when_the_body_fails() -> None:
    _skip_without_lab()
    from tcpwizard.lab.mesh import Mesh, MeshSpec

    mesh = Mesh(MeshSpec(hosts=2), f"twm-{RUN_ID}-b", owner_pid=os.getpid())
    with pytest.raises(RuntimeError, match="boom"), mesh:
        assert mesh.is_up
        raise RuntimeError("boom")
    assert not set(mesh.namespaces) & _namespaces()
    assert not mesh.is_up


@pytest.mark.slow
def test_two_exporters_take_turns_at_one_far_end(tmp_path: Path) -> None:
    """Without a shared schedule, two exporters check host 2 at the same moment: its serve
    --lock lets one in and tells the other "busy, retry after N s"; that one waits and then
    measures too. Neither check is a prediction, and they never overlap."""
    _skip_without_lab()
    from tcpwizard.lab.fleet import Fleet, collisions
    from tcpwizard.lab.mesh import Mesh, MeshSpec

    mesh = Mesh(MeshSpec(hosts=3), f"twm-{RUN_ID}-c", owner_pid=os.getpid())
    fleet = Fleet(mesh, tmp_path, 20.0)
    py = sys.executable
    with mesh:
        serve = [py, "-m", "tcpwizard", "serve", "--bind", mesh.addr(2)]
        procs = [mesh.popen(2, [*serve, "--lock", str(tmp_path / "h2.lock")])]
        time.sleep(1.0)  # serve listening before the exporters' first check (at once)
        (tmp_path / "targets").write_text(f"{fleet.target(2)}\n")
        for i in (0, 1):
            env = {**os.environ, "TCPWIZARD_HISTORY": str(tmp_path / f"h{i}.sqlite3")}
            argv = [
                py, "-m", "tcpwizard", "exporter", "--targets", str(tmp_path / "targets"),
                "--lock", str(tmp_path / f"h{i}.lock"), "--listen", fleet.exporter(i),
                "--interval", "20s", "--quick", "--direction", "up",
            ]  # fmt: skip
            procs.append(mesh.popen(i, argv, env=env, stderr=subprocess.DEVNULL))
        try:
            deadline = time.monotonic() + 30
            while len(fleet.records()) < 2 and time.monotonic() < deadline:
                time.sleep(0.5)
            records = fleet.records()
        finally:
            for p in procs:
                p.terminate()
            for p in procs:
                p.wait(timeout=10)
    assert len(records) == 2, records
    assert {r.near for r in records} == {fleet.target(0), fleet.target(1)}
    assert all(r.measured and r.verdict == "path-capacity" for r in records), records
    assert sum(r.busy_waits for r in records) >= 1, records  # one of them was told to wait
    assert collisions(records) == []
