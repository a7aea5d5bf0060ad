"""`tcpwizard serve` inside a lab host, for the demo, scenario tests and benchmarks."""

from __future__ import annotations

import contextlib
import select
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

from tcpwizard.lab.lab import Lab
from tcpwizard.lab.netns import stop
from tcpwizard.lab.spec import Side

SERVE_PORT = 5301


def tcpwizard_argv(*args: str) -> list[str]:
    """The running interpreter's tcpwizard, so a venv need not be on PATH inside `ip netns`."""
    return [sys.executable, "-m", "tcpwizard", *args]


@contextlib.contextmanager
def serving(
    lab: Lab, side: Side = "b", port: int = SERVE_PORT, *extra: str, timeout_s: float = 15.0
) -> Iterator[subprocess.Popen[str]]:
    """Start serve in `side` (all its addresses, IPv4 and IPv6) and wait until it listens;
    stop it afterwards."""
    argv = tcpwizard_argv("serve", "--port", str(port), *extra)
    proc = lab.popen(side, argv, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    try:
        _wait_listening(proc, timeout_s)
        # serve logs every client to stderr; a full pipe would block it mid-test.
        threading.Thread(target=_drain, args=(proc,), daemon=True).start()
        yield proc
    finally:
        stop(proc)


def _wait_listening(proc: subprocess.Popen[str], timeout_s: float) -> None:
    assert proc.stderr is not None
    deadline = time.monotonic() + timeout_s
    seen: list[str] = []
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            rest = proc.stderr.read() or ""
            raise RuntimeError(f"serve exited ({proc.returncode}): {''.join(seen) + rest}".strip())
        ready, _, _ = select.select([proc.stderr], [], [], 0.2)
        if ready:
            line = proc.stderr.readline()
            seen.append(line)
            if "listening on" in line:
                return
    raise RuntimeError(f"serve did not start within {timeout_s:g} s: {''.join(seen)}")


def _drain(proc: subprocess.Popen[str]) -> None:
    assert proc.stderr is not None
    with contextlib.suppress(OSError, ValueError):
        for _line in proc.stderr:
            pass
