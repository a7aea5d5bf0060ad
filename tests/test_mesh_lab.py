"""The lab's mesh (lab/mesh.py): N hosts behind a hub, each path across two emulated access
links; built and removed completely, also when the body fails."""

from __future__ import annotations

import os
import subprocess

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


def test_mesh_paths_cross_two_links_and_nothing_is_left(tmp_path: object) -> None:
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
