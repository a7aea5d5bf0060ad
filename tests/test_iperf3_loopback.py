"""The iperf3 far end against Debian's real iperf3 over loopback, for the ways a server can
refuse or fail: one that requires authentication (keys made by openssl), and one that is
killed in the middle of a test. Each gives one clear line, exit 3, and the partial results
in a schema-valid JSON document."""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from tcpwizard.context import Context
from tcpwizard.main import main
from tests.loopback import local_iperf3
from tests.schemas import committed_schema

pytestmark = pytest.mark.skipif(shutil.which("iperf3") is None, reason="iperf3 not installed")
SCHEMA = committed_schema("report")


def _check(*argv: str) -> tuple[int, dict[str, Any], str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["check", *argv, "--json", "--no-history"], Context(stdout=out, stderr=err))
    return code, json.loads(out.getvalue()), err.getvalue()


@pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl not installed")
def test_iperf3_with_authentication_is_one_line_exit_3(tmp_path: Path) -> None:
    key = tmp_path / "private.pem"
    subprocess.run(["openssl", "genrsa", "-out", str(key), "2048"], check=True, capture_output=True)
    users = tmp_path / "users.csv"
    digest = hashlib.sha256(b"{mario}rossi").hexdigest()
    users.write_text(f"mario,{digest}\n")
    with local_iperf3(
        "--rsa-private-key-path", str(key), "--authorized-users-path", str(users), log=True
    ) as (port, _):
        code, doc, _err = _check("127.0.0.1", "--iperf3-port", str(port), "--duration", "1")
    jsonschema.validate(doc, SCHEMA)
    assert code == doc["exit_code"] == 3
    assert "requires authentication" in str(doc["error"])
    assert doc["measured"] is False


def _kill_once_sending(proc: subprocess.Popen[str], limit_s: float = 12.0) -> None:
    """Kill iperf3 half a second after its data stream connected (its own "[ N] local ...
    connected to ..." line): mid-test whatever the machine's load, not at a fixed time
    that a busy machine may still spend in the probe."""
    end = time.monotonic() + limit_s
    assert proc.stdout is not None
    while time.monotonic() < end:
        line = proc.stdout.readline()
        if not line:
            break
        if "connected to" in line:
            time.sleep(0.5)
            break
    proc.kill()


def test_iperf3_killed_mid_test_keeps_what_was_measured(tmp_path: Path) -> None:
    with local_iperf3(log=True) as (port, proc):
        killer = threading.Thread(target=_kill_once_sending, args=(proc,), daemon=True)
        killer.start()
        try:
            code, doc, _err = _check(
                "127.0.0.1",
                "--iperf3-port",
                str(port),
                "--modes",
                "autotune",
                "--direction",
                "up",
                "--duration",
                "4",
            )
        finally:
            killer.join(timeout=15)
    jsonschema.validate(doc, SCHEMA)
    transfer = doc["transfer"]
    assert isinstance(transfer, dict)
    (mode,) = transfer["modes"]
    assert mode["error"] and mode["bytes_sent"] > 0  # the partial result is in the report
    assert code == doc["exit_code"] == 3 and doc["measured"] is False
    assert any(str(n).startswith("not measured: every test transfer failed") for n in doc["notes"])
