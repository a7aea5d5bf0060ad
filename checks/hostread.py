"""Host facts beyond sysctls (sysfs, /proc/irq, ethtool, tc, one short loopback TCP flow), each
read once and recorded, so the far end's facts can be replayed by the client like its
sysctls (checks/facts.py).

Keys name what was read: "file:/sys/...", "ls:/sys/...", "cmd:ethtool -g eth0",
"affinity" (this process's CPUs), "flow_bps" (one loopback TCP flow's rate). A read that
failed is recorded under "!" + key with the reason, so a replay says why it is missing.
Standard library only: the far end runs as a zipapp without third-party packages.
"""

from __future__ import annotations

import os
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

# (returncode, stdout, stderr) of a program; injectable for tests.
Runner = Callable[[Sequence[str]], tuple[int, str, str]]

COMMAND_TIMEOUT_S = 5.0
# The loopback flow: long enough for many RTTs of loopback (tens of microseconds) after a
# warm-up that excludes slow start and the first buffer growth, short enough to be cheap.
FLOW_SECONDS = 0.3
FLOW_WARMUP_S = 0.1
FLOW_CHUNK = 1 << 20


class FactMissing(Exception):
    pass


def run_program(argv: Sequence[str]) -> tuple[int, str, str]:
    try:
        out = subprocess.run(
            list(argv), capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S, check=False
        )
    except FileNotFoundError:
        return 127, "", f"{argv[0]} is not installed"
    except (OSError, subprocess.SubprocessError) as exc:
        return 1, "", str(exc)
    return out.returncode, out.stdout, out.stderr


def parse_cpulist(text: str) -> frozenset[int]:
    """'0-3,8,10-11' as a set of CPU numbers (the kernel's cpulist format)."""
    cpus: set[int] = set()
    for part in text.replace("\n", ",").split(","):
        part = part.strip()
        if not part:
            continue
        lo, _, hi = part.partition("-")
        if not lo.isdigit() or (hi and not hi.isdigit()):
            raise ValueError(f"not a CPU list: {text!r}")
        first, last = int(lo), int(hi or lo)
        if last - first > 65536:
            raise ValueError(f"CPU range too long: {part!r}")
        cpus.update(range(first, last + 1))
    return frozenset(cpus)


def format_cpulist(cpus: frozenset[int] | set[int]) -> str:
    out: list[str] = []
    ordered = sorted(cpus)
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        out.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(out)


def measure_flow_bps(duration_s: float = FLOW_SECONDS) -> float:
    """The rate of one TCP flow through this host's own stack (loopback: no NIC, a 64 KB
    MTU, sender and receiver each a thread on their own core where there are two): an
    upper bound for one flow through a NIC, which adds per-packet work. Bounded in time."""
    with socket.create_server(("127.0.0.1", 0)) as srv:
        cli = socket.create_connection(srv.getsockname()[:2], timeout=2.0)
        conn, _ = srv.accept()
    marks: list[tuple[float, int]] = []

    def sink() -> None:
        buf = bytearray(FLOW_CHUNK)
        total = 0
        try:
            while True:
                n = conn.recv_into(buf)
                if n == 0:
                    return
                total += n
                marks.append((time.perf_counter(), total))
        except OSError:  # timed out or reset: the marks so far are judged below
            return

    with cli, conn:
        conn.settimeout(2.0)
        thread = threading.Thread(target=sink, daemon=True)
        start = time.perf_counter()
        thread.start()
        data = memoryview(bytearray(FLOW_CHUNK))
        while time.perf_counter() - start < duration_s:
            cli.sendall(data)
        cli.shutdown(socket.SHUT_WR)
        thread.join(timeout=5.0)
    after = [(t, n) for t, n in marks if t - start >= FLOW_WARMUP_S]
    if len(after) < 2 or after[-1][0] <= after[0][0]:
        raise OSError("the loopback flow moved too little to time")
    return (after[-1][1] - after[0][1]) * 8 / (after[-1][0] - after[0][0])


def _flow_or_missing(measure: Callable[[], float]) -> str:
    try:
        return f"{measure():.0f}"
    except OSError as exc:  # lo down in a fresh namespace, sockets refused
        raise FactMissing(f"no loopback flow: {exc}") from None


