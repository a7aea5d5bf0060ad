"""Throwaway network namespaces for tests: unique names, always removed; `ip` and the
installed `tcpwizard check --json` run against them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

needs_netns = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("ip") is None,
    reason="needs root and iproute2 to create network namespaces",
)


@contextmanager
def temp_netns(prefix: str = "twt") -> Iterator[str]:
    name = f"{prefix}-{uuid.uuid4().hex[:10]}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        subprocess.run(["ip", "-n", name, "link", "set", "lo", "up"], check=True)
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], check=False)


def ns_run(
    ns: str, *argv: str, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["ip", "netns", "exec", ns, *argv],
        capture_output=True,
        text=True,
        check=False,
        env=env,
    )


def ns_setup(ns: str, *commands: Sequence[str]) -> None:
    """Run each command in `ns`; each must succeed (a failure names its command)."""
    for cmd in commands:
        assert ns_run(ns, *cmd).returncode == 0, cmd


def veth_up(name: str, peer: str) -> tuple[list[str], list[str]]:
    """The commands that add the veth pair `name`/`peer` and bring `name` up."""
    return (
        ["ip", "link", "add", name, "type", "veth", "peer", "name", peer],
        ["ip", "link", "set", name, "up"],
    )


def ns_sysctl(ns: str, key: str) -> str:
    out = ns_run(ns, "sysctl", "-n", key)
    assert out.returncode == 0, out.stderr
    return " ".join(out.stdout.split())


def ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=10)


def ns_check_json(ns: str, *args: str, timeout: float) -> tuple[int, dict[str, Any]]:
    """`tcpwizard check --json ARGS` inside `ns`: its exit code and document. The venv's
    script where there is one, so what is tested is what `pip install` put on PATH."""
    script = Path(sys.executable).with_name("tcpwizard")
    cmd = [str(script)] if script.exists() else [sys.executable, "-m", "tcpwizard"]
    out = subprocess.run(
        ["ip", "netns", "exec", ns, *cmd, "check", "--json", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert "Traceback" not in out.stderr, out.stderr
    doc: dict[str, Any] = json.loads(out.stdout)
    return out.returncode, doc
