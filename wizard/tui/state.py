"""What the TUI knows about the current run, folded from the pipeline's Events.

Kept free of Textual so it can be tested and reasoned about alone: the app feeds it Events
(on the UI thread, from worker messages) and each screen renders from it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tcpwizard.checks.model import HostAudit
from tcpwizard.measure.farends.interface import Progress
from tcpwizard.measure.model import Direction, Mode, ModeResult, PathEstimate
from tcpwizard.report import Report
from tcpwizard.run import CheckRequest, Event, Stage

STAGES: tuple[Stage, ...] = ("audit", "peer", "probe", "transfer", "diagnose")
STAGE_TITLES: dict[str, str] = {
    "audit": "Audit this host",
    "peer": "Ask the peer for its settings",
    "probe": "Measure RTT and capacity",
    "transfer": "Test transfers",
    "diagnose": "Name the limiting factor",
}

SeriesKey = tuple[Mode, Direction]


@dataclass
class LiveSeries:
    """One mode's transfer as it runs: local samples first, the merged result at its end."""

    mode: Mode
    direction: Direction
    samples: list[Progress] = field(default_factory=list)
    total_s: float | None = None
    total_bytes: int | None = None
    result: ModeResult | None = None

    @property
    def label(self) -> str:
        return f"{self.mode} {self.direction}"

    @property
    def fraction(self) -> float:
        """0..1 of the transfer done (for a progress bar)."""
        if self.result is not None:
            return 1.0
        if not self.samples:
            return 0.0
        last = self.samples[-1]
        if self.total_s:
            return min(1.0, last.t_s / self.total_s)
        if self.total_bytes:
            return min(1.0, last.bytes / self.total_bytes)
        return 0.0


@dataclass
class RunState:
    """Mutable on purpose: it is the UI's view of a run in progress, not a result."""

    request: CheckRequest | None = None
    running: bool = False
    stage: Stage | None = None
    log: list[str] = field(default_factory=list)
    local: HostAudit | None = None
    peer: HostAudit | None = None
    path: PathEstimate | None = None
    series: dict[SeriesKey, LiveSeries] = field(default_factory=dict)
    report: Report | None = None
    error: str | None = None
    cancelled: bool = False

    def start(self, request: CheckRequest, local: HostAudit | None) -> None:
        """A new run: forget the last one's measurements, keep the local audit to show."""
        self.request = request
        self.running = True
        self.stage = None
        self.log = [f"checking {request.host} port {request.port}"]
        self.local = local
        self.peer = None
        self.path = None
        self.series = {}
        self.report = None
        self.error = None
        self.cancelled = False

    def stage_state(self, stage: Stage) -> str:
        """'done', 'running', 'pending' or 'skipped' for the stage list."""
        if self.report is not None:
            if stage == "transfer" and self.report.transfer is None:
                return "skipped"
            if stage == "probe" and self.report.path is None:
                return "skipped"
            return "done"
        if self.stage is None:
            return "pending"
        now = STAGES.index(self.stage) if self.stage in STAGES else len(STAGES)
        i = STAGES.index(stage)
        if i < now:
            return "done"
        if i == now:
            return "running" if self.running else "stopped"
        return "pending"

    def apply(self, ev: Event) -> None:
        self.stage = ev.stage
        if ev.local is not None:
            self.local = ev.local
        if ev.peer is not None:
            self.peer = ev.peer
        if ev.path is not None:
            self.path = ev.path
        if ev.transfer is not None:
            self._progress(ev.transfer)
        elif ev.message and (not self.log or self.log[-1] != ev.message):
            self.log.append(ev.message)

    def _progress(self, p: Progress) -> None:
        key = (p.mode, p.direction)
        s = self.series.get(key)
        if s is None:
            s = self.series[key] = LiveSeries(p.mode, p.direction)
            self.log.append(f"transfer: {p.mode} {p.direction}")
        s.total_s, s.total_bytes = p.total_s, p.total_bytes
        if p.phase == "sample":
            s.samples.append(p)
        elif p.phase == "done" and p.result is not None:
            s.result = p.result

    def finish(self, report: Report) -> None:
        self.running = False
        self.report = report
        self.stage = "done"
        self.local, self.peer, self.path = report.host, report.peer, report.path
        # The report's results are the merged ones (both ends' samples): they win.
        if report.transfer is not None:
            for m in report.transfer.modes:
                key = (m.mode, m.direction)
                s = self.series.setdefault(key, LiveSeries(m.mode, m.direction))
                s.result = m
        self.log.append(f"done: {report.verdict.limiting_factor}")

    def fail(self, error: str, cancelled: bool) -> None:
        self.running = False
        self.error = error
        self.cancelled = cancelled
        self.log.append("cancelled" if cancelled else f"error: {error}")
