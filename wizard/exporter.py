"""`tcpwizard exporter`: check a list of targets on a schedule and serve /metrics.

Checks run one at a time (two test transfers at once would measure each other) and are spread
evenly over the interval, so N targets are not all tested at the top of the hour. In a mesh
(wizard/mesh.py) each target has its own slot in the interval instead, aligned on the wall
clock, so the exporters of a site never check through the same host at once. A scrape
never waits for a check: it reads the last result of each target. A target whose check failed
keeps answering with `tcpwizard_up 0`.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from tcpwizard.exitcodes import ExitCode, Unavailable, UsageError
from tcpwizard.inputs import InputError, read_text, split_host_port
from tcpwizard.metrics_http import (
    MAX_CLIENTS,
    REQUEST_DEADLINE_S,
    MetricsServer,
    start_metrics_server,
)
from tcpwizard.output.metrics import ReportCollector, report_families


@dataclass(frozen=True)
class Target:
    host: str
    port: int | None
    labels: tuple[tuple[str, str], ...] = ()

    @property
    def name(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}" if self.port else host


def _split_host_port(text: str, where: str, listen: bool = False) -> tuple[str, int | None]:
    """The same host and port rules as every command's HOST and --port."""
    try:
        return split_host_port(text, where, listen)
    except InputError as exc:
        raise UsageError(str(exc)) from None


def parse_targets(text: str, source: str = "targets") -> list[Target]:
    targets: list[Target] = []
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        first, *rest = line.split()
        where = f"{source}:{n}"
        host, port = _split_host_port(first, where)
        labels = []
        for item in rest:
            key, sep, value = item.partition("=")
            if not sep or not LABEL_RE.fullmatch(key) or key.startswith("__"):
                raise UsageError(f"{where}: label {item!r} is not name=value")
            if key in RESERVED_LABELS:
                raise UsageError(f"{where}: label {key!r} is used by tcpwizard's own series")
            labels.append((key, value))
        target = Target(host, port, tuple(labels))
        if any(t.name == target.name for t in targets):
            raise UsageError(f"{where}: {target.name} is listed twice")
        targets.append(target)
    if not targets:
        raise UsageError(f"{source}: no targets")
    return targets


def load_targets(path: str) -> list[Target]:
    return parse_targets(read_text(path, "targets file"), path)


LABEL_RE = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
# Label names tcpwizard's series already carry (output/metrics.py).
RESERVED_LABELS = frozenset(
    {
        "target",
        "stat",
        "mode",
        "direction",
        "side",
        "severity",
        "check",
        "kind",
        "limiting_factor",
        "host_to_fix",
        "rtt_ms",
    }
)

CheckFn = Callable[[Target], Mapping[str, Any]]


@dataclass
class _Last:
    report: Mapping[str, Any]
    up: bool
    duration_s: float
    finished: float
    streak: int = 0  # completed checks in a row whose verdict was not path-capacity
    busy_waits: int = 0  # times the far end said "busy, come back later", all checks


HEALTHY = "path-capacity"


