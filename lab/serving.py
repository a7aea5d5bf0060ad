"""`tcpwizard serve` inside a lab host, and tcpwizard run there, for the demo, scenario tests
and benchmarks."""

from __future__ import annotations

import contextlib
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

from tcpwizard.lab.lab import Lab
from tcpwizard.lab.netns import stop
from tcpwizard.lab.spec import Side
from tcpwizard.measure.wire import spec

SERVE_PORT = spec.SERVE_PORT


def tcpwizard_argv(*args: str) -> list[str]:
    """The running interpreter's tcpwizard, so a venv need not be on PATH inside `ip netns`."""
    return [sys.executable, "-m", "tcpwizard", *args]


def run_tcpwizard(
    lab: Lab, side: Side, *args: str, timeout: float, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`tcpwizard ARGS` in host `side`, its output captured as text; its exit code is the
    caller's to judge."""
    argv = tcpwizard_argv(*args)
    return lab.run(side, argv, capture_output=True, text=True, timeout=timeout, env=env)


def check_pcap(lab: Lab, path: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """`check --pcap PATH --json` in host a, leaving the history alone."""
    return run_tcpwizard(
        lab, "a", "check", "--pcap", str(path), "--json", "--no-history", timeout=timeout
    )


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
        yield proc
    finally:
        stop(proc)


IPERF3_PORT = spec.IPERF3_PORT


@contextlib.contextmanager
def iperf3_serving(
    lab: Lab, side: Side = "b", port: int = IPERF3_PORT, *extra: str, timeout_s: float = 15.0
) -> Iterator[subprocess.Popen[str]]:
    """A stock `iperf3 -s` (Debian's binary) in `side`, for far-end tests; `extra` may be
    `-1` (one test, then exit) or `-J`. Waits until it listens; stops it afterwards."""
    argv = ["iperf3", "-s", "-p", str(port), "--forceflush", *extra]
    proc = lab.popen(side, argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        _wait_listening(proc, timeout_s, stream_name="stdout", marker="Server listening")
        yield proc
    finally:
        stop(proc)


def _wait_listening(
    proc: subprocess.Popen[str],
    timeout_s: float,
    stream_name: str = "stderr",
    marker: str = "listening on",
) -> None:
    """Read serve's stderr in a thread (select() on a buffered pipe can miss a line already
    read into Python's buffer) until it says it listens; keep draining after that, since
    serve logs every client and a full pipe would block it mid-test."""
    stream = proc.stderr if stream_name == "stderr" else proc.stdout
    assert stream is not None
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        with contextlib.suppress(OSError, ValueError):
            for line in stream:
                lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    deadline = time.monotonic() + timeout_s
    seen: list[str] = []
    while (left := deadline - time.monotonic()) > 0:
        try:
            line = lines.get(timeout=left)
        except queue.Empty:
            break
        if line is None:
            proc.wait(timeout=5)
            raise RuntimeError(f"serve exited ({proc.returncode}): {''.join(seen)}".strip())
        seen.append(line)
        if marker in line:
            return
    raise RuntimeError(f"serve did not start within {timeout_s:g} s: {''.join(seen)}")


def wait_port(lab: Lab, side: Side, port: int, timeout_s: float = 10.0) -> None:
    """Until something listens on TCP `port` in `side` (a server started by hand)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        out = lab.run(side, ["ss", "-Hltn", f"sport = :{port}"], capture_output=True, text=True)
        if out.stdout.strip():
            return
        time.sleep(0.1)
    raise RuntimeError(f"nothing listens on port {port} in host {side}")
