"""Fixed, constructed data for the TUI's snapshot tests: a mistuned receiver on a 100 Mbit/s
× 50 ms path, a peer, per-interval samples for three modes, and a verdict with fixes. A fake
`run_check` replays it as pipeline Events, so snapshots go through the same code paths as a
live run without any measurement."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from pathlib import Path

from tcpwizard.advice.model import Verdict, WizardGap
from tcpwizard.checks import SysctlReader, audit
from tcpwizard.checks.model import BdpTarget, HostAudit
from tcpwizard.context import Context
from tcpwizard.exitcodes import ExitCode
from tcpwizard.measure.model import (
    CapacityEstimate,
    Mode,
    ModeResult,
    PathEstimate,
    RttStats,
    TcpInfoSample,
    TransferResult,
    TransferSample,
)
from tcpwizard.measure.transfer import Progress
from tcpwizard.report import Report, TargetInfo
from tcpwizard.run import Cancelled, CheckRequest, Event, EventFn
from tcpwizard.tui import Services
from tests.fakes import make_tree, network

TARGET = BdpTarget(0.05, 100e6, "measured")
SMALL_RMEM = {
    "kernel.hostname": "laptop",
    "net.core.rmem_max": "212992",
    "net.ipv4.tcp_rmem": "4096\t131072\t1048576",
    "net.core.default_qdisc": "fq_codel",
}


def host_audit(tmp: Path, name: str, overrides: Mapping[str, str | None]) -> HostAudit:
    return audit(
        SysctlReader(make_tree(tmp / name, overrides)),
        "198.51.100.7",
        TARGET,
        network=network(),
        ram_bytes=8 << 30,
        page_size=4096,
    )


def _samples(mode: Mode, n: int = 20) -> tuple[TransferSample, ...]:
    """Smooth made-up curves with the shapes of the drsFTP paper's figures."""
    out: list[TransferSample] = []
    for i in range(1, n + 1):
        t = i * 0.25
        if mode == "untuned":
            rate, buf, rtt = 10.5, 131072, 50.0 + (i % 3) * 0.4
        elif mode == "autotune":
            rate, buf, rtt = min(60.0, 8.0 * i), min(1 << 20, 65536 * i), 50.5 + (i % 4) * 0.8
        else:
            rate, buf, rtt = min(94.0, 15.0 * i), min(1_250_000, 90_000 * i), 50.2 + (i % 5) * 0.6
        info = TcpInfoSample(int(rtt * 1000), 300, 40 + i, 0, int(rate * 1e6), 1, 0, 0, 1448)
        drs_rtt = rtt if mode == "drs" else None
        drs_bw = rate if mode == "drs" else None
        out.append(TransferSample(t, rate, buf, buf // 2, drs_bw, drs_rtt, info))
    return tuple(out)


def mode_result(mode: Mode) -> ModeResult:
    samples = _samples(mode)
    tput = sum(s.goodput_mbps for s in samples) / len(samples)
    buf = max(s.rcvbuf_bytes for s in samples)
    return ModeResult(
        mode, "up", 1, int(tput * 1e6 / 8 * 5), 5.0, tput, buf, 0, samples, 0.9, 0.0, 1.0, "bbr"
    )


MODES: tuple[Mode, ...] = ("untuned", "autotune", "drs")


def path_estimate() -> PathEstimate:
    return PathEstimate(
        RttStats(50.1, 50.3, 51.0, 50.4, 0.2, 52.0, 0.0, 0.1, 20, "udp-echo"),
        CapacityEstimate(100.1, "capprobe-pairs+train", 0.9, 100.4, 99.8),
        625_000,
        2.5,
        "198.51.100.7",
        5301,
        peer=True,
    )


def report(tmp: Path) -> Report:
    local = host_audit(tmp, "local", SMALL_RMEM)
    peer = host_audit(tmp, "peer", {"kernel.hostname": "dtn1"})
    transfer = TransferResult(tuple(mode_result(m) for m in MODES), "up", 1, "bbr", "bbr")
    verdict = Verdict(
        "receiver-window",
        0.85,
        "local",
        "The receiver's window limits the transfer: net.ipv4.tcp_rmem caps autotuning at "
        "1 MB, below the path's 625 KB BDP with headroom; DRS with a right-sized buffer "
        "reached 94 Mbit/s.",
        (
            "autotune: rwnd-limited 90% of the time",
            "drs reached 94 Mbit/s on the same path",
        ),
        WizardGap(10.5, 94.0, True),
    )
    return Report(
        host=local,
        verdict=verdict,
        fixes=local.fixes + peer.fixes,
        exit_code=ExitCode.CRITICAL,
        target=TargetInfo("dtn1.example", "198.51.100.7", 5301),
        peer=peer,
        path=path_estimate(),
        transfer=transfer,
        notes=("root: tuned modes used SO_RCVBUFFORCE",),
        measured=True,
    )


class FakePipeline:
    """Services for the app that replay `report` as Events; `stop_at` ends the run early
    with the app showing a running stage (for a snapshot of a run in progress)."""

    def __init__(self, tmp: Path, stop_at: str | None = None) -> None:
        self.report = report(tmp)
        self.local = host_audit(tmp, "local", SMALL_RMEM)
        self.stop_at = stop_at
        self.release = threading.Event()

    def services(self) -> Services:
        return Services(run_check=self.run_check, audit=lambda _ctx: self.local)

    def run_check(
        self,
        req: CheckRequest,
        ctx: Context,
        on_event: EventFn | None,
        cancel: threading.Event | None,
    ) -> Report:
        emit = on_event or (lambda _e: None)
        r = self.report
        emit(Event("audit", "local audit done", local=r.host))
        emit(Event("peer", "peer audit done", peer=r.peer))
        emit(Event("probe", "measuring RTT and bottleneck capacity"))
        emit(Event("probe", "path measured", path=r.path))
        if self.stop_at == "probe":
            return self._hold(cancel)
        emit(Event("transfer", "test transfers"))
        assert r.transfer is not None
        for m in r.transfer.modes:
            emit(Event("transfer", m.mode, transfer=_progress(m, "start", 0.0, None)))
            for s in m.samples:
                emit(Event("transfer", m.mode, transfer=_progress(m, "sample", s.t_s, s)))
                if self.stop_at == "transfer" and m.mode == "autotune" and s.t_s >= 3:
                    return self._hold(cancel)
            emit(Event("transfer", m.mode, transfer=_progress(m, "done", m.seconds, None, m)))
        emit(Event("diagnose", "naming the limiting factor"))
        emit(Event("done", r.verdict.limiting_factor))
        return r

    def _hold(self, cancel: threading.Event | None) -> Report:
        """Stay 'running' until cancelled (or released by the test)."""
        while not self.release.wait(0.02):
            if cancel is not None and cancel.is_set():
                raise Cancelled("cancelled")
        raise Cancelled("cancelled")


def _progress(
    m: ModeResult,
    phase: str,
    t: float,
    s: TransferSample | None,
    result: ModeResult | None = None,
) -> Progress:
    return Progress(
        m.mode,
        m.direction,
        phase,  # type: ignore[arg-type]
        t,
        int((s.goodput_mbps if s else 0) * 1e6 / 8 * t),
        s.goodput_mbps if s else 0.0,
        5.0,
        None,
        result,
    )
