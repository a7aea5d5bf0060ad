"""TCP_INFO: the kernel's view of one connection (RTT, cwnd, retransmits, chrono counters).

The layout is Linux `struct tcp_info` from include/uapi/linux/tcp.h. It only ever grows at
the end, so older kernels return a prefix: every field past what the kernel filled in is
reported as None instead of being guessed. Newer kernels (6.18 returns 280 bytes) append
fields this parser does not know; they are ignored.
"""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass

from tcpwizard.measure.model import TcpInfoSample

# (name, struct code) in kernel order. The first 8 bytes are u8 fields and bitfields; the
# rest is naturally aligned as laid out here, so "=" (native order, no padding) is exact.
FIELDS: tuple[tuple[str, str], ...] = (
    ("state", "B"),
    ("ca_state", "B"),
    ("retransmits", "B"),
    ("probes", "B"),
    ("backoff", "B"),
    ("options", "B"),
    ("wscale", "B"),  # snd_wscale:4 (low nibble), rcv_wscale:4 (high nibble)
    ("app_limited_flags", "B"),
    ("rto", "I"),
    ("ato", "I"),
    ("snd_mss", "I"),
    ("rcv_mss", "I"),
    ("unacked", "I"),
    ("sacked", "I"),
    ("lost", "I"),
    ("retrans", "I"),
    ("fackets", "I"),
    ("last_data_sent", "I"),
    ("last_ack_sent", "I"),
    ("last_data_recv", "I"),
    ("last_ack_recv", "I"),
    ("pmtu", "I"),
    ("rcv_ssthresh", "I"),
    ("rtt", "I"),
    ("rttvar", "I"),
    ("snd_ssthresh", "I"),
    ("snd_cwnd", "I"),
    ("advmss", "I"),
    ("reordering", "I"),
    ("rcv_rtt", "I"),
    ("rcv_space", "I"),
    ("total_retrans", "I"),
    ("pacing_rate", "Q"),
    ("max_pacing_rate", "Q"),
    ("bytes_acked", "Q"),
    ("bytes_received", "Q"),
    ("segs_out", "I"),
    ("segs_in", "I"),
    ("notsent_bytes", "I"),
    ("min_rtt", "I"),
    ("data_segs_in", "I"),
    ("data_segs_out", "I"),
    ("delivery_rate", "Q"),
    ("busy_time", "Q"),
    ("rwnd_limited", "Q"),
    ("sndbuf_limited", "Q"),
    ("delivered", "I"),
    ("delivered_ce", "I"),
    ("bytes_sent", "Q"),
    ("bytes_retrans", "Q"),
    ("dsack_dups", "I"),
    ("reord_seen", "I"),
    ("rcv_ooopack", "I"),
    ("snd_wnd", "I"),
    ("rcv_wnd", "I"),
    ("rehash", "I"),
    ("total_rto", "H"),
    ("total_rto_recoveries", "H"),
    ("total_rto_time", "I"),
)


def _offsets() -> dict[str, tuple[int, struct.Struct]]:
    out: dict[str, tuple[int, struct.Struct]] = {}
    pos = 0
    for name, code in FIELDS:
        st = struct.Struct("=" + code)
        out[name] = (pos, st)
        pos += st.size
    return out


_LAYOUT = _offsets()
KNOWN_SIZE = sum(struct.calcsize("=" + code) for _, code in FIELDS)  # 248 on 6.x
# Ask for more than we know so a newer kernel's size is visible in `TcpInfo.size`.
_REQUEST = 512
SOL_TCP = getattr(socket, "SOL_TCP", socket.IPPROTO_TCP)
TCP_INFO = getattr(socket, "TCP_INFO", 11)


@dataclass(frozen=True)
class TcpInfo:
    """All fields the kernel filled in; None where its struct was too short."""

    size: int
    values: dict[str, int]

    def get(self, name: str) -> int | None:
        return self.values.get(name)

    def __getitem__(self, name: str) -> int:
        return self.values[name]

    @property
    def snd_wscale(self) -> int | None:
        w = self.values.get("wscale")
        return None if w is None else w & 0x0F

    @property
    def rcv_wscale(self) -> int | None:
        w = self.values.get("wscale")
        return None if w is None else w >> 4

    def to_sample(self) -> TcpInfoSample:
        """The subset the transfer results carry (missing fields read as 0: kernels that
        lack a counter cannot be limited by what it measures, and the JSON stays typed)."""
        v = self.values
        return TcpInfoSample(
            rtt_us=v.get("rtt", 0),
            rttvar_us=v.get("rttvar", 0),
            snd_cwnd=v.get("snd_cwnd", 0),
            total_retrans=v.get("total_retrans", 0),
            delivery_rate_bps=v.get("delivery_rate", 0) * 8,
            busy_time_us=v.get("busy_time", 0),
            rwnd_limited_us=v.get("rwnd_limited", 0),
            sndbuf_limited_us=v.get("sndbuf_limited", 0),
            snd_mss=v.get("snd_mss", 0),
            snd_wnd=v.get("snd_wnd", 0),
        )


def parse_tcp_info(buf: bytes) -> TcpInfo:
    """Decode a getsockopt(TCP_INFO) buffer of any length (older kernels: shorter)."""
    values: dict[str, int] = {}
    for name, (off, st) in _LAYOUT.items():
        if off + st.size > len(buf):
            break
        values[name] = int(st.unpack_from(buf, off)[0])
    return TcpInfo(size=len(buf), values=values)


def read_tcp_info(sock: socket.socket) -> TcpInfo:
    """TCP_INFO of a connected socket. Raises OSError if the socket is not TCP."""
    return parse_tcp_info(sock.getsockopt(SOL_TCP, TCP_INFO, _REQUEST))


def congestion_control(sock: socket.socket) -> str:
    """The congestion control algorithm the socket runs (a verdict needs to know it)."""
    opt = getattr(socket, "TCP_CONGESTION", 13)
    try:
        raw = sock.getsockopt(SOL_TCP, opt, 16)
    except OSError:
        return ""
    return raw.split(b"\0", 1)[0].decode("ascii", "replace")
