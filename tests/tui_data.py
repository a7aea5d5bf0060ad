"""Fixed, constructed data for the TUI's snapshot tests: a mistuned receiver on a 100 Mbit/s
× 50 ms path, a peer, per-interval samples for three modes, and a verdict with fixes; on
request the path's four hops and the transfers' time-sequence graphs. A fake `run_check`
replays it as pipeline Events, so snapshots go through the same code paths as a live run
without any measurement."""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path

from tcpwizard.advice.model import Verdict, WizardGap
from tcpwizard.advice.path_advice import path_advice
from tcpwizard.context import Context
from tcpwizard.exitcodes import ExitCode
from tcpwizard.measure.farends.interface import Progress
from tcpwizard.measure.model import (
    CapacityEstimate,
    Mode,
    ModeResult,
    PathEstimate,
    TcpInfoSample,
    TransferResult,
    TransferSample,
)
from tcpwizard.measure.observe.hostload import CoreLoad, HostDrops, HostLoad
from tcpwizard.measure.observe.tsg import TsgSeries
from tcpwizard.measure.observe.tsg_transfers import TransferCapture, TransferFlows
from tcpwizard.measure.probes.hop_model import PathHops
from tcpwizard.report import Report, TargetInfo
from tcpwizard.run import Cancelled, CheckRequest, Event, EventFn, with_hops
from tcpwizard.tui import Services
from tests.model_builders import far_path, host_audit
from tests.path_data import hop, icmp_hops, mtu_drop_at_hop_2

SMALL_RMEM = {
    "kernel.hostname": "laptop",
    "net.core.rmem_max": "212992",
    "net.ipv4.tcp_rmem": "4096\t131072\t1048576",
    "net.core.default_qdisc": "fq_codel",
}


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
    return dataclasses.replace(
        ModeResult(
            mode, "up", 1, int(tput * 1e6 / 8 * 5), 5.0, tput, buf, 0, samples, 0.9, 0.0, 1.0, "bbr"
        ),
        sender_load=host_load(0.31, 0.12, HostDrops()),
        receiver_load=host_load(0.22, 0.08, HostDrops(time_squeeze=3, interface="eth0")),
    )


def host_load(busy: float, process: float, drops: HostDrops) -> HostLoad:
    """One end's load over a 5 s transfer: two cores, a modest share of one."""
    cores = (CoreLoad(0, busy / 2, busy / 4, busy / 4, busy), CoreLoad(1, 0.02, 0.01, 0.0, 0.03))
    return HostLoad(5.0, cores, process, process, 0.0, drops)


MODES: tuple[Mode, ...] = ("untuned", "autotune", "drs")


def path_estimate() -> PathEstimate:
    return far_path(CapacityEstimate(100.1, "capprobe-pairs+train", 0.9, 100.4, 99.8), peer=True)


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


def four_hops(blackhole: bool = False) -> PathHops:
    """The hops to dtn1.example: hop 1 limits the ICMP it sends, the RTT jumps at hop 2
    (onto the long-haul link), 3 % loss from hop 3 on, and the MTU drops from this host's
    9000 to 1500 after hop 2 (with `blackhole`, silently)."""

    counted = [
        hop(1, 0.4, 240, "192.0.2.1"),
        hop(2, 48.1, 300, "203.0.113.9"),
        hop(3, 48.9, 291, "203.0.113.77"),
        hop(4, 50.1, 291, "198.51.100.7", dest=True),
    ]
    mtu = mtu_drop_at_hop_2("203.0.113.9", 5, 40 if blackhole else None)
    names = {"203.0.113.9": "wan-core.example.net"}
    return icmp_hops("dtn1.example", "198.51.100.7", counted, names, mtu, 1200, 4.1)


MSS = 1448
RTT_S = 0.05


def _flow(
    data: list[tuple[float, int, int]],
    acks: list[tuple[float, int]],
    window: list[tuple[float, int]],
    retransmits: list[tuple[float, int, int]],
) -> TsgSeries:
    return TsgSeries(
        flow="192.0.2.10:40000 > 198.51.100.7:5301",
        src="192.0.2.10",
        dst="198.51.100.7",
        t0=0.0,
        data=tuple(data),
        retransmits=tuple(retransmits),
        acks=tuple(acks),
        window=tuple(window),
        bytes=sum(end - start for _t, start, end in data),
        duration_s=data[-1][0],
        window_scale=7,
    )


def pressed_flow(window: int = 64 * 1024, rounds: int = 12) -> TsgSeries:
    """A sender pressed against a small receive window: every RTT it fills the window up to
    its right edge and waits for the ACK to move it; one segment is sent again."""
    data: list[tuple[float, int, int]] = []
    acks: list[tuple[float, int]] = []
    edges: list[tuple[float, int]] = []
    retransmits: list[tuple[float, int, int]] = []
    sent = acked = 0
    for k in range(rounds):
        t = k * RTT_S
        i = 0
        while sent + MSS <= acked + window:
            data.append((t + i * 0.0005, sent, sent + MSS))
            sent += MSS
            i += 1
        if k == rounds // 2:
            again = (t + 0.02, acked, acked + MSS)
            data.append(again)
            retransmits.append(again)
        acked = sent
        acks.append((t + RTT_S, acked))
        edges.append((t + RTT_S, acked + window))
    return _flow(data, acks, edges, retransmits)


def ramp_flow(rounds: int = 8) -> TsgSeries:
    """Slow start far below an open window: the congestion window doubles every RTT."""
    data: list[tuple[float, int, int]] = []
    acks: list[tuple[float, int]] = []
    edges: list[tuple[float, int]] = []
    sent = 0
    for k in range(rounds):
        for i in range(10 * 2**k):
            data.append((k * RTT_S + i * 0.00005, sent, sent + MSS))
            sent += MSS
        acks.append(((k + 1) * RTT_S, sent))
        edges.append(((k + 1) * RTT_S, sent + (4 << 20)))
    return _flow(data, acks, edges, [])


def transfer_capture() -> TransferCapture:
    """untuned pressed against its 64 KB window, autotune in slow start, drs not captured."""
    return TransferCapture(
        (
            TransferFlows("untuned", "up", (pressed_flow(),)),
            TransferFlows("autotune", "up", (ramp_flow(),)),
            TransferFlows("drs", "up", ()),
        )
    )


class FakePipeline:
    """Services for the app that replay `report` as Events; `stop_at` ends the run early
    with the app showing a running stage (for a snapshot of a run in progress). `hops` and
    `capture` add what `tui --hops` and `tui --capture` would."""

    def __init__(
        self,
        tmp: Path,
        stop_at: str | None = None,
        *,
        hops: PathHops | None = None,
        capture: TransferCapture | None = None,
    ) -> None:
        r = dataclasses.replace(report(tmp), capture=capture)
        self.report = with_hops(r, hops, path_advice(hops)) if hops is not None else r
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
