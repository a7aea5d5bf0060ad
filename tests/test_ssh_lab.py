"""`check root@B --ssh` against Debian's real OpenSSH server, started by the test inside host b
of the lab (a throwaway host key and client key in a temporary directory, key auth only;
nothing of this machine's ssh configuration is read or changed), and the real OpenSSH client
in host a. The far end must give the same verdict as a `tcpwizard serve` running there, and
leave no file, process or listening socket behind."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tcpwizard.lab import Lab
from tcpwizard.lab.app_lab import keygen, make_ssh_keys, privsep_dir, write_sshd_config
from tcpwizard.lab.netns import ns_pids
from tcpwizard.lab.scenarios import SCENARIOS
from tcpwizard.lab.serving import serving, tcpwizard_argv
from tests.lab_fixtures import LabFactory

SSHD = "/usr/sbin/sshd"
TEST_KEY_COMMENT = "tcpwizard-test"
RECEIVER_RMEM = next(s for s in SCENARIOS if s.name == "receiver-rmem")

pytestmark = [pytest.mark.lab, pytest.mark.slow]


@dataclass(frozen=True)
class SshLab:
    lab: Lab
    options: tuple[str, ...]  # --ssh-option values for the near end
    far_tmp: Path  # TMPDIR of the far end's sessions

    def ssh_option_args(self) -> list[str]:
        return [arg for opt in self.options for arg in ("--ssh-option", opt)]


def _listening(lab: Lab) -> list[str]:
    out = lab.run("b", ["ss", "-Hltnu"], capture_output=True, text=True, check=True).stdout
    return sorted(" ".join(line.split()[:5]) for line in out.splitlines())


@pytest.fixture
def ssh_lab(lab_factory: LabFactory, tmp_path: Path) -> Iterator[SshLab]:
    for tool in (SSHD, "ssh", "ssh-keygen", "ss"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed (make system-deps: openssh-server)")
    lab = lab_factory(RECEIVER_RMEM.spec)
    keys = tmp_path / "keys"
    make_ssh_keys(keys, TEST_KEY_COMMENT)
    far_tmp = tmp_path / "far-tmp"
    far_tmp.mkdir(mode=0o1777)
    config = tmp_path / "sshd_config"
    # The far end's private dir goes to far_tmp: checkable.
    write_sshd_config(config, keys, 22, [f"SetEnv TMPDIR={far_tmp}"])
    with privsep_dir():
        subprocess.run([SSHD, "-t", "-f", str(config)], check=True)
        sshd = lab.popen("b", [SSHD, "-D", "-e", "-f", str(config)], stderr=subprocess.PIPE)
        try:
            deadline = time.monotonic() + 10
            while not any(s.endswith(":22") for s in _listening(lab)):
                assert sshd.poll() is None, sshd.communicate()[1]
                assert time.monotonic() < deadline, "sshd did not start"
                time.sleep(0.05)
            options = (
                "-F /dev/null",  # not this machine's ssh_config
                f"-i {keys / 'id_ed25519'}",
                "IdentitiesOnly=yes",
                f"UserKnownHostsFile={keys / 'known_hosts'}",
                "StrictHostKeyChecking=accept-new",
                "BatchMode=yes",
                "ConnectTimeout=10",
            )
            yield SshLab(lab, options, far_tmp)
        finally:
            sshd.terminate()
            sshd.wait(timeout=10)


def _check(lab: Lab, target: str, *extra: str, tmp: Path) -> tuple[int, dict[str, Any], str]:
    env = {**os.environ, "TCPWIZARD_HISTORY": str(tmp / "history.sqlite3")}
    argv = tcpwizard_argv("check", target, "--json", "--no-history", *extra)
    out = lab.run("a", argv, capture_output=True, text=True, env=env, timeout=180)
    try:
        return out.returncode, json.loads(out.stdout), out.stderr
    except ValueError:
        raise AssertionError(f"no JSON (exit {out.returncode}): {out.stderr[-600:]}") from None


def test_check_over_ssh_gives_serves_verdict_and_leaves_nothing(
    ssh_lab: SshLab, tmp_path: Path
) -> None:
    lab = ssh_lab.lab
    with serving(lab, "b"):
        _, with_serve, _ = _check(lab, lab.addr_b, tmp=tmp_path)
    pids_before, sockets_before = set(ns_pids(lab.ns_b)), _listening(lab)

    code, over_ssh, stderr = _check(
        lab, f"root@{lab.addr_b}", "--ssh", *ssh_lab.ssh_option_args(), tmp=tmp_path
    )

    assert "serve started over SSH" in stderr, stderr
    verdicts = [
        (doc["verdict"]["limiting_factor"], doc["verdict"]["host_to_fix"])
        for doc in (with_serve, over_ssh)
    ]
    assert verdicts == [("receiver-window", "peer")] * 2, stderr[-600:]
    assert over_ssh["peer"] is not None, "the far end's audit is missing"
    assert over_ssh["target"]["host"] == lab.addr_b
    assert code == with_serve["exit_code"] == over_ssh["exit_code"]
    # Nothing left on the far end: no file in its TMPDIR, no new process, no new socket.
    assert list(ssh_lab.far_tmp.iterdir()) == []
    assert set(ns_pids(lab.ns_b)) == pids_before
    assert _listening(lab) == sockets_before


NEAR_END = """
import json, sys
from tcpwizard.measure.wire.control import ControlClient
from tcpwizard.measure.farends.ssh import ssh_serve
with ssh_serve(sys.argv[1], sys.argv[2:]) as far:
    with ControlClient(far.host, far.port, far.secret, timeout=5.0) as client:
        source = client.peer_audit()["source"]
    print(json.dumps({"workdir": far.workdir, "removed": far.workdir_removed, "source": source}))
