"""A device between the hosts that rewrites the TCP options of the handshake: what each
end sent against what the other received (docs/middlebox.md).

The near end knows what its SYN carried (its own sysctls, the MSS it advertised) and what
the handshake agreed (TCP_INFO); a far end that runs serve reports the options of our SYN
as it arrived (TCP_SAVED_SYN), and its audit says what it answers with. An option this
host sent that did not arrive was taken out on the way there; one the far end must have
answered with (its setting on, the option in the SYN it got) that the handshake lacks was
taken out of its SYN-ACK on the way back. Neither is a host's setting: the fix is the
device's.
"""

from __future__ import annotations

from dataclasses import dataclass

from tcpwizard.checks.model import Fix, HostAudit
from tcpwizard.measure.handshake import HandshakeFacts
from tcpwizard.measure.synopts import SynOptions

UP = "local->peer"  # in this host's SYN, on the way to the far end
DOWN = "peer->local"  # in the far end's SYN-ACK, on the way back

OPTIONS = ("window scaling", "SACK", "timestamps", "MSS")
SYSCTL = {
    "window scaling": "net.ipv4.tcp_window_scaling",
    "SACK": "net.ipv4.tcp_sack",
    "timestamps": "net.ipv4.tcp_timestamps",
}


@dataclass(frozen=True)
class Tampering:
    """One option a device on the path changed, one way."""

    option: str  # one of OPTIONS
    direction: str  # UP or DOWN
    sent: str  # what the sending end put in, in words
    received: str  # what arrived

    @property
    def text(self) -> str:
        way = (
            "this host's SYN, on the way to the far end"
            if self.direction == UP
            else "the far end's SYN-ACK, on the way back"
        )
        verb = "clamped" if self.option == "MSS" else "stripped"
        return f"{self.option} {verb} from {way} (sent {self.sent}, arrived {self.received})"


def _on(audit: HostAudit | None, option: str) -> bool | None:
    """That host's setting for the option; None when unknown (no audit)."""
    if audit is None:
        return None
    raw = audit.sysctl(SYSCTL[option])
    return None if raw is None else raw.strip() != "0"


def _offered(hs: HandshakeFacts, option: str) -> bool:
    return {
        "window scaling": hs.local_scaling_offered,
        "SACK": hs.local_sack_offered,
        "timestamps": hs.local_timestamps_offered,
    }[option]


def _arrived(syn: SynOptions, option: str) -> bool:
    return {
        "window scaling": syn.wscale is not None,
        "SACK": syn.sack_permitted,
        "timestamps": syn.timestamps,
    }[option]


def _agreed(hs: HandshakeFacts, option: str) -> bool:
    return {
        "window scaling": hs.window_scaling,
        "SACK": hs.sack,
        "timestamps": hs.timestamps,
    }[option]


def syn_tampering(hs: HandshakeFacts | None, peer: HostAudit | None) -> tuple[Tampering, ...]:
    """Every option the path changed, as far as the evidence shows: nothing without the far
    end's report of the SYN it received (then one vantage point cannot tell a stripped
    option from the far end's setting)."""
    syn = hs.received_syn if hs is not None else None
    if hs is None or syn is None:
        return ()
    out: list[Tampering] = []
    for option in OPTIONS[:3]:
        if _offered(hs, option) and not _arrived(syn, option):
            out.append(Tampering(option, UP, "on", "absent"))
        elif _arrived(syn, option) and _on(peer, option) and not _agreed(hs, option):
            # RFC 7323/2018: an end that received the option and has it on answers with it.
            out.append(Tampering(option, DOWN, "on", "absent"))
    if hs.local_mss and syn.mss is not None and syn.mss < hs.local_mss:
        out.append(Tampering("MSS", UP, str(hs.local_mss), str(syn.mss)))
    return tuple(out)


def device_fix(found: tuple[Tampering, ...]) -> Fix:
    """What to ask the operator of the firewall or load balancer between the hosts."""
    stripped = sorted({t.option for t in found if t.option != "MSS"})
    clamp = next((t for t in found if t.option == "MSS"), None)
    asks: list[str] = []
    if stripped:
        asks.append(
            f"stop removing TCP options ({', '.join(stripped)}) from SYN and SYN-ACK "
            "packets (TCP normalization / option scrubbing, e.g. Cisco ASA `tcp-options`, "
            "a load balancer's TCP profile)"
        )
    if clamp is not None:
        asks.append(
            f"raise the MSS clamp ({clamp.received} bytes) to the path's MTU less 40 bytes "
            f"(this host sent {clamp.sent})"
        )
    command = (
        "ask the operator of the firewall/load balancer between the hosts to " + "; and ".join(asks)
    )
    return Fix(
        id="middlebox",
        kind="other",
        host="path",
        key="tcp-options",
        value="unchanged",
        command=command,
        why=(
            "A device on the path rewrites the TCP handshake; no setting on either host "
            "brings back what it removes."
        ),
        guideline="RFC 7323 (window scaling), RFC 2018 (SACK), RFC 879/6691 (MSS)",
        answers=("middlebox",),
    )


def window_scaling_stripped(hs: HandshakeFacts | None, peer: HostAudit | None) -> bool:
    """The path, not a host, kept window scaling out of the handshake."""
    return any(t.option == "window scaling" for t in syn_tampering(hs, peer))


def one_vantage_note(local_offered: bool, agreed: bool, option: str) -> str | None:
    """For a view from one host (a connection, a capture): an option this host offered
    that the handshake lacks may be the far end's setting or a device that strips it."""
    if not local_offered or agreed:
        return None
    return (
        f"{option} was not agreed although this host offers it: the far end has it off or a "
        "device on the path strips it; from one host that cannot be told apart (`check` "
        "against `tcpwizard serve` compares the SYN as sent and as received)"
    )
