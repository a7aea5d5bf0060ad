"""Two network namespaces joined by a veth pair, optionally rate-limited with tbf.

This kernel has no sch_netem, so delay cannot be emulated here (the lab's TUN delay line
does that); tbf gives a known bottleneck rate. Names are unique per process and the
namespaces are always deleted, even when building them fails half way.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tcpwizard.lab.netns import stop

_counter = itertools.count()


def netns_available() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0 and shutil.which("ip") is not None


needs_netns = pytest.mark.skipif(not netns_available(), reason="needs root and iproute2")


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=10)


@dataclass(frozen=True)
class NsPair:
    a: str
    b: str
    addr_a: str = "10.201.0.1"
    addr_b: str = "10.201.0.2"
    addr6_a: str = "fd77:201::1"
    addr6_b: str = "fd77:201::2"

    def cmd(self, ns: str, *argv: str) -> list[str]:
        return ["ip", "netns", "exec", ns, *argv]

    def tw(self, ns: str, *argv: str) -> list[str]:
        return self.cmd(ns, sys.executable, "-m", "tcpwizard", *argv)


@contextlib.contextmanager
def ns_pair(rate: str | None = None, burst: str = "15kb") -> Iterator[NsPair]:
    tag = f"twp{os.getpid() % 100000}n{next(_counter)}"
    pair = NsPair(f"{tag}a", f"{tag}b")
    try:
        _ip("netns", "add", pair.a)
        _ip("netns", "add", pair.b)
        _ip(
            "link",
            "add",
            f"{tag}x",
            "netns",
            pair.a,
            "type",
            "veth",
            "peer",
            "name",
            f"{tag}y",
            "netns",
            pair.b,
        )
        for ns, dev, v4, v6 in (
            (pair.a, f"{tag}x", pair.addr_a, pair.addr6_a),
            (pair.b, f"{tag}y", pair.addr_b, pair.addr6_b),
        ):
            _ip("-n", ns, "link", "set", "lo", "up")
            _ip("-n", ns, "addr", "add", f"{v4}/24", "dev", dev)
            _ip("-n", ns, "addr", "add", f"{v6}/64", "dev", dev, "nodad")
            _ip("-n", ns, "link", "set", dev, "up")
            if rate:
                subprocess.run(
                    pair.cmd(
                        ns,
                        "tc",
                        "qdisc",
                        "add",
                        "dev",
                        dev,
                        "root",
                        "tbf",
                        "rate",
                        rate,
                        "burst",
                        burst,
                        "latency",
                        "50ms",
                    ),
                    check=True,
                    capture_output=True,
                    timeout=10,
                )
        yield pair
    finally:
        for ns in (pair.a, pair.b):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=10)


@contextlib.contextmanager
def serve_in(pair: NsPair, *extra: str) -> Iterator[subprocess.Popen[str]]:
    proc = subprocess.Popen(
        pair.tw(pair.b, "serve", "--port", "5301", *extra),
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        assert "listening" in line, line
        os.set_blocking(proc.stderr.fileno(), False)
        yield proc
    finally:
        stop(proc)
