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

from tcpwizard.advice.model import Verdict, WizardGap
from tcpwizard.advice.window_law import UNSCALED_WINDOW, WINDOW_FULL_ROUNDS
from tcpwizard.checks.model import Fix, HostAudit
from tcpwizard.measure.observe.capture import FlowDirection
from tcpwizard.measure.observe.handshake import HandshakeFacts
from tcpwizard.measure.observe.synopts import MAX_LINUX_NOPS, SynOptions
from tcpwizard.measure.probes.syntrace_model import SynTrace, past_last_router

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


def device_hop(trace: SynTrace | None, found: tuple[Tampering, ...]) -> str | None:
    """Where on the path the device is, from the routers' quotes of our SYN (`check
    --hops`, measure/probes/syntrace.py): the first hop that quoted it rewritten, or, when only
    the far end saw the rewrite, past the last router that quoted it intact. None without
    hop probes, for a rewrite of the SYN-ACK only (the probes carry this host's SYN), or
    when no router quoted the options."""
    if trace is None:
        return None
    if trace.finding is not None:
        return trace.finding.text
    if any(t.direction == UP for t in found):
        return past_last_router(trace.hops)
    return None


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


# A capture or a connection, seen from one point of the path --------------------------


def overwritten_in_capture(d: FlowDirection) -> tuple[str, ...]:
    """What the SYNs of a captured flow show of a device that overwrote options: NOP
    padding no TCP stack sends, where an option is missing."""
    out: list[str] = []
    for who, syn in ((d.sender, d.sender_syn), (d.receiver, d.receiver_syn)):
        if syn is None or syn.nops <= MAX_LINUX_NOPS:
            continue
        missing = [
            name
            for name, present in (
                ("window scaling", syn.wscale is not None),
                ("SACK", syn.sack),
                ("timestamps", syn.timestamps),
            )
            if not present
        ]
        out.append(
            f"the SYN of {who} carries {syn.nops} NOPs in a row and no "
            f"{' or '.join(missing) or 'option that they replaced'}: overwritten on the way "
            "(no TCP stack pads with more than two NOPs)"
        )
    return tuple(out)


def capture_verdict(d: FlowDirection, evidence: list[str]) -> tuple[Verdict, Fix] | None:
    """`middlebox` for a captured transfer when its SYNs show overwritten options and what
    was lost holds the transfer: no window scaling and a window full at 64 KB, or no SACK
    with losses. Without the mark one capture point cannot tell a stripped option from
    the other end's setting; then this says nothing and the window rules speak."""
    marks = overwritten_in_capture(d)
    if not marks or d.sender_syn is None or d.receiver_syn is None:
        return None
    window = (
        d.scaling is False
        and d.max_window <= UNSCALED_WINDOW
        and d.window_full_share >= WINDOW_FULL_ROUNDS
    )
    sack = not (d.sender_syn.sack and d.receiver_syn.sack) and d.retransmits > 0
    if not window and not sack:
        return None
    lost = [name for name, hit in (("window scaling", window), ("SACK", sack)) if hit]
    found = tuple(Tampering(name, UP, "on", "absent") for name in lost)
    why = (
        " Without window scaling the receive window stops at 64 KB whatever either host's "
        "buffers are."
        if window
        else " Without SACK every lost segment costs a round trip of recovery."
    )
    verdict = Verdict(
        "middlebox",
        0.85,
        "path",
        f"a device between {d.sender} and {d.receiver} (a firewall or load balancer) "
        f"overwrote {' and '.join(lost)} in the handshake.{why} Ask its operator to leave "
        "TCP options alone.",
        (*evidence, *marks),
        WizardGap(d.steady_mbps or d.rate_mbps, None, False),
    )
    return verdict, device_fix(found)


def one_point_note() -> str:
    """What a view from one host cannot tell, said in the verdict instead of a guess."""
    return (
        " From one capture point or one host a missing option cannot be told apart from the "
        "other end's setting: it has the option off, or a device on the path strips it "
        "(`check` against `tcpwizard serve` compares the SYN as sent and as received)."
    )


def located_in_conn(verdict: Verdict, trace: SynTrace) -> tuple[Verdict, tuple[Fix, ...]] | None:
    """`conns --hops`: a connection whose handshake agreed no window scaling while this host
    offers it (the `window-scaling` verdict at the peer), and the routers' quotes of this
    host's SYN, sent hop by hop to the same peer and port, show a device on the path taking
    the option out: that device, not the far end's setting, is the cause. None when the
    trace shows no such rewrite (the far end may still have the option off)."""
    found = trace.finding
    if verdict.limiting_factor != "window-scaling" or found is None:
        return None
    if not any("window scaling" in x for x in (*found.removed, *found.changed)):
        return None
    tampering = Tampering("window scaling", UP, f"wscale {trace.sent.wscale}", "none")
    return (
        Verdict(
            "middlebox",
            # As `check`'s rule when a rewrite is seen and costs the transfer (the window
            # held at 64 KB is why this connection read `window-scaling`), below its 0.97
            # for a rate measured at that ceiling: `conns` sees no probe of the path.
            0.9,
            "path",
            "a device between the hosts (a firewall or load balancer) takes window scaling "
            f"out of this host's SYN {found.where}: the window stops at 64 KB whatever either "
            "host's buffers are. Ask its operator to leave TCP options alone.",
            (*verdict.evidence, found.text),
            verdict.wizard_gap,
        ),
        (device_fix((tampering,)),),
    )
