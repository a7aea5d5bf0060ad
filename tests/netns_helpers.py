"""Throwaway network namespaces for tests: unique names, always removed."""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

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


def ns_sysctl(ns: str, key: str) -> str:
    out = ns_run(ns, "sysctl", "-n", key)
    assert out.returncode == 0, out.stderr
    return " ".join(out.stdout.split())
