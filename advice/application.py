"""An application that holds the rate, seen from a live connection (`conns`) or a capture
(`check --pcap`): a sender that does not write, and an application with a window of its own
(SSH's channel window, HTTP/2 flow control, a tunnel) that caps the data in flight below
what TCP would allow. A reader that does not read is judged by the callers' own rules (the
window closes to zero); here it only gets the process's name.

The kernel's evidence for a sender that does not write is tcpi_delivery_rate_app_limited:
Linux marks a delivery-rate sample app-limited when the sender had nothing queued while
the congestion window had room (tcp_rate_check_app_limited), so a bulk sender held by
cwnd, the peer's window or its send buffer is not marked. TCP busy time alone cannot tell:
an application window keeps data in flight all the time, so busy reads 100 %.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from tcpwizard.advice.model import Verdict
from tcpwizard.advice.window_law import window_limit_mbps
from tcpwizard.checks.model import Fix, HostRole
from tcpwizard.measure.observe.capture import FlowDirection
from tcpwizard.measure.observe.conns import ConnObservation
from tcpwizard.units import format_bytes

if TYPE_CHECKING:
    from tcpwizard.advice.capture import CaptureDiagnosis
    from tcpwizard.advice.conns import ConnDiagnosis

SSH_PROGRAMS = ("ssh", "sshd", "scp", "sftp", "sftp-server")  # rsync -e ssh: ssh owns the socket
SSH_PORT = 22  # IANA's, and OpenSSH's default
SSH_CHANNEL_WINDOW = 2 * 1024 * 1024  # OpenSSH's channel window (CHAN_SES_WINDOW_DEFAULT)
# Most samples app-limited: the flag describes the latest delivery-rate sample only, so
# one marked sample is a moment (slow start, the end of a write); a majority is the interval.
APP_LIMITED_MAJORITY = 0.5
# An application window W is re-granted once half of it is consumed (OpenSSH's
# channel_check_window; HTTP/2 stacks use the same half-window rule), so a sender held by it
# keeps between W/2 and W in flight: the lowest sample at least half the highest is a ceiling.
PINNED_LOW = 0.5
# Data in flight against the smallest window the peer offered. A flow held by the peer's
# window keeps nearly all of it in flight; one held by an application window W reading at
# W per RTT gets a window of at least 2W from Linux's receive autotuning
# (tcp_rcv_space_adjust offers twice what the reader took in the last RTT), a ratio of at
# most 1/2. Three quarters lies between the two. cwnd needs no test: the app-limited flag is
# only set while cwnd had room.
TCP_ROOM = 0.75
# Seen from the receiver, rate x RTT of a flow held by a window W lies between W/2 and W
# (above); 15 % more for the error of the receiver's RTT estimate.
WINDOW_BAND = (PINNED_LOW, 1.15)
# Seen from the receiver: unread bytes (Recv-Q) in the median sample reaching half the
# largest window offered. A reader that keeps up takes each segment as it arrives (Recv-Q
# near zero at most instants; the median ignores the odd sample where it was descheduled),
# also when a small buffer holds the window down; Linux offers about the buffer's free
# space, so unread data of half the window is a buffer the application leaves full.
UNREAD_SHARE = 0.5
GUIDE = "HPN-SSH (PSC); ESnet fasterdata, 'Say no to scp'; RFC 9113 section 5.2 (flow control)"


def is_ssh(program: str | None) -> bool:
    return (program or "").lower() in SSH_PROGRAMS


def _over_ssh(program: str | None) -> str:
    return "an SSH session" if program in ("ssh", "sshd") else f"{program} runs over SSH"


def _who(program: str | None, pid: int | None) -> str:
    if not program:
        return "the application"
    return f"{program} (pid {pid})" if pid else program


def ssh_fix(program: str | None, host: HostRole = "both") -> Fix:
    """What an SSH transfer offers beyond the 2 MB channel window (no sysctl raises it)."""
    sftp = (program or "").lower() in ("sftp", "sftp-server")
    extra = (
        "; sftp -R 256 -B 262144 raises sftp's own request pipeline (64 x 32 KB by default), "
        "which with stock OpenSSH still stops at the channel window"
        if sftp
        else ""
    )
    return Fix(
        id="ssh-channel-window",
        kind="other",
        host=host,
        key="ssh:channel-window",
        value="",
        command="use HPN-SSH on both ends (a channel window that follows TCP's), or N parallel "
        "sessions (each gets its own 2 MB per round trip), or move bulk data with a tool that "
        "tunes its window (rsync daemon, bbcp, GridFTP, HTTP) with the tcp_rmem/tcp_wmem "
        f"fixes{extra}",
        why="OpenSSH's fixed channel window, not TCP, bounds the rate on a long path",
        guideline=GUIDE,
        answers=("application",),
    )


def window_fix(program: str | None, ceiling: int, host: HostRole) -> Fix:
    return Fix(
        id="application-window",
        kind="other",
        host=host,
        key="application:window",
        value=str(ceiling),
        command=f"raise {program or 'the application'}'s own window or rate limit above the "
        "path's bandwidth-delay product (HTTP/2: SETTINGS_INITIAL_WINDOW_SIZE and the "
        "connection window; a tunnel: its window or buffer option), or run parallel sessions",
        why="the application lets no more than this much be in flight, whatever TCP allows",
        guideline=GUIDE,
        answers=("application",),
    )


# ---------------------------------------------------------------------------- conns


def tcp_allows(obs: ConnObservation) -> int:
    """Bytes the peer's TCP window let be in flight at worst during the interval."""
    return obs.snd_wnd_min or obs.snd_cwnd * (obs.snd_mss or 1448)