class HostReader:
    """Live reads under `sys_root` and `proc_root`; `values` records what was read."""

    def __init__(
        self,
        sys_root: str = "/sys",
        proc_root: str = "/proc",
        runner: Runner = run_program,
        flow_rate: Callable[[], float] = measure_flow_bps,
    ) -> None:
        self.roots = {"/sys": Path(sys_root), "/proc": Path(proc_root)}
        self.runner = runner
        self.flow_rate = flow_rate
        self.values: dict[str, str] = {}

    def _local(self, path: str) -> Path:
        for prefix, root in self.roots.items():
            if path == prefix or path.startswith(prefix + "/"):
                return root / path[len(prefix) :].lstrip("/")
        raise FactMissing(f"{path} is outside /sys and /proc")

    def _get(self, key: str, produce: Callable[[], str]) -> str | None:
        if key in self.values:
            return self.values[key]
        if "!" + key in self.values:
            return None
        try:
            value = produce()
        except FactMissing as exc:
            self.values["!" + key] = str(exc)
            return None
        self.values[key] = value
        return value

    def why(self, key: str) -> str:
        """Why `key` could not be read ("" when it was)."""
        return self.values.get("!" + key, "")

    # Producers: overridden by RecordedHost.
    def _read_file(self, path: str) -> str:
        try:
            return self._local(path).read_text(errors="replace").strip()
        except FileNotFoundError:
            raise FactMissing(f"{path} does not exist") from None
        except OSError as exc:
            raise FactMissing(f"{path}: {exc.strerror or exc}") from None

    def _list_dir(self, path: str) -> str:
        try:
            return " ".join(sorted(p.name for p in self._local(path).iterdir()))
        except FileNotFoundError:
            raise FactMissing(f"{path} does not exist") from None
        except OSError as exc:
            raise FactMissing(f"{path}: {exc.strerror or exc}") from None

    def _run(self, argv: tuple[str, ...]) -> str:
        code, out, err = self.runner(argv)
        if code != 0:
            first = (err or out).strip().splitlines()
            raise FactMissing(first[0] if first else f"{argv[0]} exited with {code}")
        return out

    def _affinity(self) -> str:
        try:
            return format_cpulist(set(os.sched_getaffinity(0)))
        except (AttributeError, OSError) as exc:
            raise FactMissing(f"CPU affinity unknown: {exc}") from None

    def _flow(self) -> str:
        return _flow_or_missing(self.flow_rate)

    # What checks call.
    def file(self, path: str) -> str | None:
        return self._get("file:" + path, lambda: self._read_file(path))

    def listdir(self, path: str) -> tuple[str, ...] | None:
        text = self._get("ls:" + path, lambda: self._list_dir(path))
        return None if text is None else tuple(text.split())

    def command(self, *argv: str, keep: tuple[str, ...] = ()) -> str | None:
        """A program's output; `keep`: only the lines that start with one of these labels
        (what is recorded and shipped stays small)."""

        def produce() -> str:
            out = self._run(argv)
            if keep:
                out = "\n".join(x for x in out.splitlines() if x.strip().startswith(keep))
            return out

        return self._get("cmd:" + " ".join(argv), produce)

    def affinity(self) -> frozenset[int] | None:
        text = self._get("affinity", self._affinity)
        try:
            return None if text is None else parse_cpulist(text)
        except ValueError:
            return None

    def flow_bps(self) -> float | None:
        text = self._get("flow_bps", self._flow)
        try:
            return None if text is None else float(text)
        except ValueError:
            return None


class RecordedHost(HostReader):
    """Replays recorded values (a far end's facts, or a test's): anything not recorded is
    missing, with the far end's own reason when it sent one."""

    def __init__(self, values: Mapping[str, str] | None = None, source: str = "") -> None:
        super().__init__("/nonexistent", "/nonexistent")
        self.values = dict(values or {})
        self.source = source or "not read on this host"

    def _missing(self) -> str:
        raise FactMissing(self.source)

    def _read_file(self, path: str) -> str:
        return self._missing()

    def _list_dir(self, path: str) -> str:
        return self._missing()

    def _run(self, argv: tuple[str, ...]) -> str:
        return self._missing()

    def _affinity(self) -> str:
        return self._missing()

    def _flow(self) -> str:
        return self._missing()
