"""Only an open TCP port (SSH, a web server) as the far end: its handshake and the
connect-time RTT; no transfer, so the verdict is a prediction. The last resort of the
registry, and what a vanished iperf3 server falls back to."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tcpwizard.checks.facts import HostFacts
from tcpwizard.measure.farends.common import NO_AVAILABLE, NO_IDLE_ECHO, port_probe
from tcpwizard.measure.farends.interface import (
    NO_HOOKS,
    Abilities,
    FarEndKind,
    TransferHooks,
    TransferOptions,
)
from tcpwizard.measure.model import Direction, IdleLoss, PathEstimate, TransferResult
from tcpwizard.measure.observe.handshake import HandshakeFacts, handshake_with
from tcpwizard.measure.probes.probe import Progress as ProbeProgress
from tcpwizard.measure.wire.protocol import PeerUnavailable

if TYPE_CHECKING:
    from tcpwizard.measure.probes.availbw import AvailBandwidth


class PortFar:
    """Only an open TCP port (SSH, a web server): its handshake and connect-time RTT."""

    kind: FarEndKind = "tcp-port"
    abilities = Abilities(False, False, (), (), False)

    def __init__(self, address: str, port: int | None, host: str, sysctl_root: str) -> None:
        self.address, self.port, self.host = address, port, host
        self._handshake = (
            handshake_with(address, port, sysctl_root=sysctl_root) if port is not None else None
        )

    def describe(self) -> str:
        if self.port is None:
            return "nothing that takes part in a test (no serve, no iperf3)"
        state = "open" if self._handshake else "not answering"
        return f"TCP port {self.port} ({state}); no serve, no iperf3"

    def facts(self) -> tuple[HostFacts | None, str | None]:
        return None, None

    def close(self) -> None:
        """Nothing stays open between its stages."""

    def available(
        self,
        capacity_bps: float,
        rtt_s: float,
        random_loss: float = 0.0,
        direction: Direction = "up",
    ) -> AvailBandwidth:
        raise PeerUnavailable(NO_AVAILABLE)

    def idle_echo(self, count: int) -> IdleLoss:
        raise PeerUnavailable(NO_IDLE_ECHO)

    def handshake(self) -> HandshakeFacts | None:
        return self._handshake

    def probe(self, budget_s: float, progress: ProbeProgress | None = None) -> PathEstimate:
        return port_probe(self.address, self.port, budget_s, progress)

    def transfer(self, options: TransferOptions, hooks: TransferHooks = NO_HOOKS) -> TransferResult:
        raise PeerUnavailable("no test transfer: the far end runs neither serve nor iperf3")

    def silent(self) -> str | None:
        """Only a kernel answers here: no process of its own to judge."""
        return None

    def missing(self) -> tuple[str, ...]:
        return (
            "no test transfer: the far end runs neither tcpwizard serve nor iperf3",
            "the far end's settings",
        )
