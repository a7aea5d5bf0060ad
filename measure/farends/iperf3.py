"""A stock `iperf3 -s` as the far end: measured transfers both ways over iperf3's own
control protocol (measure/farends/iperf3_control.py, measure/farends/iperf3_transfer.py),
its TCP options from the first test's handshake, a peerless probe."""

from __future__ import annotations

from tcpwizard.measure.farends.common import Unaudited
from tcpwizard.measure.farends.interface import (
    NO_HOOKS,
    Abilities,
    FarEndKind,
    TransferHooks,
    TransferOptions,
)
from tcpwizard.measure.farends.iperf3_transfer import IPERF3_MODES, run_iperf3_transfer
from tcpwizard.measure.model import PathEstimate, TransferResult
from tcpwizard.measure.observe.handshake import HandshakeFacts
from tcpwizard.measure.probes.probe import Progress as ProbeProgress
from tcpwizard.measure.probes.probe import probe


class Iperf3Far(Unaudited):
    """A stock `iperf3 -s`. Nothing may connect to its port without speaking iperf3 (a
    silent connection ends a one-off server), so the probe stays peerless (ICMP, SYN
    pairs) and the handshake is read from the first test's control connection."""

    kind: FarEndKind = "iperf3"
    abilities = Abilities(
        False, False, IPERF3_MODES["up"], IPERF3_MODES["down"], False, steady_end=True
    )

    program = "an iperf3 server"

    def __init__(self, address: str, port: int, host: str) -> None:
        self.address, self.port, self.host = address, port, host
        self._handshake: HandshakeFacts | None = None

    def describe(self) -> str:
        return f"iperf3 server at port {self.port}"

    def probe(self, budget_s: float, progress: ProbeProgress | None = None) -> PathEstimate:
        return probe(
            self.address,
            self.port,
            tcp_port=self.port,
            budget_s=budget_s,
            progress=progress,
            serve=False,
            connect_rtt=False,
        )

    def transfer(self, options: TransferOptions, hooks: TransferHooks = NO_HOOKS) -> TransferResult:
        def keep(hs: HandshakeFacts | None) -> None:
            self._handshake = self._handshake or hs

        return run_iperf3_transfer(self.address, self.port, options, hooks, on_handshake=keep)

    def missing(self) -> tuple[str, ...]:
        return (
            "the far end's settings (iperf3 does not report them)",
            "the far end's TCP_INFO for uploads (iperf3 reports only its byte counts)",
            "DRS upload (needs tcpwizard serve's receiver)",
        )
