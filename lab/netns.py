"""Thin wrappers over `ip netns`, `ip link` and /proc for building and removing labs."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import time
from typing import IO, Any, cast

from tcpwizard.exitcodes import TcpWizardError, Unavailable, UsageError
from tcpwizard.lab.tun import NETNS_RUN_DIR


class LabError(TcpWizardError):
    """A lab could not be built or used (the message says which step failed)."""


def ip(*args: str, ns: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    cmd = ["ip"] + (["-n", ns] if ns else []) + list(args)
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=15)
    except FileNotFoundError as exc:
        raise Unavailable("the `ip` command (iproute2) is not installed") from exc
    if check and proc.returncode != 0:
        raise LabError(f"{' '.join(cmd)}: {proc.stderr.strip() or 'failed'}")
    return proc


def ns_exists(ns: str) -> bool:
    return os.path.exists(os.path.join(NETNS_RUN_DIR, ns))


def ns_list() -> list[str]:
    try:
        return sorted(os.listdir(NETNS_RUN_DIR))
    except FileNotFoundError:
        return []


def ns_add(ns: str) -> None:
    if ns_exists(ns):
        raise UsageError(f"network namespace {ns} already exists (remove it or pick another name)")
    ip("netns", "add", ns)


def ns_pids(ns: str) -> list[int]:
    if not ns_exists(ns):
        return []
    out = ip("netns", "pids", ns, check=False).stdout
    return [int(p) for p in out.split() if p.isdigit()]


def kill_ns_processes(
    ns: str, grace_s: float = 0.5, keep: set[int] | frozenset[int] = frozenset()
) -> None:
    """Programs started inside the namespace (iperf3 -s...) would keep it alive."""
    pids = [p for p in ns_pids(ns) if p not in keep]
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + grace_s
        while pids and time.monotonic() < deadline:
            pids = [p for p in pids if pid_alive(p)]
            time.sleep(0.02)
        if not pids:
            return


def ns_del(ns: str) -> None:
    if ns_exists(ns):
        ip("netns", "del", ns, check=False)


def pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            # A zombie has exited; only its parent's wait() is missing.
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


def start_time(pid: int) -> int | None:
    """Clock ticks after boot at which `pid` started: tells a process from a pid reuse."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[19])
    except (FileNotFoundError, IndexError, ValueError):
        return None


def cmdline(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
    except (FileNotFoundError, ProcessLookupError):
        return []


def is_delayline_of(pid: int, name: str) -> bool:
    """Guard against pid reuse: only signal the process that is this lab's emulator."""
    argv = cmdline(pid)
    return "tcpwizard.lab.delayline" in argv and "--name" in argv and name in argv


def terminate(pid: int, grace_s: float = 1.0) -> None:
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        if not pid_alive(pid):
            return
        time.sleep(0.02)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def stop(proc: subprocess.Popen[Any], grace_s: float = 5.0) -> None:
    """SIGTERM, a grace period, then SIGKILL: a helper process never outlives its user."""
    proc.terminate()
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=grace_s)


READY_TIMEOUT_S = 10.0


def said_ready(proc: subprocess.Popen[bytes]) -> bool:
    """Whether a delay line just started (its stdout a pipe) printed "ready" in time; its
    stdout is closed either way."""
    out = cast(IO[bytes], proc.stdout)  # PIPE was requested by the caller
    ready, _, _ = select.select([out], [], [], READY_TIMEOUT_S)
    line = out.readline() if ready else b""
    out.close()
    return line.strip() == b"ready"


def write_sysctl(ns: str, key: str, value: str) -> None:
    """Set a sysctl inside `ns` (/proc/sys/net follows the writer's namespace)."""
    path = "/proc/sys/" + key.replace(".", "/")
    proc = subprocess.run(
        ["ip", "netns", "exec", ns, "sh", "-c", 'test -e "$1" || exit 3; printf %s "$2" > "$1"',
         "sh", path, value],
        capture_output=True, text=True, check=False, timeout=15,
    )  # fmt: skip
    if proc.returncode == 3:
        raise UsageError(f"sysctl {key} does not exist in a network namespace on this kernel")
    if proc.returncode != 0:
        err = proc.stderr.strip().splitlines()
        detail = err[-1] if err else "write failed"
        if key == "net.ipv4.tcp_congestion_control":
            allowed = read_sysctl(ns, "net.ipv4.tcp_allowed_congestion_control")
            detail = f"a namespace may only choose one of: {allowed}"
        raise UsageError(f"sysctl {key}={value!r} refused in {ns}: {detail}")


def read_sysctl(ns: str, key: str) -> str:
    path = "/proc/sys/" + key.replace(".", "/")
    proc = subprocess.run(
        ["ip", "netns", "exec", ns, "cat", path],
        capture_output=True, text=True, check=False, timeout=15,
    )  # fmt: skip
    if proc.returncode != 0:
        raise LabError(f"cannot read sysctl {key} in {ns}: {proc.stderr.strip()}")
    return proc.stdout.strip()


def load_nft(ns: str, rules: str, needs: str = "") -> None:
    """Load an nftables ruleset into namespace `ns` (added to what is there: each user of it
    names its own table). `needs` says which nftables the rules want, for the error."""
    proc = subprocess.run(
        ["ip", "netns", "exec", ns, "nft", "-f", "-"],
        input=rules,
        text=True,
        capture_output=True,
        check=False,
        timeout=15,
    )
    if proc.returncode != 0:
        why = proc.stderr.strip() or "failed"
        raise LabError(f"nft in {ns}: {why} ({needs or 'apt-get install nftables'})")