"""


def test_far_end_works_in_a_private_temporary_directory(ssh_lab: SshLab) -> None:
    lab = ssh_lab.lab
    out = lab.run(
        "a",
        [sys.executable, "-c", NEAR_END, f"root@{lab.addr_b}", *ssh_lab.options],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    far = json.loads(out.stdout)
    assert far["source"] == "tcpwizard.checks"
    assert Path(far["workdir"]).parent == ssh_lab.far_tmp
    assert far["removed"] and not Path(far["workdir"]).exists()


HOLDING_NEAR_END = """
import json, sys, time
from tcpwizard.measure.farends.ssh import ssh_serve
with ssh_serve(sys.argv[1], sys.argv[2:]) as far:
    print(json.dumps({"port": far.port}), flush=True)
    time.sleep(120)
"""


@pytest.mark.parametrize("how", ["ctrl-c", "dropped"])
def test_far_end_goes_when_the_session_goes(ssh_lab: SshLab, how: str) -> None:
    """Ctrl-C at the near end (SIGINT to its process group, as a terminal sends it), or the
    near end and its ssh gone at once (SIGKILL: the TCP connection closes under sshd): the
    far end's process, socket and files are gone within seconds."""
    lab = ssh_lab.lab
    pids_before, sockets_before = set(ns_pids(lab.ns_b)), _listening(lab)
    near = lab.popen(
        "a",
        [sys.executable, "-c", HOLDING_NEAR_END, f"root@{lab.addr_b}", *ssh_lab.options],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, like a shell job
    )
    try:
        assert near.stdout is not None
        port = json.loads(near.stdout.readline())["port"]
        assert any(s.endswith(f":{port}") for s in _listening(lab))
        os.killpg(near.pid, signal.SIGINT if how == "ctrl-c" else signal.SIGKILL)
        near.wait(timeout=20)
        deadline = time.monotonic() + 15
        while set(ns_pids(lab.ns_b)) != pids_before and time.monotonic() < deadline:
            time.sleep(0.1)
        assert set(ns_pids(lab.ns_b)) == pids_before, "the far end is still running"
        assert _listening(lab) == sockets_before
        assert list(ssh_lab.far_tmp.iterdir()) == []
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(near.pid, signal.SIGKILL)
        near.wait(timeout=10)


def test_a_key_the_far_end_refuses_is_one_line_exit_3(ssh_lab: SshLab, tmp_path: Path) -> None:
    lab = ssh_lab.lab
    stranger = tmp_path / "stranger"
    keygen(stranger, TEST_KEY_COMMENT)
    options = [o for o in ssh_lab.options if not o.startswith("-i ")] + [f"-i {stranger}"]
    argv = tcpwizard_argv("check", f"root@{lab.addr_b}", "--ssh", "--no-history")
    for opt in options:
        argv += ["--ssh-option", opt]
    out = lab.run("a", argv, capture_output=True, text=True, timeout=60)
    errors = [line for line in out.stderr.splitlines() if line.startswith("tcpwizard: error")]
    assert out.returncode == 3, out.stderr
    assert len(errors) == 1 and "Permission denied" in errors[0], out.stderr
