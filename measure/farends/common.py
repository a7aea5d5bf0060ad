"""What the far ends other than serve share: no settings of their own reported, the
handshake as all that is known of the far host, and the peerless probe toward a port."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tcpwizard.checks.facts import HostFacts
from tcpwizard.measure.model import Direction, IdleLoss, PathEstimate
from tcpwizard.measure.observe.handshake import HandshakeFacts
from tcpwizard.measure.probes.probe import Progress as ProbeProgress
from tcpwizard.measure.probes.probe import probe
from tcpwizard.measure.wire.protocol import PeerUnavailable

if TYPE_CHECKING:
    from tcpwizard.measure.probes.availbw import AvailBandwidth

NO_AVAILABLE = "the available bandwidth needs tcpwizard serve's reflector"
NO_IDLE_ECHO = "more round-trip probes need tcpwizard serve's reflector"


class Unaudited:
    """A far end that takes part in tests but does not report its settings (iperf3, a web
    server): what it agreed to in a handshake is all that is known of it."""

    program: str  # what runs there, for the report
    host: str
    _handshake: HandshakeFacts | None

    def facts(self) -> tuple[HostFacts | None, str | None]:
        return None, (
            f"{self.host} is {self.program}, which does not report its settings: the far "
            "end's sysctls are not audited (only tcpwizard serve reports them)"
        )

    def handshake(self) -> HandshakeFacts | None:
        return self._handshake

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

    def silent(self) -> str | None:
        """A server of another program answers or fails on its own terms: no sign of its
        process's CPU is read from it."""
        return None


def port_probe(
    address: str, port: int | None, budget_s: float, progress: ProbeProgress | None
) -> PathEstimate:
    """The peerless probe of a far end that is only an open TCP port to us (ICMP, SYN
    pairs, connect time toward `port`)."""
    return probe(address, tcp_port=port, budget_s=budget_s, progress=progress, serve=False)
