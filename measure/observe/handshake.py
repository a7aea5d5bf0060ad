"""What the far end agreed to in the TCP handshake, read from TCP_INFO of any connection
to it (serve's control connection, an iperf3 control connection, or a plain open port).

These are facts about the far end that need no cooperation from it: whether it offered
window scaling (RFC 7323) and with which shift, SACK, timestamps, and its MSS. A missing
option may also be a middlebox that strips it; the finding says so.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass

from tcpwizard.measure.observe.synopts import SynOptions
from tcpwizard.measure.observe.tcpinfo import read_tcp_info

# Bits of tcpi_options (include/uapi/linux/tcp.h).
TCPI_OPT_TIMESTAMPS = 1
TCPI_OPT_SACK = 2
TCPI_OPT_WSCALE = 4
UNSCALED_WINDOW = 65535


@dataclass(frozen=True)
class HandshakeFacts:
    """The options both ends agreed to. `local_*_offered` tells an option this host did not
    offer (then its absence says nothing about the far end)."""

    window_scaling: bool
    peer_wscale: int | None  # the shift the far end applies to the windows it offers
    sack: bool
    timestamps: bool
    peer_mss: int | None  # the MSS we send with: the far end's, less our options
    rtt_us: int | None  # the SYN/SYN-ACK round trip the kernel measured
    local_scaling_offered: bool = True
    local_sack_offered: bool = True
    local_timestamps_offered: bool = True
    source: str = "handshake"
    port: int | None = None
    # The MSS our own SYN carried (tcpi_advmss) and, from a far end that runs serve, the
    # options of our SYN as it arrived there (measure/observe/synopts.py): what a middlebox left.
    local_mss: int | None = None
    received_syn: SynOptions | None = None

    @property
    def peer_scaling_off(self) -> bool:
        """The far end (or a middlebox on the way) refused window scaling we offered."""
        return self.local_scaling_offered and not self.window_scaling

    @property
    def max_peer_window(self) -> int | None:
        """The largest window the far end can offer us: 64 KB unscaled, else 64 KB << shift."""
        if not self.window_scaling:
            return UNSCALED_WINDOW
        if self.peer_wscale is None:
            return None
        return UNSCALED_WINDOW << self.peer_wscale


def read_handshake(
    sock: socket.socket,
    *,
    port: int | None = None,
    sysctl_root: str = "/proc/sys",
) -> HandshakeFacts | None:
    """The agreed options of a connected TCP socket; None when TCP_INFO is unreadable."""
    try:
        info = read_tcp_info(sock)
    except OSError:
        return None
    options = info.get("options")
    if options is None:
        return None
    scaling = bool(options & TCPI_OPT_WSCALE)
    rtt = info.get("rtt")
    return HandshakeFacts(
        window_scaling=scaling,
        peer_wscale=info.snd_wscale if scaling else None,
        sack=bool(options & TCPI_OPT_SACK),
        timestamps=bool(options & TCPI_OPT_TIMESTAMPS),
        peer_mss=info.get("snd_mss"),
        rtt_us=rtt if rtt else None,
        local_scaling_offered=_sysctl_on(sysctl_root, "net/ipv4/tcp_window_scaling"),
        local_sack_offered=_sysctl_on(sysctl_root, "net/ipv4/tcp_sack"),
        local_timestamps_offered=_sysctl_on(sysctl_root, "net/ipv4/tcp_timestamps"),
        port=port,
        local_mss=_sent_mss(info.get("advmss"), bool(options & TCPI_OPT_TIMESTAMPS)),
    )


TIMESTAMP_OPTION = 12  # TCPOLEN_TSTAMP_ALIGNED


def _sent_mss(advmss: int | None, timestamps: bool) -> int | None:
    """The MSS our SYN carried: the kernel takes the timestamp option's 12 bytes off
    tcpi_advmss once timestamps are agreed (tcp_input.c, tcp_rcv_synsent_state_process)."""
    if not advmss:
        return None
    return advmss + TIMESTAMP_OPTION if timestamps else advmss


def _sysctl_on(root: str, path: str) -> bool:
    """This host's own setting; unreadable counts as on (the kernel default)."""
    try:
        with open(f"{root}/{path}", encoding="ascii") as f:
            return f.read().strip() != "0"
    except (OSError, UnicodeDecodeError):
        return True


def handshake_with(
    address: str, port: int, timeout: float = 2.0, sysctl_root: str = "/proc/sys"
) -> HandshakeFacts | None:
    """Connect to an open port, read the agreed options, close. None when it does not
    answer. Only for ports that tolerate a connection that sends nothing (SSH, HTTP):
    never an iperf3 port, where such a connection ends a one-off server."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        try:
            sock.connect((address, port))
        except OSError:
            return None
        return read_handshake(sock, port=port, sysctl_root=sysctl_root)