def app_limited_evidence(obs: ConnObservation) -> str:
    seg = obs.snd_mss or 1448
    return (
        f"app-limited in {obs.app_limited or 0:.0%} of {obs.samples} samples "
        f"(tcpi_delivery_rate_app_limited); in flight {format_bytes(obs.inflight_min)}-"
        f"{format_bytes(obs.inflight_max)} ({obs.inflight_min // seg}-{obs.inflight_max // seg} "
        f"segments) against the peer's window of {format_bytes(tcp_allows(obs))} or more"
    )


def _sender(
    diag: ConnDiagnosis, obs: ConnObservation, program: str | None, pid: int | None
) -> tuple[Verdict, tuple[Fix, ...]] | None:
    v = diag.verdict
    assert v is not None
    if v.limiting_factor not in ("path-capacity", "application") or v.host_to_fix == "peer":
        return None  # a window, a buffer or loss held it: TCP, not the application
    if obs.app_limited is None or obs.app_limited < APP_LIMITED_MAJORITY:
        return None
    allows, top = tcp_allows(obs), obs.inflight_max
    if top <= 0 or top > TCP_ROOM * allows:
        return None
    rtt = obs.min_rtt_ms or obs.rtt_ms
    who = _who(program, pid)
    # The path-capacity reading ("cwnd-limited at the rate the path delivers") is what the
    # app-limited flag refutes: it does not stay in the evidence.
    ev = [*(e for e in v.evidence if "cwnd-limited" not in e), app_limited_evidence(obs)]
    if obs.inflight_min >= PINNED_LOW * top:
        cap = window_limit_mbps(top, rtt) if rtt > 0 else 0.0
        ev.append(
            f"in flight pinned at a ceiling of {format_bytes(top)}: {format_bytes(top)} / "
            f"{rtt:.1f} ms = {cap:.1f} Mbit/s, the rate it moved"
        )
        ssh = is_ssh(program)
        if ssh:
            ssh_cap = window_limit_mbps(SSH_CHANNEL_WINDOW, rtt) if rtt > 0 else 0.0
            ev.append(
                f"{_over_ssh(program)}: OpenSSH's channel window of 2 MB caps one session at "
                f"~{ssh_cap:.0f} Mbit/s at {rtt:.1f} ms, whatever the TCP buffers allow"
            )
        host: HostRole = "both" if ssh else "local"
        verdict = dataclasses.replace(
            v,
            limiting_factor="application",
            confidence=0.8,
            host_to_fix=host,
            explanation=f"{who} keeps at most {format_bytes(top)} in flight, far below what TCP "
            f"allows ({format_bytes(allows)}): a window of its own"
            + (" (SSH's channel window, granted by the receiving end)" if ssh else "")
            + " sets the rate, not a buffer or the path",
            evidence=tuple(ev),
        )
        fix = ssh_fix(program) if ssh else window_fix(program, top, "local")
        return verdict, (fix,)
    verdict = dataclasses.replace(
        v,
        limiting_factor="application",
        confidence=0.7,
        host_to_fix="local",
        explanation=f"{who} does not write fast enough: the kernel found nothing to send with "
        "room in the congestion window most of the time (look at its disk, CPU or its own "
        "rate limit)",
        evidence=tuple(ev),
    )
    return verdict, ()


