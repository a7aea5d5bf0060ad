"""Robustness, the CLI's edge: machine formats print a document with `error` on every failure,
nagios always prints its status line, and the process's environment (stdout on /dev/full, a
non-UTF-8 locale, a port already taken) ends in one line and a documented code."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.robustness_helpers import DOCUMENTED, assert_clean_failure, run_cli
from tests.serve_helpers import running_server


def _tw(
    *argv: str, env: dict[str, str] | None = None, stdout: int | None = None
) -> tuple[int, str, str]:
    out = subprocess.run(
        [sys.executable, "-m", "tcpwizard", *argv],
        stdout=stdout if stdout is not None else subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=60,
        check=False,
    )
    return out.returncode, out.stdout or "", out.stderr


def _refused_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port: int = s.getsockname()[1]
    s.close()  # nothing listens there now: connections are refused
    return port


@pytest.mark.parametrize(
    "argv",
    [
        ["transfer", "127.0.0.1", "--json", "--duration", "0.5"],
        ["check", "127.0.0.1", "--json", "--modes", "autotune", "--no-history"],
    ],
)
def test_json_error_document_when_the_far_end_refuses(argv: list[str], tmp_path: Path) -> None:
    o = run_cli([*argv, "--port", str(_refused_port())], tmp_path)
    assert o.code in DOCUMENTED and o.code != 0
    doc = o.json()
    assert doc["exit_code"] == o.code
    if argv[0] == "transfer":
        assert doc["error"]


def test_json_error_document_when_the_secret_is_rejected(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("not-the-right-one\n")
    secret.chmod(0o600)
    with running_server(secret=b"the-right-one") as srv:
        for command in ("probe", "transfer"):
            o = run_cli(
                [
                    command,
                    "127.0.0.1",
                    "--json",
                    "--port",
                    str(srv.port),
                    "--secret-file",
                    str(secret),
                ],
                tmp_path,
            )
            assert_clean_failure(o, 3)
            doc = o.json()
            assert "secret" in doc["error"] and doc["exit_code"] == 3


def test_fix_json_error_document(tmp_path: Path) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text("{broken")
    o = run_cli(["fix", "--plan", str(plan), "--json"], tmp_path, root=True)
    assert_clean_failure(o, 65)
    assert o.json()["exit_code"] == 65 and "not JSON" in o.json()["error"]


def test_check_fix_yes_json_as_non_root_says_the_same_code(tmp_path: Path) -> None:
    o = run_cli(["check", "--fix", "--yes", "--json"], tmp_path, root=False)
    assert_clean_failure(o, 77)
    assert o.json()["exit_code"] == 77


def test_check_fix_json_exit_code_matches_the_process(tmp_path: Path) -> None:
    o = run_cli(["check", "--fix", "--json", "--rtt", "100ms", "--bandwidth", "1gbit"], tmp_path)
    assert o.json()["exit_code"] == o.code


@pytest.mark.parametrize("fmt", ["nagios", "json", "prometheus"])
def test_missing_proc_sys_still_prints_a_status(fmt: str, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    o = run_cli(["check", "--format", fmt], tmp_path, sysctl_root=str(empty))
    assert_clean_failure(o, 3)
    if fmt == "nagios":
        assert len(o.out.splitlines()) == 1 and o.out.startswith("TCPWIZARD UNKNOWN - ")
    elif fmt == "json":
        assert o.json()["error"]
    else:
        assert "tcpwizard_up" in o.out or "tcpwizard_exit_code" in o.out


def test_stdout_on_dev_full() -> None:
    with open("/dev/full", "w") as full:
        code, _, err = _tw("calc", "--rtt", "10ms", "--bandwidth", "1gbit", stdout=full.fileno())
    assert code == 69
    assert err.strip() == "tcpwizard: error: cannot write the output: No space left on device"


def test_non_utf8_locale() -> None:
    code, out, err = _tw(
        "calc",
        "--rtt",
        "800us",
        "--bandwidth",
        "1gbit",
        env={"LC_ALL": "C", "LANG": "C", "PYTHONIOENCODING": "ascii", "PYTHONUTF8": "0"},
    )
    assert code == 0, err
    assert "sysctl -w" in out and err == ""


def test_closed_pipe_is_quiet() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tcpwizard", "calc", "--rtt", "10ms", "--bandwidth", "1gbit"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # like `| head -0`
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=30) == 0
    assert "Traceback" not in err and "Exception ignored" not in err


def test_exporter_listen_on_a_taken_port(tmp_path: Path) -> None:
    targets = tmp_path / "targets"
    targets.write_text("127.0.0.1\n")
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    try:
        port = taken.getsockname()[1]
        o = run_cli(
            ["exporter", "--targets", str(targets), "--listen", f"127.0.0.1:{port}"], tmp_path
        )
    finally:
        taken.close()
    assert_clean_failure(o, 3)
    assert "cannot listen" in o.err


def test_exporter_listen_on_an_address_not_here(tmp_path: Path) -> None:
    targets = tmp_path / "targets"
    targets.write_text("127.0.0.1\n")
    # 192.0.2.1 (TEST-NET-1) is on no interface: bind fails locally, nothing is sent.
    o = run_cli(["exporter", "--targets", str(targets), "--listen", "192.0.2.1:9788"], tmp_path)
    assert_clean_failure(o, 3)


def test_history_json_error_document(tmp_path: Path) -> None:
    o = run_cli(["history", "h", "--db", str(tmp_path / "missing.db"), "--json"], tmp_path)
    assert_clean_failure(o, 3)
    assert o.json()["error"].startswith("no history at")
    assert not (tmp_path / "missing.db").exists()


def test_exporter_survives_slow_and_garbage_clients() -> None:
    """Clients that trickle half a request or send garbage do not stop /metrics for others."""
    import urllib.request

    from tcpwizard.exporter import Exporter, Target, serve_exporter

    exporter = Exporter([Target("h", None)], 900.0, lambda t: {"exit_code": 0})
    server, _worker = serve_exporter(exporter, "127.0.0.1:0")
    port = server.server_address[1]
    junk: list[socket.socket] = []
    try:
        for payload in (b"GET /metr", b"\x00\xff" * 5000, b"POST / HTTP/1.1\r\nContent-Length: 9"):
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            s.sendall(payload)
            junk.append(s)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
            body = r.read().decode()
        assert "tcpwizard" in body
    finally:
        for s in junk:
            s.close()
        exporter.stop()
        server.shutdown()
