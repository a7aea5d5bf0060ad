"""What a transfer cost its host: per-core CPU, the transferring process's own share, how
long the process was held off the CPU, and packets dropped inside the host
(docs/transfer.md, "Host load").

Read from /proc and /sys at the start and end of each transfer (roots injectable, so unit
tests run on a fake tree):

- /proc/stat: per-core user, system and softirq ticks; their deltas over the transfer are
  each core's busy share. Ticks count in 1/USER_HZ s, so over T seconds a reading is off by
  at most one tick at each end: a core busy the whole time reads >= 1 - 2/(HZ*T).
- /proc/<pid>/task/*/stat: every thread's utime + stime; the process's share in cores and
  its busiest thread's share of one core (a single-threaded sender cannot use more).
- a sampler thread that sleeps a fixed interval and notes how late it wakes: a process
  throttled by a cgroup CPU quota, or crowded out by other work, wakes late by the time it
  was kept off the CPU. Neither /proc/<pid>/schedstat (throttled time is not run delay) nor
  the cgroup's cpu.stat (hidden where /sys is another namespace's sysfs, as inside
  `ip netns exec`) shows it everywhere; the late wake-ups do.
- /proc/net/softnet_stat (dropped, time_squeeze per CPU), each interface's sysfs
  statistics (rx_dropped, rx_missed_errors, rx_fifo_errors, tx_dropped) and the qdiscs'
  drops (`tc -s -j qdisc show`).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

USER_HZ = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
SAMPLE_INTERVAL_S = 0.05
# A wake-up later than this was held off the CPU, not merely scheduled: CFS's default
# latency target is 6 ms x (1 + log2(CPUs)), 24 ms at 8 CPUs; anything beyond two of
# those on the machines we meet is time the process wanted a CPU and was refused one.
LATE_S = 0.05
TC_TIMEOUT_S = 3.0
DROP_COUNTERS = ("rx_dropped", "rx_missed_errors", "rx_fifo_errors", "tx_dropped")


@dataclass(frozen=True)
class CoreLoad:
    """One core's shares of the transfer's elapsed time, 0..1."""

    cpu: int
    user: float
    system: float
    softirq: float
    busy: float  # everything but idle and iowait


@dataclass(frozen=True)
class HostDrops:
    """Packets dropped inside the host during the transfer (deltas)."""

    softnet_dropped: int = 0  # the per-CPU input backlog was full (netdev_max_backlog)
    time_squeeze: int = 0  # NAPI ran out of budget with work left (netdev_budget)
    rx_dropped: int = 0
    rx_missed_errors: int = 0  # the NIC's receive ring was full
    rx_fifo_errors: int = 0
    tx_dropped: int = 0  # the driver's transmit ring was full
    qdisc_drops: int = 0
    interface: str = ""  # the interface with the most drops ("" when none dropped)

    def to_json(self) -> dict[str, Any]:
        """Every counter by its name, and the interface (the peer's report and our JSON)."""
        return asdict(self)

    @property
    def total(self) -> int:
        """Packets lost inside the host (time_squeeze is a delay, not a loss)."""
        return (
            self.softnet_dropped
            + self.rx_dropped
            + self.rx_missed_errors
            + self.rx_fifo_errors
            + self.tx_dropped
            + self.qdisc_drops
        )


@dataclass(frozen=True)
class HostLoad:
    """One host's load over one transfer."""

    seconds: float
    cores: tuple[CoreLoad, ...]
    process_cores: float  # the process's CPU time / elapsed, in cores
    busiest_thread: float  # its busiest thread's share of one core
    starved: float  # share of the elapsed time the process was kept off the CPU
    drops: HostDrops | None = None

    @property
    def busiest_core(self) -> CoreLoad | None:
        return max(self.cores, key=lambda c: c.busy, default=None)

    def to_json(self) -> dict[str, Any]:
        return {
            "seconds": round(self.seconds, 3),
            "cores": [
                [c.cpu, round(c.user, 4), round(c.system, 4), round(c.softirq, 4), round(c.busy, 4)]
                for c in self.cores
            ],
            "process_cores": round(self.process_cores, 4),
            "busiest_thread": round(self.busiest_thread, 4),
            "starved": round(self.starved, 4),
            "drops": None if self.drops is None else self.drops.to_json(),
        }

    @classmethod
    def from_json(cls, obj: object) -> HostLoad:
        """A peer's report; ValueError on anything malformed."""
        if not isinstance(obj, dict):
            raise ValueError("host_load is not an object")
        try:
            cores = tuple(
                CoreLoad(int(c), float(u), float(s), float(si), float(b))
                for c, u, s, si, b in obj["cores"]
            )
            d = obj.get("drops")
            drops = None
            if isinstance(d, dict):
                drops = HostDrops(
                    **{k: int(d.get(k, 0)) for k in _DROP_INTS},
                    interface=str(d.get("interface", "")),
                )
            load = cls(
                float(obj["seconds"]),
                cores,
                float(obj["process_cores"]),
                float(obj["busiest_thread"]),
                float(obj.get("starved", 0.0)),
                drops,
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"malformed host_load: {exc}") from None
        shares = (load.process_cores, load.busiest_thread, load.starved, load.seconds)
        if any(not 0 <= v < 1e6 for v in shares):
            raise ValueError("malformed host_load: shares out of range")
        return load


_DROP_INTS = (
    "softnet_dropped",
    "time_squeeze",
    "rx_dropped",
    "rx_missed_errors",
    "rx_fifo_errors",
    "tx_dropped",
    "qdisc_drops",
)

# ----------------------------------------------------------------------------- readings

# cpu -> (user+nice, system+irq, softirq, idle+iowait, total) in ticks
CpuTicks = dict[int, tuple[int, int, int, int, int]]


def read_cpu_ticks(proc_root: str = "/proc") -> CpuTicks:
    out: CpuTicks = {}
    try:
        text = Path(proc_root, "stat").read_text()
    except OSError:
        return out
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 8 or not parts[0].startswith("cpu") or parts[0] == "cpu":
            continue
        try:
            cpu = int(parts[0][3:])
            v = [int(x) for x in parts[1:9]]
        except ValueError:
            continue
        v += [0] * (8 - len(v))
        user, nice, system, idle, iowait, irq, softirq, steal = v
        total = user + nice + system + idle + iowait + irq + softirq + steal
        out[cpu] = (user + nice, system + irq, softirq, idle + iowait, total)
    return out


def core_loads(a: CpuTicks, b: CpuTicks) -> tuple[CoreLoad, ...]:
    cores: list[CoreLoad] = []
    for cpu in sorted(set(a) & set(b)):
        du, ds, dsi, didle, dt = (y - x for x, y in zip(a[cpu], b[cpu], strict=True))
        if dt <= 0:
            continue
        busy = min(1.0, max(0.0, (dt - didle) / dt))
        cores.append(CoreLoad(cpu, du / dt, ds / dt, dsi / dt, busy))
    return tuple(cores)


def read_thread_ticks(proc_root: str = "/proc", pid: int | str = "self") -> dict[int, int]:
    """utime + stime per thread, in ticks."""
    out: dict[int, int] = {}
    task = Path(proc_root, str(pid), "task")
    try:
        tids = list(task.iterdir())
    except OSError:
        return out
    for t in tids:
        try:
            text = (t / "stat").read_text()
            # The command may hold spaces and parentheses: fields follow the last ')'.
            fields = text[text.rindex(")") + 2 :].split()
            out[int(t.name)] = int(fields[11]) + int(fields[12])
        except (OSError, ValueError, IndexError):
            continue
    return out


def read_process_ticks(proc_root: str = "/proc", pid: int | str = "self") -> int | None:
    """utime + stime of the whole process, in ticks: the kernel adds an exited thread's time
    to its process, so threads that ran a transfer and ended still count."""
    try:
        text = Path(proc_root, str(pid), "stat").read_text()
        fields = text[text.rindex(")") + 2 :].split()
        return int(fields[11]) + int(fields[12])
    except (OSError, ValueError, IndexError):
        return None


def _softnet(proc_root: str) -> tuple[int, int]:
    dropped = squeeze = 0
    try:
        lines = Path(proc_root, "net", "softnet_stat").read_text().splitlines()
    except OSError:
        return 0, 0
    for line in lines:
        parts = line.split()
        if len(parts) >= 3:
            with contextlib.suppress(ValueError):
                dropped += int(parts[1], 16)
                squeeze += int(parts[2], 16)
    return dropped, squeeze


def _iface_counters(sys_root: str) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    base = Path(sys_root, "class", "net")
    try:
        names = sorted(p.name for p in base.iterdir())
    except OSError:
        return out
    for name in names:
        if name == "lo":
            continue
        row: dict[str, int] = {}
        for c in DROP_COUNTERS:
            try:
                row[c] = int(Path(base, name, "statistics", c).read_text().strip())
            except (OSError, ValueError):
                row[c] = 0
        out[name] = row
    return out


def parse_tc_json(text: str) -> dict[str, int]:
    """Drops per device from `tc -s -j qdisc show` (root and child qdiscs summed)."""
    try:
        rows = json.loads(text)
    except ValueError:
        return {}
    out: dict[str, int] = {}
    if not isinstance(rows, list):
        return out
    for q in rows:
        if isinstance(q, dict) and isinstance(q.get("dev"), str) and q["dev"] != "lo":
            drops = q.get("drops", 0)
            if isinstance(drops, int):
                out[q["dev"]] = out.get(q["dev"], 0) + drops
    return out


def _qdisc_drops() -> dict[str, int]:
    try:
        proc = subprocess.run(
            ["tc", "-s", "-j", "qdisc", "show"],
            capture_output=True,
            text=True,
            check=False,
            timeout=TC_TIMEOUT_S,
        )
    except (OSError, subprocess.SubprocessError):
        return {}
    return parse_tc_json(proc.stdout) if proc.returncode == 0 else {}


@dataclass(frozen=True)
class DropCounters:
    softnet: tuple[int, int]
    ifaces: Mapping[str, Mapping[str, int]]
    qdiscs: Mapping[str, int]


def read_drops(
    proc_root: str = "/proc",
    sys_root: str = "/sys",
    qdiscs: Callable[[], dict[str, int]] = _qdisc_drops,
) -> DropCounters:
    return DropCounters(_softnet(proc_root), _iface_counters(sys_root), qdiscs())


def drop_delta(a: DropCounters, b: DropCounters) -> HostDrops:
    per: dict[str, dict[str, int]] = {}
    for name, row in b.ifaces.items():
        before = a.ifaces.get(name, {})
        per[name] = {c: max(0, v - before.get(c, 0)) for c, v in row.items()}
    for name, v in b.qdiscs.items():
        per.setdefault(name, {})["qdisc"] = max(0, v - a.qdiscs.get(name, 0))
    worst = max(per, key=lambda n: sum(per[n].values()), default="")
    row = per.get(worst, {})
    return HostDrops(
        softnet_dropped=max(0, b.softnet[0] - a.softnet[0]),
        time_squeeze=max(0, b.softnet[1] - a.softnet[1]),
        rx_dropped=row.get("rx_dropped", 0),
        rx_missed_errors=row.get("rx_missed_errors", 0),
        rx_fifo_errors=row.get("rx_fifo_errors", 0),
        tx_dropped=row.get("tx_dropped", 0),
        qdisc_drops=row.get("qdisc", 0),
        interface=worst if sum(row.values()) > 0 else "",
    )


# ------------------------------------------------------------------------------ sampler


class HostSampler:
    """Start before a transfer, `stop()` after it: the host's load over that span.

    A daemon thread wakes every `interval` to measure how late it wakes (see the module
    text); nothing else runs in it, so its cost is a few wake-ups a second."""

    def __init__(
        self,
        proc_root: str = "/proc",
        sys_root: str = "/sys",
        *,
        pid: int | str = "self",
        interval: float = SAMPLE_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
        qdiscs: Callable[[], dict[str, int]] = _qdisc_drops,
    ) -> None:
        self.proc_root, self.sys_root, self.pid = proc_root, sys_root, pid
        self.interval, self.clock, self.qdiscs = interval, clock, qdiscs
        self._stop = threading.Event()
        self._late = 0.0
        self._thread: threading.Thread | None = None
        self._t0 = clock()
        self._cpu0 = read_cpu_ticks(proc_root)
        self._thr0 = read_thread_ticks(proc_root, pid)
        # Each thread's latest ticks, read as the transfer runs: a data thread that ends
        # before stop() keeps what it used (all but the last read's interval).
        self._thr_seen = dict(self._thr0)
        self._proc0 = read_process_ticks(proc_root, pid)
        self._drops0 = read_drops(proc_root, sys_root, qdiscs)

    def start(self) -> HostSampler:
        self._thread = threading.Thread(target=self._watch, name="hostload", daemon=True)
        self._thread.start()
        return self

    def _watch(self) -> None:
        due = self.clock() + self.interval
        while not self._stop.wait(max(0.0, due - self.clock())):
            late = self.clock() - due
            if late > LATE_S:
                self._late += late
            self._thr_seen.update(read_thread_ticks(self.proc_root, self.pid))
            due = max(due + self.interval, self.clock() + self.interval / 2)

    def stop(self) -> HostLoad:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2.0)
        seconds = max(1e-9, self.clock() - self._t0)
        cpu1 = read_cpu_ticks(self.proc_root)
        self._thr_seen.update(read_thread_ticks(self.proc_root, self.pid))
        proc1 = read_process_ticks(self.proc_root, self.pid)
        drops1 = read_drops(self.proc_root, self.sys_root, self.qdiscs)
        per_thread = [v - self._thr0.get(tid, 0) for tid, v in self._thr_seen.items()]
        hz = float(USER_HZ)
        used = (
            proc1 - self._proc0
            if proc1 is not None and self._proc0 is not None
            else sum(per_thread)
        )
        return HostLoad(
            seconds=seconds,
            cores=core_loads(self._cpu0, cpu1),
            process_cores=max(0.0, used / hz / seconds),
            busiest_thread=min(1.0, max([0, *per_thread]) / hz / seconds),
            starved=min(1.0, self._late / seconds),
            drops=drop_delta(self._drops0, drops1),
        )


def sample_host() -> HostSampler:
    """The sampler a transfer uses on this host (started)."""
    return HostSampler().start()