def _ssh_receiver(
    obs: ConnObservation, v: Verdict, program: str | None, pid: int | None
) -> tuple[Verdict, tuple[Fix, ...]] | None:
    """An SSH receiver whose rate x RTT is the channel window: the window it grants, not its
    TCP window (offered far wider) or its reading, holds the sender."""
    rtt = obs.min_rtt_ms or obs.rcv_rtt_ms
    if v.limiting_factor != "path-capacity" or rtt <= 0:
        return None
    per_rtt = obs.recv_mbps * 1e6 / 8 * rtt / 1e3
    lo, hi = WINDOW_BAND
    if not lo * SSH_CHANNEL_WINDOW <= per_rtt <= hi * SSH_CHANNEL_WINDOW:
        return None
    if obs.rcv_wnd_min and per_rtt > TCP_ROOM * obs.rcv_wnd_min:
        return None  # our TCP window is about as small: that would be receiver-window
    cap = window_limit_mbps(SSH_CHANNEL_WINDOW, rtt)
    ev = [
        *v.evidence,
        f"{format_bytes(int(per_rtt))} arrived per round trip ({obs.recv_mbps:.1f} Mbit/s x "
        f"{rtt:.1f} ms), about OpenSSH's channel window of 2 MB (~{cap:.0f} Mbit/s at this RTT)",
    ]
    verdict = dataclasses.replace(
        v,
        limiting_factor="application",
        confidence=0.65,
        host_to_fix="both",
        explanation=f"{_who(program, pid)} grants the sender one SSH channel window (2 MB) per "
        "round trip: that window, not TCP's, sets the rate",
        evidence=tuple(ev),
    )
    return verdict, (ssh_fix(program),)


def _slow_reader(
    obs: ConnObservation, v: Verdict, program: str | None, pid: int | None
) -> tuple[Verdict, tuple[Fix, ...]] | None:
    """This host receives and its application leaves the data unread (the caller's rules
    want the buffer's size, which the kernel does not always report)."""
    if v.limiting_factor not in ("path-capacity", "receiver-window") or v.host_to_fix == "peer":
        return None
    if not obs.rcv_wnd_max or obs.rqueue_p50 < UNREAD_SHARE * obs.rcv_wnd_max:
        return None
    ev = [
        *v.evidence,
        f"{format_bytes(obs.rqueue_p50)} (median), up to {format_bytes(obs.rqueue_max)} "
        "received and not yet read (Recv-Q), against a "
        f"window offered of {format_bytes(obs.rcv_wnd_min)}-{format_bytes(obs.rcv_wnd_max)}",
        f"the reader took {format_bytes(obs.rcv_space)} per round trip as autotuning measured "
        "it (tcpi_rcv_space): the buffer is not grown for a reader that does not read",
    ]
    verdict = dataclasses.replace(
        v,
        limiting_factor="application",
        confidence=0.7,
        host_to_fix="local",
        explanation=f"{_who(program, pid)} here does not read fast enough: its unread data fills "
        "the receive buffer and the window it offers closes (a larger buffer would only hold "
        "more unread data)",
        evidence=tuple(ev),
    )
    return verdict, ()


