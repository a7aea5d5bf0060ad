"""The verdict for one live connection, from what its TCP_INFO said over an interval.

The same vocabulary as `check`, read the way a wizard reads `ss -ti`:

* this host sends: the chrono counters say what stalled the sender. Receive-window limited
  with the peer's window closing to zero (or opening far wider than the data in flight) is
  the receiving *application* not reading; with a steady window filled every RTT it is the
  peer's receive buffer (`receiver-window`, fix the peer). Send-buffer limited is
  `sender-buffer` here. A sender that is mostly not busy has nothing to send
  (`application`, here). Busy, with losses at the Mathis bound of a loss-based sender, is
  `congestion`; busy and cwnd-limited at its delivery rate is `path-capacity`.
* this host receives: unread bytes piling up in our queue is our `application`; the window
  we offer filled every RTT is our `receiver-window`; otherwise the sender or the path sets
  the rate (only the sender's TCP_INFO can tell which, so the confidence is low).
The steps are the ladder both judges share (advice/ladder.py) over the connection's
Observation (advice/observation.py from_conn); this module words its verdicts.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

from tcpwizard.advice import application, ladder
from tcpwizard.advice.evidence import CHRONO_SHARE
from tcpwizard.advice.ladder import Finding, Words
from tcpwizard.advice.middlebox import one_point_note
from tcpwizard.advice.model import Verdict
from tcpwizard.advice.observation import Observation, from_conn
from tcpwizard.advice.rules import policer
from tcpwizard.advice.snippets import Option, setsockopt_fix
from tcpwizard.checks.base import sysctl_fix
from tcpwizard.checks.model import BdpTarget, Fix, HostRole
from tcpwizard.checks.window import recommended_buffer
from tcpwizard.measure.observe.conns import ConnObservation
from tcpwizard.units import format_bytes

BUSY_MBPS = 0.1  # below this a connection is idle: nothing to judge
DEFAULT_RATE_BPS = 1e9  # fixes are sized for this rate at the connection's RTT unless told
GUIDE = "Tierney, 'TCP Buffer Tuning'; NDT web100 heuristics (rwnd/sndbuf-limited time)"
Role = str  # "sending" | "receiving" | "idle"


@dataclass(frozen=True)
class ConnDiagnosis:
    role: Role
    verdict: Verdict | None  # None: idle, nothing to judge
    fixes: tuple[Fix, ...] = ()


def _pct(x: float) -> str:
    return f"{x * 100:.0f}%"


def _rtt(obs: ConnObservation) -> float:
    return obs.rtt_ms or obs.min_rtt_ms or obs.rcv_rtt_ms


def _target(obs: ConnObservation, rate_bps: float) -> BdpTarget:
    rtt_ms = obs.min_rtt_ms or _rtt(obs) or 100.0
    return BdpTarget(rtt_ms / 1e3, rate_bps, "measured")


def _triple(sysctls: Mapping[str, str], key: str) -> tuple[int, int, int] | None:
    try:
        lo, mid, hi = (int(x) for x in sysctls.get(key, "").split())
    except ValueError:
        return None
    return lo, mid, hi


def buffer_fix(
    key: str, size: int, host: HostRole, sysctls: Mapping[str, str] | None, why: str
) -> Fix:
    """tcp_rmem/tcp_wmem with the max raised to `size` (this host's min and default kept;
    Linux's defaults for a peer we cannot read)."""
    base = {"net.ipv4.tcp_rmem": "4096 131072", "net.ipv4.tcp_wmem": "4096 16384"}[key]
    current = _triple(sysctls or {}, key)
    if current is not None:
        base = f"{current[0]} {current[1]}"
        size = max(size, current[2])
    fix = sysctl_fix(key.rsplit(".", 1)[1], key, f"{base} {size}", why, GUIDE)
    factor = "receiver-window" if key == "net.ipv4.tcp_rmem" else "sender-buffer"
    return dataclasses.replace(fix, host=host, answers=(factor,))


def bbr_fix(host: HostRole) -> Fix:
    """For a loss-based sender held at the Mathis bound: BBR, which random loss does not
    slow (the live connection's verdict and the capture's give the same fix)."""
    fix = sysctl_fix(
        "tcp_congestion_control",
        "net.ipv4.tcp_congestion_control",
        "bbr",
        "BBR does not treat random loss as congestion (new connections only).",
        "Cardwell et al., BBR (2016)",
    )
    return dataclasses.replace(fix, host=host, answers=("congestion",))


def _common_evidence(obs: ConnObservation) -> list[str]:
    if not obs.sending:
        return [
            f"RTT seen by this receiver {obs.rcv_rtt_ms:.1f} ms (min {obs.min_rtt_ms:.1f}), "
            f"receive buffer {format_bytes(obs.rcvbuf or 0)}, {obs.ooo_packets} segments "
            "out of order"
        ]
    return [
        f"RTT {_rtt(obs):.1f} ms (min {obs.min_rtt_ms:.1f}), cwnd {obs.snd_cwnd} x "
        f"{obs.snd_mss} B, delivery rate {obs.delivery_rate_mbps:.1f} Mbit/s"
    ]


def judge(
    obs: ConnObservation,
    sysctls: Mapping[str, str] | None = None,
    rate_bps: float = DEFAULT_RATE_BPS,
    ram_bytes: int | None = None,
    program: str | None = None,
    pid: int | None = None,
) -> ConnDiagnosis:
    """The one factor that held `obs` back during its interval, and the fix.
    `sysctls` are this host's (tcp_rmem, tcp_wmem: current values kept in the fixes);
    fixes are sized for `rate_bps` at the connection's RTT; `program` and `pid` are the
    owning process's (advice/application.py: the application's own part of the verdict)."""
    if obs.rate_mbps < BUSY_MBPS:
        return ConnDiagnosis("idle", None)
    size = recommended_buffer(_target(obs, rate_bps), ram_bytes)
    o = from_conn(obs, sysctls)
    if obs.sending:
        ev = _sender_evidence(obs, o)
        found = ladder.judge(
            o,
            lambda f: _word_sender(f, obs, o, sysctls, size, ev),
            policer=lambda: policer.conns_verdict(obs),
        )
        diag = ConnDiagnosis("sending", *found)
    else:
        found = ladder.judge(o, lambda f: _word_receiver(f, obs, o, sysctls, size))
        diag = ConnDiagnosis("receiving", *found)
    return application.refine_conn(diag, obs, program, pid)


def _sender_evidence(obs: ConnObservation, o: Observation) -> list[str]:
    rate, rtt, window_mbps = o.rate_mbps, _rtt(obs), o.window_mbps
    ev = [
        f"sent {rate:.1f} Mbit/s; busy {_pct(obs.busy)}, receive-window limited "
        f"{_pct(obs.rwnd_limited)}, send-buffer limited {_pct(obs.sndbuf_limited)} of "
        f"{obs.seconds:.1f} s (TCP_INFO)",
        *_common_evidence(obs),
    ]
    if obs.snd_wnd_max:
        ev.append(
            f"peer's window {format_bytes(obs.snd_wnd_min)}-{format_bytes(obs.snd_wnd_max)}: "
            f"{format_bytes(obs.snd_wnd_max)} / {rtt:.1f} ms = {window_mbps:.1f} Mbit/s"
        )
    if o.window_held and obs.rwnd_limited / max(obs.busy, 1e-9) < CHRONO_SHARE:
        ev.append(
            f"the whole window was in flight every round trip ({rate:.1f} of "
            f"{window_mbps:.1f} Mbit/s): a paced sender meets it only when it probes for more"
        )
    return ev


def _word_sender(
    f: Finding,
    obs: ConnObservation,
    o: Observation,
    sysctls: Mapping[str, str] | None,
    size: int,
    ev: list[str],
) -> Words:
    if f.step == "reader":
        ev.append(
            "the peer's window closed to zero (zero-window probes)"
            if o.reader_stall == "zero-window"
            else "the peer's window opens far wider than the data sent per RTT, then closes"
        )
        return (
            "the receiving application does not read fast enough: its socket buffer is "
            "full, the window it offers closes, and the sender waits (a buffer change "
            "does not help; look at the reader: disk, CPU, a rate limit)",
            ev,
            (),
        )
    if f.step == "window-scaling":
        return _scaling_words(f, ev)
    if f.step == "receiver-window":
        rmem = (
            buffer_fix(
                "net.ipv4.tcp_rmem",
                size,
                "peer",
                None,
                "The receive window, and so the rate per RTT, is bounded by the receiver's "
                "tcp_rmem max (the peer's current value is not readable from here).",
            ),
            setsockopt_fix("SO_RCVBUF", size // 2, "peer"),
        )
        return (
            "the receiver (peer) does not offer a window as large as the path's "
            "bandwidth-delay product, so this sender idles waiting for window updates",
            ev,
            rmem,
        )
    if f.step == "sender-buffer":
        fixes = _own_buffer_fixes("SO_SNDBUF", obs.sndbuf, sysctls, size, ev)
        return (
            "this host's send buffer is smaller than the path's bandwidth-delay product: the "
            "sender stops with the window still open",
            ev,
            fixes,
        )
    if f.step == "idle-sender":
        ev.append(f"the sender had data in flight only {_pct(obs.busy)} of the time")
        return (
            "the sending application does not supply data fast enough (TCP had nothing to "
            "send most of the time): look at its disk, CPU or its own rate limit",
            ev,
            (),
        )
    if f.step == "no-sack":
        return sack_words(f, ev, "no SACK in TCP_INFO's options")
    if f.step == "congestion":
        cc = obs.congestion_control.lower()
        ev.append(
            f"{obs.retransmits} retransmits of {obs.segs_out} segments ({o.loss:.2%}): "
            f"{cc} is bounded at {o.loss_bound_mbps or 0:.1f} Mbit/s (Mathis)"
        )
        return f"losses hold the loss-based congestion control ({cc}) down", ev, (bbr_fix("local"),)
    if f.step == "reader-behind":
        behind = application.reader_falling_behind(obs)
        assert behind is not None
        ev.append(behind)
        return (
            "the receiving application reads slower than the data arrives: its buffer fills "
            "with what it has not read, and once the window it offers closes the sender waits "
            "(a buffer change does not help; look at the reader: disk, CPU, a rate limit)",
            ev,
            (),
        )
    ev.append(
        f"busy {_pct(obs.busy)} and neither window limited it: cwnd-limited at the rate "
        f"the path delivers ({obs.delivery_rate_mbps:.1f} Mbit/s)"
    )
    return (
        "healthy: the connection runs at what the path gives it (its congestion window, "
        "not a buffer, sets the rate)",
        ev,
        (),
    )


# This host's socket buffers: each one's autotuning range, the share of the range's max below
# which the application sized the buffer itself, and why raising the range helps.
_OWN_BUFFERS: dict[Option, tuple[str, float, str]] = {
    "SO_SNDBUF": (
        "net.ipv4.tcp_wmem",
        0.9,
        "Unacknowledged data stays in the send buffer: tcp_wmem max bounds the rate.",
    ),
    "SO_RCVBUF": (
        "net.ipv4.tcp_rmem",
        0.5,
        "The receive window, and so the rate per RTT, is bounded by tcp_rmem max.",
    ),
}


def _own_buffer_fixes(
    option: Option, held: int | None, sysctls: Mapping[str, str] | None, size: int, ev: list[str]
) -> tuple[Fix, ...]:
    """What the buffer holds goes to the evidence; the fixes: setsockopt alone where the
    application fixed the size (autotuning is off for it), else the autotuning range first."""
    key, locked_below, why = _OWN_BUFFERS[option]
    current = _triple(sysctls or {}, key)
    locked = held is not None and current is not None and held < locked_below * current[2]
    if held is not None:
        noun = "send buffer" if option == "SO_SNDBUF" else "receive buffer"
        ev.append(
            f"{noun} {format_bytes(held)}"
            + (f" of {key.rsplit('.', 1)[1]} max {format_bytes(current[2])}" if current else "")
            + (f" (the application fixed {option}: autotuning is off)" if locked else "")
        )
    fixes: tuple[Fix, ...] = (setsockopt_fix(option, size // 2, "local"),)
    if locked:
        return fixes
    return (buffer_fix(key, size, "local", sysctls, why), *fixes)


SCALING_WHY = "Without window scaling no window exceeds 64 KB."


def scaling_fix(host: HostRole, why: str = SCALING_WHY) -> Fix:
    """Window scaling back on, where the handshake agreed none (a live connection's verdict
    and a capture's give the same fix)."""
    fix = sysctl_fix("tcp_window_scaling", "net.ipv4.tcp_window_scaling", "1", why, "RFC 7323")
    return dataclasses.replace(fix, host=host, answers=("window-scaling",))


SACK_WHY = "Without SACK a window repairs one lost segment per round trip (RFC 2018, RFC 6582)."


def sack_fix(host: HostRole) -> Fix:
    """SACK back on, where the handshake agreed none and losses held the sender (a live
    connection's verdict and a capture's give the same fix)."""
    fix = sysctl_fix("tcp_sack", "net.ipv4.tcp_sack", "1", SACK_WHY, "RFC 2018")
    return dataclasses.replace(fix, host=host, answers=("congestion",))


def sack_words(f: Finding, ev: list[str], seen: str) -> Words:
    """Either view: losses held the sender, and SACK was not agreed (`seen`: where that
    shows), so each loss cost a round trip of recovery."""
    ev.append(f"SACK is off on this connection ({seen})")
    return (
        f"losses hold the sender down, and SACK was not agreed in the handshake ({f.host} "
        "host): each lost segment costs a round trip of recovery. Turn SACK on there."
        + one_point_note(),
        ev,
        (sack_fix(f.host or "both"),),
    )


def _scaling_words(f: Finding, ev: list[str]) -> Words:
    """Either side of the connection: the handshake agreed no scaling, so the window offered
    stops at 64 KB whatever the buffers (raising them does nothing)."""
    ev.append("window scaling is off on this connection (no wscale in the SYNs)")
    return (
        "window scaling was not agreed in the handshake: the window stops at 64 KB."
        + one_point_note(),
        ev,
        (scaling_fix(f.host or "both"),),
    )


def _word_receiver(
    f: Finding,
    obs: ConnObservation,
    o: Observation,
    sysctls: Mapping[str, str] | None,
    size: int,
) -> Words:
    rtt = o.rtt_loaded_ms or 0.0
    ev = [f"received {o.rate_mbps:.1f} Mbit/s over {obs.seconds:.1f} s", *_common_evidence(obs)]
    if f.step == "reader":
        ev.append(
            f"up to {format_bytes(obs.rqueue_max)} received and not yet read "
            f"(receive buffer {format_bytes(obs.rcvbuf or 0)}); the window we offered "
            f"went down to {format_bytes(obs.rcv_wnd_min)} (from {format_bytes(obs.rcv_wnd_max)})"
        )
        return (
            "the application here does not read fast enough: its unread data fills the "
            "receive buffer and the window it offers closes",
            ev,
            (),
        )
    if obs.rcv_wnd_max:
        ev.append(
            f"window offered {format_bytes(obs.rcv_wnd_max)} / {rtt:.1f} ms = "
            f"{o.window_mbps:.1f} Mbit/s"
        )
    if f.step == "window-scaling":
        return _scaling_words(f, ev)
    if f.step == "receiver-window":
        fixes = _own_buffer_fixes("SO_RCVBUF", obs.rcvbuf, sysctls, size, ev)
        return (
            "this host (the receiver) does not offer a window as large as the path's "
            "bandwidth-delay product: the data of each window arrives, then the sender waits",
            ev,
            fixes,
        )
    if f.step == "no-sack":
        ev.append(f"{obs.ooo_packets} segments arrived out of order (losses upstream)")
        return sack_words(f, ev, "no SACK in TCP_INFO's options")
    if f.step == "congestion":
        ev.append(f"{obs.ooo_packets} segments arrived out of order (losses upstream)")
        return (
            "segments are lost on the way here; the far end's congestion control sets the "
            "rate (only its TCP_INFO tells by how much)",
            ev,
            (),
        )
    ev.append("the window we offer is not filled: the far end's sender or the path sets the rate")
    return (
        "this host's receive window is not the limit; seen from the receiver the sender or "
        "the path sets the rate (`tcpwizard conns` on the sender, or `tcpwizard check`, "
        "tells which)",
        ev,
        (),
    )
