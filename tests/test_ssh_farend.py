"""`check --ssh` without sshd: the far-end zipapp (stdlib only, Python 3.9, `python3 -I`), and
measure/farends/ssh.py driven through a stand-in `ssh` that runs the remote command on this host (as
`nobody` when we are root, so the far end provably needs no root). The real OpenSSH pair in
the lab: tests/test_ssh_lab.py."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tcpwizard.measure.farends import ssh_remote, zipapp
from tcpwizard.measure.farends.ssh import (
    NoPython,
    SshFailed,
    split_destination,
    ssh_arguments,
    ssh_serve,
)
from tcpwizard.measure.probes.probe import probe
from tcpwizard.measure.wire.control import ControlClient
from tcpwizard.measure.wire.protocol import AuthFailed

APP = ("tcpwizard.cli", "tcpwizard.commands", "tcpwizard.output", "tcpwizard.tui", "tcpwizard.run")


def _python39() -> str | None:
    """A real Python 3.9 (a pyenv shim on PATH may name one that is not installed)."""
    candidates = [shutil.which("python3.9")]
    pyenv = Path.home() / ".pyenv/versions"
    if pyenv.is_dir():
        candidates += [str(p) for p in sorted(pyenv.glob("3.9.*/bin/python3.9"))]
    for candidate in candidates:
        if candidate and "shims" not in candidate:
            return candidate
    return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").exists() and "Z" not in _state(pid)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


def _listening(port: int) -> bool:
    for path in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(path) as f:
            for line in f.readlines()[1:]:
                fields = line.split()
                if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                    return True
    return False


def _wait_until(cond: object, timeout_s: float = 10.0) -> bool:
    assert callable(cond)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.05)
    return bool(cond())


# -- the zipapp ------------------------------------------------------------------------------


def test_zipapp_imports_only_the_standard_library() -> None:
    assert zipapp.import_problems() == []


def test_zipapp_holds_serve_and_the_audit_and_no_app_layer() -> None:
    names = set(zipapp.closure())
    for needed in (
        "tcpwizard.measure.serve.server",
        "tcpwizard.measure.serve.transfers",  # loaded by serve through importlib
        "tcpwizard.checks.facts",
        "tcpwizard.measure.farends.ssh_remote",
    ):
        assert needed in names
    assert not [n for n in names if n.startswith(APP) or n.startswith("tcpwizard.lab")]


def test_import_problems_names_a_third_party_import(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pkg = tmp_path / "tcpwizard_fake"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "far.py").write_text("import json\nimport psutil\n\ndef f():\n    import rich\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(zipapp, "PACKAGE", "tcpwizard_fake")
    # Only the import-time one: rich inside a function runs only if called.
    assert zipapp.import_problems(("tcpwizard_fake.far",)) == [
        "tcpwizard_fake.far:2 imports psutil"
    ]


def test_for_python39_rewrites_what_39_does_differently() -> None:
    source = textwrap.dedent(
        """
        import itertools
        def f(sock, a, b, exc):
            try:
                sock.recv(1)
            except TimeoutError:
                pass
            except (EOFError, TimeoutError):
                pass
            pairs = list(zip(a, b, strict=True))
            steps = list(itertools.pairwise(a))
            return pairs, steps, isinstance(exc, TimeoutError), isinstance(a, int | float)
        """
    )
    out = zipapp.for_python39(source)
    assert "strict" not in out and "pairwise" not in out and "int | float" not in out
    assert out.count("__import__('socket').timeout") == 3
    namespace: dict[str, object] = {}
    exec(compile(out, "<39>", "exec"), namespace)
    f = namespace["f"]
    assert callable(f)

    class Sock:
        def recv(self, _n: int) -> bytes:
            raise TimeoutError

    pairs, steps, is_timeout, is_number = f(Sock(), [1, 2, 3], [4, 5, 6], TimeoutError())
    assert (pairs, steps, is_timeout, is_number) == (
        [(1, 4), (2, 5), (3, 6)],
        [(1, 2), (2, 3)],
        True,
        False,
    )
    unchanged = "x = 1\n"
    assert zipapp.for_python39(unchanged) is unchanged


def test_zipapp_needs_no_python_newer_than_3_9(tmp_path: Path) -> None:
    """Static, so it holds on machines without a 3.9 interpreter (vermin reads the syntax
    and the standard-library names each module uses)."""
    beside = Path(sys.executable).parent / "vermin"
    vermin = str(beside) if beside.exists() else shutil.which("vermin")
    if vermin is None:
        pytest.skip("vermin is not installed (pip install -e '.[dev]')")
    with zipfile.ZipFile(io.BytesIO(zipapp.build())) as zf:
        zf.extractall(tmp_path)
    out = subprocess.run(
        [vermin, "-t=3.9-", "--no-tips", "--violations", str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stdout[-2000:]


def test_zipapp_is_the_same_bytes_each_time() -> None:
    assert zipapp.build() == zipapp.build()


@contextlib.contextmanager
def _served_zipapp(python: str, tmp_path: Path) -> Iterator[int]:
    app = zipapp.write(tmp_path / "tcpwizard-farend.pyz")
    # -I: no site-packages, no user site, no PYTHON* variables: only the standard library.
    proc = subprocess.Popen(
        [python, "-I", str(app), "--bind", "127.0.0.1", "--port", "0"],
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        assert "listening on" in line, line
        yield int(line.split(" port ")[1].split()[0])
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=10)


def _probe_and_audit(port: int) -> None:
    path = probe("127.0.0.1", port, budget_s=1.0)
    assert path.rtt.min > 0
    with ControlClient("127.0.0.1", port, None, timeout=3.0) as client:
        assert client.peer_audit()["source"] == "tcpwizard.checks"


def test_zipapp_runs_isolated_and_answers_a_probe(tmp_path: Path) -> None:
    python = shutil.which("python3") or sys.executable
    with _served_zipapp(python, tmp_path) as port:
        _probe_and_audit(port)


def test_zipapp_runs_on_python_3_9(tmp_path: Path) -> None:
    python = _python39()
    if python is None:
        pytest.skip("no Python 3.9 interpreter on this machine")
    with _served_zipapp(python, tmp_path) as port:
        _probe_and_audit(port)


# -- measure/farends/ssh.py through a stand-in ssh -------------------------------------------

FAKE_SSH = """#!/bin/sh
# Stands in for OpenSSH's client: `-G` prints the host, anything else runs the remote
# command (the last argument) here, as the far end's login shell would.
for a in "$@"; do last="$a"; done
case " $* " in *" -G "*) echo "hostname 127.0.0.1"; echo "port 22"; exit 0;; esac
if [ -n "$FAKE_SSH_FAIL" ]; then echo "$FAKE_SSH_FAIL" >&2; exit 255; fi
if [ -n "$FAKE_SSH_HANG" ]; then exec sleep 60; fi  # a prompt nobody answers
if [ -n "$FAKE_SSH_PATH" ]; then PATH="$FAKE_SSH_PATH"; export PATH; fi
exec $FAKE_SSH_AS /bin/sh -c "$last"
"""


@pytest.fixture
def fake_ssh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    ssh = bin_dir / "ssh"
    ssh.write_text(FAKE_SSH)
    ssh.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    for var in ("FAKE_SSH_FAIL", "FAKE_SSH_PATH", "FAKE_SSH_AS", "FAKE_SSH_HANG"):
        monkeypatch.delenv(var, raising=False)
    setpriv = shutil.which("setpriv")
    if os.geteuid() == 0 and setpriv:
        # The far end as an unprivileged user: no root needed there.
        monkeypatch.setenv(
            "FAKE_SSH_AS", f"{setpriv} --reuid=nobody --regid=nogroup --clear-groups"
        )
    yield str(ssh)


def test_destination_and_options() -> None:
    assert split_destination("alice@dtn.example.org") == ("alice", "dtn.example.org")
    assert split_destination("dtn") == (None, "dtn")
    for bad in ("-oProxyCommand=x", "a b", "", "alice@"):
        with pytest.raises(SshFailed.__mro__[1]):  # TcpWizardError: a usage error
            split_destination(bad)
    assert ssh_arguments(["BatchMode=yes", "-i /k/id", " "]) == [
        "-o",
        "BatchMode=yes",
        "-i",
        "/k/id",
    ]


def test_ssh_serve_runs_a_check_sized_session_and_leaves_nothing(fake_ssh: str) -> None:
    with ssh_serve("someone@far", ssh=fake_ssh) as far:
        assert (far.host, far.workdir_removed) == ("127.0.0.1", True)
        assert not Path(far.workdir).exists()
        # Several control connections, as a check makes (audit, probe, transfers).
        for _ in range(2):
            with ControlClient(far.host, far.port, far.secret, timeout=3.0) as client:
                assert client.peer_audit()["source"] == "tcpwizard.checks"
        assert _alive(far.pid) and _listening(far.port)
    assert not _alive(far.pid)
    assert not _listening(far.port)
    assert not Path(far.workdir).exists()


def test_ssh_serve_wants_the_secret(fake_ssh: str) -> None:
    with ssh_serve("far", ssh=fake_ssh) as far, pytest.raises(AuthFailed):
        ControlClient(far.host, far.port, b"not-the-secret", timeout=3.0).close()


def test_no_python3_on_the_far_end_is_one_clear_line(
    fake_ssh: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_SSH_PATH", "/nonexistent")
    with pytest.raises(NoPython, match="no python3"), ssh_serve("far", ssh=fake_ssh):
        pass


def test_ssh_failure_says_why(fake_ssh: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_SSH_FAIL", "alice@far: Permission denied (publickey).")
    with (
        pytest.raises(SshFailed, match=r"ssh failed: .*Permission denied \(publickey\)"),
        ssh_serve("alice@far", ssh=fake_ssh),
    ):
        pass


def test_a_far_end_that_never_answers_times_out(
    fake_ssh: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ssh that reads nothing (a prompt nobody answers): the 80 KB payload fills the pipe,
    yet the ready timeout holds and ssh is ended."""
    monkeypatch.setenv("FAKE_SSH_HANG", "1")
    started = time.monotonic()
    with (
        pytest.raises(SshFailed, match="did not start within 1 s"),
        ssh_serve("far", ssh=fake_ssh, ready_timeout_s=1.0),
    ):
        pass
    assert time.monotonic() - started < 10