def _peer_reader(obs: ConnObservation, v: Verdict) -> Verdict:
    """The far end's reader, seen from this sender: how often its window was zero."""
    if v.limiting_factor != "application" or v.host_to_fix != "peer" or not obs.sending:
        return v
    note = (
        f"the peer's window was zero in {obs.zero_window_samples} of {obs.samples} samples "
        f"and {format_bytes(obs.snd_wnd_min)}-{format_bytes(obs.snd_wnd_max)} in all; "
        "`tcpwizard conns` on the far end names the process that does not read"
    )
    return dataclasses.replace(v, evidence=(*v.evidence, note))


def _name_reader(v: Verdict, program: str | None, pid: int | None) -> Verdict:
    if v.limiting_factor != "application" or v.host_to_fix != "local" or not program:
        return v
    return dataclasses.replace(v, explanation=f"{_who(program, pid)}: {v.explanation}")


def refine_conn(
    diag: ConnDiagnosis, obs: ConnObservation, program: str | None, pid: int | None = None
) -> ConnDiagnosis:
    """The verdict of `conns` with the application's part: app-limited senders, windows of
    their own, and the process named where it is this host's."""
    v = diag.verdict
    if v is None:
        return diag
    found = (
        _sender(diag, obs, program, pid)
        if obs.sending
        else (_ssh_receiver(obs, v, program, pid) if is_ssh(program) else None)
        or _slow_reader(obs, v, program, pid)
    )
    if found is not None:
        return dataclasses.replace(diag, verdict=found[0], fixes=found[1])
    if is_ssh(program) and v.limiting_factor == "application" and v.host_to_fix == "local":
        # An SSH sender idle much of the time: its channel window is the usual cause.
        rtt = obs.min_rtt_ms or obs.rtt_ms
        cap = window_limit_mbps(SSH_CHANNEL_WINDOW, rtt) if rtt > 0 else 0.0
        note = (
            f"{_over_ssh(program)}: OpenSSH's channel window of 2 MB caps one session at "
            f"~{cap:.0f} Mbit/s at {rtt:.1f} ms, whatever the TCP buffers allow"
        )
        v = dataclasses.replace(v, evidence=(*v.evidence, note))
        diag = dataclasses.replace(diag, fixes=(*diag.fixes, ssh_fix(program)))
    return dataclasses.replace(diag, verdict=_peer_reader(obs, _name_reader(v, program, pid)))


# One line of evidence, and a prediction (the window has not closed yet): the middle of the
# rules' one-line band, 0.45-0.6 (advice/calibration.py TWO_LINES).
FALLING_BEHIND = 0.55


def reader_falling_behind(obs: ConnObservation) -> str | None:
    """The peer's window shrank to at most half of what it offered at the start of the
    interval: Linux offers about its buffer's free space, so half the buffer or more now
    holds data its reader has not taken (UNREAD_SHARE, the same line seen from the
    receiver). Not yet the limit, while the window stays wider than the data in flight; it
    becomes it once the window closes."""
    first, last = obs.snd_wnd_first, obs.snd_wnd_last
    if first <= 0 or last > UNREAD_SHARE * first or last < obs.inflight_max:
        return None
    return (
        f"the peer's window shrank from {format_bytes(first)} to {format_bytes(last)} in "
        f"{obs.seconds:.1f} s while {format_bytes(obs.inflight_max)} at most was in flight: "
        "its buffer is filling with data its reader has not taken"
    )


# ---------------------------------------------------------------------------- captures


def _ssh_flow(d: FlowDirection) -> bool:
    return SSH_PORT in (d.sender_port, d.receiver_port)


# A receiver held by its buffer's size with a reader that keeps up offers the whole buffer
# each time (the median window offered near its largest); one whose reader leaves data
# unread offers only the part it has freed. At most half the largest is a buffer that is
# there but full: the reader, not the buffer's size.
OFFERED_SHARE = 0.5
ZEROED_SHARE = 0.75  # halfway between a fixed buffer's 1 and a reader's 1/2