@dataclass(eq=False)  # the registry keeps collectors in a set: identity hashing
class Exporter(Collector):
    targets: list[Target]
    interval_s: float
    check: CheckFn
    clock: Callable[[], float] = time.monotonic
    # Mesh: seconds after the start of each interval (wall clock, a multiple of the interval
    # since the epoch) at which a target's check starts; targets not in it are spread evenly.
    offsets: Mapping[str, float] | None = None
    wall: Callable[[], float] = time.time
    _last: dict[str, _Last] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stop: threading.Event = field(default_factory=threading.Event)

    def schedule(self, start: float) -> list[tuple[float, Target]]:
        """First run of each target: evenly spread over one interval."""
        step = self.interval_s / len(self.targets)
        if not self.offsets:
            return [(start + i * step, t) for i, t in enumerate(self.targets)]
        into = self.wall() % self.interval_s  # where in the interval we are now
        due = []
        for i, t in enumerate(self.targets):
            offset = self.offsets.get(t.name)
            if offset is None:
                due.append((start + i * step, t))
            else:
                due.append((start + (offset - into) % self.interval_s, t))
        return due

    def run_one(self, target: Target) -> None:
        t0 = self.clock()
        try:
            report = self.check(target)
            up = report.get("exit_code") != 3
        except Exception as exc:  # a failing target must never stop the exporter
            report = {"exit_code": 3, "error": f"{type(exc).__name__}: {exc}"}
            up = False
        waits = report.get("busy_waits")
        waits = waits if isinstance(waits, int) and not isinstance(waits, bool) else 0
        with self._lock:
            prev = self._last.get(target.name)
            streak = prev.streak if prev else 0
            if up:  # a check that could not complete neither extends nor ends a streak
                factor = (report.get("verdict") or {}).get("limiting_factor")
                streak = 0 if factor == HEALTHY else streak + 1
            total = (prev.busy_waits if prev else 0) + waits
            self._last[target.name] = _Last(
                report, up, self.clock() - t0, time.time(), streak, total
            )

    def loop(self) -> None:
        queue = self.schedule(self.clock())
        while not self._stop.is_set():
            queue.sort(key=lambda item: item[0])
            due, target = queue[0]
            if self._stop.wait(max(0.0, due - self.clock())):
                return
            self.run_one(target)
            # A check that overran its slot must not leave the schedule behind for good
            # (checks back to back would load the path without pause). A mesh slot keeps its
            # place in the interval: a late check waits for its slot of the next one.
            late = self.clock() - (due + self.interval_s)
            if late > 0 and self.offsets and target.name in self.offsets:
                queue[0] = (due + self.interval_s * (2 + late // self.interval_s), target)
            else:
                queue[0] = (max(due + self.interval_s, self.clock()), target)

    def stop(self) -> None:
        self._stop.set()

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            last = dict(self._last)
        fams: list[Metric] = []
        info = GaugeMetricFamily(
            "tcpwizard_target_last_check_timestamp_seconds",
            "when the last check of a target finished (0: not yet checked)",
            labels=["target"],
        )
        interval = GaugeMetricFamily(
            "tcpwizard_exporter_interval_seconds", "how often each target is checked"
        )
        interval.add_metric([], self.interval_s)
        for t in self.targets:
            entry = last.get(t.name)
            info.add_metric([t.name], entry.finished if entry else 0.0)
            base = {"target": t.name, **dict(t.labels)}
            if entry is None:
                continue
            fams.extend(report_families(entry.report, base, entry.up, entry.duration_s))
            fams.extend(_exporter_families(entry, base))
        yield info
        yield interval
        yield from ReportCollector(fams).collect()


def _exporter_families(entry: _Last, base: Mapping[str, str]) -> list[Metric]:
    keys, vals = list(base), list(base.values())
    streak = GaugeMetricFamily(
        "tcpwizard_unhealthy_streak_checks",
        "completed checks in a row whose verdict was not path-capacity (0: the last was)",
        labels=keys,
    )
    streak.add_metric(vals, float(entry.streak))
    waits = CounterMetricFamily(
        "tcpwizard_busy_waits",
        "times the far end answered busy (another measurement through it) and the check waited",
        labels=keys,
    )
    waits.add_metric(vals, float(entry.busy_waits))
    fams: list[Metric] = [streak, waits]
    measured = entry.report.get("measured")
    if isinstance(measured, bool):
        g = GaugeMetricFamily(
            "tcpwizard_measured",
            "1 if the last check measured a test transfer, 0 if its verdict is predicted",
            labels=keys,
        )
        g.add_metric(vals, 1.0 if measured else 0.0)
        fams.append(g)
    return fams


def serve_exporter(
    exporter: Exporter,
    listen: str,
    max_clients: int = MAX_CLIENTS,
    request_deadline_s: float = REQUEST_DEADLINE_S,
) -> tuple[MetricsServer, threading.Thread]:
    host, port = _split_host_port(listen, "--listen", listen=True)
    if port is None:
        raise UsageError("--listen needs ADDR:PORT")
    registry = CollectorRegistry()
    registry.register(exporter)
    try:
        server = start_metrics_server(registry, host, port, max_clients, request_deadline_s)
    except OSError as exc:  # in use, not an address of this host, a privileged port
        raise Unavailable(
            f"cannot listen on {listen}: {exc.strerror or exc}", ExitCode.UNKNOWN
        ) from None
    worker = threading.Thread(target=exporter.loop, name="tcpwizard-checks", daemon=True)
    worker.start()
    return server, worker
