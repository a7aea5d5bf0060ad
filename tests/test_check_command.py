"""`tcpwizard check` without a peer: output formats, exit codes, bad input."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from tcpwizard.context import Context
from tcpwizard.exitcodes import ExitCode
from tcpwizard.main import main

from .fakes import make_tree

MODEST = ["--rtt", "50ms", "--bandwidth", "100mbit"]


def run_check(
    tmp_path: Path, argv: list[str], overrides: dict[str, str | None] | None = None
) -> tuple[int, str, str]:
    root = make_tree(tmp_path / "sys", overrides)
    out, err = io.StringIO(), io.StringIO()
    ctx = Context(sysctl_root=str(root), stdout=out, stderr=err)
    code = main(["check", *argv], ctx)
    return code, out.getvalue(), err.getvalue()


def test_json_exit_code_is_the_worst_severity(tmp_path: Path) -> None:
    code, out, _ = run_check(tmp_path, ["--json", *MODEST], {"net.ipv4.tcp_window_scaling": "0"})
    doc = json.loads(out)
    assert code == ExitCode.CRITICAL == doc["exit_code"]
    assert doc["verdict"]["limiting_factor"] == "unknown"
    assert doc["target"] is None and doc["path"] is None and doc["transfer"] is None
    bad = {
        f["id"]: f["severity"] for f in doc["host"]["findings"] if f["severity"] in ("warn", "crit")
    }
    assert bad == {"window_scaling": "crit"}
    assert "sysctl -w net.ipv4.tcp_window_scaling=1" in [f["command"] for f in doc["fixes"]]


def test_warning_gives_exit_1(tmp_path: Path) -> None:
    code, out, _ = run_check(tmp_path, ["--json", *MODEST], {"net.ipv4.tcp_sack": "0"})
    assert code == ExitCode.WARNING == json.loads(out)["exit_code"]


def test_text_report(tmp_path: Path) -> None:
    code, out, _ = run_check(tmp_path, ["--no-color", *MODEST], {"net.ipv4.tcp_sack": "0"})
    assert code == ExitCode.WARNING
    assert "tcpwizard WARNING" in out
    assert "sack" in out and "sysctl -w net.ipv4.tcp_sack=1" in out
    assert "Largest throughput" in out and "200 ms" in out
    assert "\x1b[" not in out  # --no-color means no escape codes


def test_nagios_and_prometheus(tmp_path: Path) -> None:
    code, out, _ = run_check(tmp_path, ["--format", "nagios", *MODEST], {"net.ipv4.tcp_sack": "0"})
    assert code == 1
    assert out.startswith("TCPWIZARD WARNING - 0 critical, 1 warning: sack |")
    code, out, _ = run_check(tmp_path, ["--format", "prometheus", *MODEST])
    assert 'tcpwizard_finding_severity{check="sack",side="host",target="local"} 0.0' in out
    assert 'tcpwizard_exit_code{target="local"} ' in out


def test_missing_proc_entry_is_one_line_unknown(tmp_path: Path) -> None:
    code, out, err = run_check(tmp_path, ["--json"], {"net.ipv4.tcp_rmem": None})
    assert code == ExitCode.UNKNOWN
    doc = json.loads(out)  # the README promises a document with `error`, even here
    assert doc["exit_code"] == ExitCode.UNKNOWN and "net.ipv4.tcp_rmem" in doc["error"]
    line = err.strip()
    assert line.startswith("tcpwizard: error: cannot read sysctl net.ipv4.tcp_rmem")
    assert "\n" not in line and "Traceback" not in line


def test_missing_proc_root(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ctx = Context(sysctl_root=str(tmp_path / "absent"))
    assert main(["check"], ctx) == ExitCode.UNKNOWN
    err = capsys.readouterr().err.strip()
    assert "is not a directory" in err and "\n" not in err


def test_malformed_proc_entry(tmp_path: Path) -> None:
    code, _, err = run_check(tmp_path, [], {"net.ipv4.tcp_wmem": "lots"})
    assert code == ExitCode.UNKNOWN
    assert "expected integers, found 'lots'" in err


@pytest.mark.parametrize(
    "argv",
    [
        ["check", "--rtt", "banana"],
        ["check", "--bandwidth", "fast"],
        ["check", "--rtt", "0"],
        ["check", "--frobnicate"],
        ["check", "--format", "xml"],
    ],
)
def test_bad_input_is_a_usage_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == ExitCode.USAGE
    err = capsys.readouterr().err.strip()
    assert err.startswith("tcpwizard: error:") and "\n" not in err and "Traceback" not in err


def test_unresolvable_host(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "no-such-host.invalid"]) == ExitCode.UNKNOWN
    err = capsys.readouterr().err.strip()
    assert "cannot resolve 'no-such-host.invalid'" in err and "\n" not in err