def _capture_reader(diag: CaptureDiagnosis) -> CaptureDiagnosis:
    d, v = diag.direction, diag.verdict
    ev = (
        *v.evidence,
        f"the window offered sat at {format_bytes(d.window_p50)} (median) though the receiver "
        f"had offered up to {format_bytes(d.max_window)}: its buffer is there, full of data "
        f"its application has not read; zero window {d.zero_windows} times",
    )
    verdict = dataclasses.replace(
        v,
        limiting_factor="application",
        confidence=0.65,
        host_to_fix=diag.receiver_role,
        explanation=f"the receiving application ({d.receiver}:{d.receiver_port}) does not "
        "read fast enough: the window it offers shrinks to what it has read, far below the "
        "buffer it has (a larger buffer would not help)",
        evidence=ev,
    )
    return dataclasses.replace(diag, verdict=verdict, fixes=())


def refine_capture(diag: CaptureDiagnosis) -> CaptureDiagnosis:
    """A captured SSH flow (port 22) whose data in flight stays at a ceiling far below the
    window offered, with no queue and no ongoing loss: SSH's channel window, not the
    sender's buffer. A zero-window reader gets its port named."""
    d, v = diag.direction, diag.verdict
    if v.limiting_factor == "application" and v.host_to_fix == diag.receiver_role:
        where = f" (the process reading {d.receiver}:{d.receiver_port})"
        ev = (
            *v.evidence,
            f"the receiver advertised a zero window {d.zero_windows} times; the sender waited "
            f"{d.zero_window_s:.2f} s of {d.seconds:.1f} s for its window updates",
        )
        return dataclasses.replace(
            diag, verdict=dataclasses.replace(v, explanation=v.explanation + where, evidence=ev)
        )
    ratio = d.window_p50 / d.max_window if d.max_window > 0 else 1.0
    shrunk = ratio <= OFFERED_SHARE
    # A zero window is unread data filling the whole buffer. A fixed buffer read at once
    # offers its whole size every time (a median near its largest), so one zero window there
    # is a reader descheduled for a moment; with the median below ZEROED_SHARE of the largest
    # as well, the reader is behind. With a zero window, a shrunk window is the reader
    # whatever else the judge saw (a capture taken at the receiver sees no RTT to speak of).
    zeroed = d.zero_windows > 0 and ratio <= ZEROED_SHARE
    if (v.limiting_factor == "receiver-window" and (shrunk or zeroed)) or (
        shrunk and d.zero_windows > 0
    ):
        return _capture_reader(diag)
    if not _ssh_flow(d) or v.limiting_factor not in ("sender-buffer", "path-capacity"):
        return diag
    top, window = d.inflight_max, d.window_p50 or d.max_window
    if top <= 0 or d.inflight_p50 < PINNED_LOW * top or top > TCP_ROOM * window:
        return diag
    rtt = d.rtt_min_ms or 0.0
    cap = window_limit_mbps(SSH_CHANNEL_WINDOW, rtt) if rtt else 0.0
    ev = (
        *v.evidence,
        f"an SSH flow (port {SSH_PORT}): in flight median {format_bytes(d.inflight_p50)}, at "
        f"most {format_bytes(top)}, against a window of {format_bytes(window)} offered; "
        f"OpenSSH's channel window of 2 MB caps one session at ~{cap:.0f} Mbit/s at "
        f"{rtt:.1f} ms",
    )
    verdict = dataclasses.replace(
        v,
        limiting_factor="application",
        confidence=0.75,
        host_to_fix="both",
        explanation=f"the SSH session ({d.sender}:{d.sender_port} -> {d.receiver}:"
        f"{d.receiver_port}) keeps at most {format_bytes(top)} in flight, far below the TCP "
        "window offered: SSH's channel window, granted by the receiving end, sets the rate",
        evidence=ev,
    )
    return dataclasses.replace(diag, verdict=verdict, fixes=(ssh_fix(None),))