# SIGINT as a terminal delivers it: a suite started in the background (`make test &` from a
# script) hands its children SIGINT ignored, and the Ctrl-C below would never arrive.
NEAR_END = """
import json, signal, sys, time
signal.signal(signal.SIGINT, signal.default_int_handler)
from tcpwizard.measure.farends.ssh import ssh_serve
with ssh_serve("far", ssh=sys.argv[1]) as far:
    print(json.dumps({"pid": far.pid, "port": far.port, "workdir": far.workdir}), flush=True)
    time.sleep(60)
"""


@pytest.mark.parametrize("how", ["ctrl-c", "killed"])
def test_far_end_stops_when_the_near_end_goes(fake_ssh: str, how: str) -> None:
    """Ctrl-C (the with block unwinds) and a near end that dies at once (SIGKILL: the
    session's pipe closes, as a dropped connection closes it) both stop the far end."""
    near = subprocess.Popen(
        [sys.executable, "-c", NEAR_END, fake_ssh], stdout=subprocess.PIPE, text=True
    )
    try:
        assert near.stdout is not None
        far = json.loads(near.stdout.readline())
        assert _alive(far["pid"])
        near.send_signal(signal.SIGINT if how == "ctrl-c" else signal.SIGKILL)
        near.wait(timeout=15)
        assert _wait_until(lambda: not _alive(far["pid"])), "the far end is still running"
        assert not _listening(far["port"])
        assert not Path(far["workdir"]).exists()
    finally:
        if near.poll() is None:
            near.kill()
            near.wait()


