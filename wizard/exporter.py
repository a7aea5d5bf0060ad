"""`tcpwizard exporter`: check a list of targets on a schedule and serve /metrics.

Checks run one at a time (two test transfers at once would measure each other) and are spread
evenly over the interval, so N targets are not all tested at the top of the hour. A scrape
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

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from tcpwizard.exitcodes import ExitCode, Unavailable, UsageError
from tcpwizard.inputs import InputError, read_text, split_host_port
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


@dataclass(eq=False)  # the registry keeps collectors in a set: identity hashing
class Exporter(Collector):
    targets: list[Target]
    interval_s: float
    check: CheckFn
    clock: Callable[[], float] = time.monotonic
    _last: dict[str, _Last] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stop: threading.Event = field(default_factory=threading.Event)

    def schedule(self, start: float) -> list[tuple[float, Target]]:
        """First run of each target: evenly spread over one interval."""
        step = self.interval_s / len(self.targets)
        return [(start + i * step, t) for i, t in enumerate(self.targets)]

    def run_one(self, target: Target) -> None:
        t0 = self.clock()
        try:
            report = self.check(target)
            up = report.get("exit_code") != 3
        except Exception as exc:  # a failing target must never stop the exporter
            report = {"exit_code": 3, "error": f"{type(exc).__name__}: {exc}"}
            up = False
        with self._lock:
            self._last[target.name] = _Last(report, up, self.clock() - t0, time.time())

    def loop(self) -> None:
        queue = self.schedule(self.clock())
        while not self._stop.is_set():
            queue.sort(key=lambda item: item[0])
            due, target = queue[0]
            if self._stop.wait(max(0.0, due - self.clock())):
                return
            self.run_one(target)
            # A check that overran its slot must not leave the schedule behind for good
            # (checks back to back would load the path without pause).
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
        for t in self.targets:
            entry = last.get(t.name)
            info.add_metric([t.name], entry.finished if entry else 0.0)
            base = {"target": t.name, **dict(t.labels)}
            if entry is None:
                continue
            fams.extend(report_families(entry.report, base, entry.up, entry.duration_s))
        yield info
        yield from ReportCollector(fams).collect()


def serve_exporter(exporter: Exporter, listen: str) -> tuple[Any, threading.Thread]:
    host, port = _split_host_port(listen, "--listen", listen=True)
    if port is None:
        raise UsageError("--listen needs ADDR:PORT")
    registry = CollectorRegistry()
    registry.register(exporter)
    try:
        server, _ = start_http_server(port, addr=host, registry=registry)
    except OSError as exc:  # in use, not an address of this host, a privileged port
        raise Unavailable(
            f"cannot listen on {listen}: {exc.strerror or exc}", ExitCode.UNKNOWN
        ) from None
    worker = threading.Thread(target=exporter.loop, name="tcpwizard-checks", daemon=True)
    worker.start()
    return server, worker
