"""The setsockopt snippets must be real code: the Python one runs, the C one compiles."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tcpwizard.advice.snippets import c_snippet, python_snippet, setsockopt_fix


@pytest.mark.parametrize("option", ["SO_RCVBUF", "SO_SNDBUF"])
def test_python_snippet_runs_and_reports_a_cap(option: str) -> None:
    # Ask for far more than net.core.*mem_max allows: the snippet must notice the cap.
    code = python_snippet(option, 1 << 30)  # type: ignore[arg-type]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=20)
    assert out.returncode == 0, out.stderr
    assert "granted" in out.stdout and "raise net.core." in out.stdout


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
def test_c_snippet_compiles(tmp_path: Path) -> None:
    body = c_snippet("SO_RCVBUF", 4_000_000)
    src = tmp_path / "t.c"
    includes = [line for line in body.splitlines() if line.startswith("#include")]
    code = [line for line in body.splitlines() if not line.startswith("#include")]
    src.write_text(
        "\n".join(includes)
        + "\nint main(void) {\nint fd = socket(AF_INET, SOCK_STREAM, 0);\n"
        + "\n".join(code)
        + "\nreturn 0; }\n"
    )
    out = subprocess.run(
        ["cc", "-Wall", "-Werror", "-o", str(tmp_path / "t"), str(src)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    run = subprocess.run([str(tmp_path / "t")], capture_output=True, text=True, timeout=10)
    assert run.returncode == 0


def test_fix_metadata() -> None:
    f = setsockopt_fix("SO_RCVBUF", 12_500_000, "peer")
    assert (f.kind, f.host, f.key, f.value) == (
        "setsockopt",
        "peer",
        "setsockopt:SO_RCVBUF",
        "12500000",
    )