def test_a_silent_session_ends_the_far_end() -> None:
    """A connection that vanished without a FIN: no EOF, no heartbeat either."""
    read_fd, write_fd = os.pipe()
    reasons: list[str] = []
    stopped = threading.Event()
    try:
        with os.fdopen(read_fd, "rb", buffering=0) as stream:
            started = time.monotonic()
            ssh_remote.watch_stdin(stream, stopped, reasons.append, heartbeat_timeout_s=0.6)
            assert reasons == ["no heartbeat from the near end"]
            assert time.monotonic() - started < 5
    finally:
        os.close(write_fd)


def test_check_ssh_without_python_falls_back_in_one_line(
    fake_ssh: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("FAKE_SSH_PATH", "/nonexistent")
    monkeypatch.setenv("TCPWIZARD_HISTORY", str(tmp_path / "history.sqlite3"))
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "tcpwizard",
            "check",
            "far",
            "--ssh",
            "--json",
            "--no-history",
            "--tcp-port",
            "9",
        ],  # discard port: nothing listens, the check is quick
        capture_output=True,
        text=True,
        timeout=120,
    )
    notes = [line for line in out.stderr.splitlines() if "python3" in line]
    assert len(notes) == 1 and "no python3" in notes[0], out.stderr
    doc = json.loads(out.stdout)
    assert doc["target"]["host"] == "127.0.0.1"
