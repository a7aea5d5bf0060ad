"""The TCP options of a SYN as it arrived: what a middlebox on the way left of what the
other end sent (docs/middlebox.md).

Linux keeps the IP and TCP headers of the SYN a listening socket accepted when the
listener has TCP_SAVE_SYN set; the accepted socket hands them out once through
getsockopt(TCP_SAVED_SYN) (since Linux 4.2). serve reads them for every control
connection and reports them in its hello, so the client can set what its own SYN
carried beside what arrived.

A firewall that "strips" an option usually overwrites it with NOPs (kind 1) so the
header keeps its length; nftables' `reset tcp option` does the same. Linux never pads
with more than two NOPs in a row (include/net/tcp.h: options are laid out in 4-byte
words, one or two NOPs before a 2- or 3-byte option), so a longer run of NOPs is the mark
of an option overwritten on the way.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# include/uapi/linux/tcp.h
TCP_SAVE_SYN = 27
TCP_SAVED_SYN = 28
SAVED_SYN_MAX = 60 + 40 + 60  # IPv4 with options or IPv6 with room for headers, + TCP
MAX_LINUX_NOPS = 2  # the longest run of NOPs Linux itself puts in a SYN's options
MAX_WSCALE = 14  # RFC 7323 section 2.3
IPPROTO_TCP = 6


@dataclass(frozen=True)
class SynOptions:
    """The options of one SYN (or SYN-ACK) as seen at one point of the path."""

    mss: int | None
    wscale: int | None  # the shift; None: no window scale option
    sack_permitted: bool
    timestamps: bool
    nops: int = 0  # the longest run of NOP options: more than two marks an overwritten one

    @property
    def overwritten(self) -> bool:
        """NOP padding no TCP stack sends: an option was overwritten on the way."""
        return self.nops > MAX_LINUX_NOPS

    def to_wire(self) -> dict[str, object]:
        return {
            "mss": self.mss,
            "wscale": self.wscale,
            "sack_permitted": self.sack_permitted,
            "timestamps": self.timestamps,
            "nops": self.nops,
        }

    @classmethod
    def from_wire(cls, obj: object) -> SynOptions | None:
        """The options from a peer's message; None when absent or not usable (the report
        is evidence, never trusted to be well formed)."""
        if not isinstance(obj, Mapping):
            return None
        msg: Mapping[str, Any] = obj
        mss, wscale, nops = msg.get("mss"), msg.get("wscale"), msg.get("nops", 0)
        sack, ts = msg.get("sack_permitted"), msg.get("timestamps")
        if mss is not None and not (_is_int(mss) and 0 < mss <= 65535):
            return None
        if wscale is not None and not (_is_int(wscale) and 0 <= wscale <= 255):
            return None
        if not (_is_int(nops) and 0 <= nops <= 40):
            return None
        if not isinstance(sack, bool) or not isinstance(ts, bool):
            return None
        return cls(mss, None if wscale is None else min(wscale, MAX_WSCALE), sack, ts, nops)


def _is_int(x: object) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def parse_options(opts: bytes) -> SynOptions:
    """The options area of a TCP header (after the 20 fixed bytes). A malformed option
    ends the walk: what came before it stands."""
    mss = wscale = None
    sack = ts = False
    run = longest = 0
    i = 0
    while i < len(opts):
        kind = opts[i]
        if kind == 0:
            break
        if kind == 1:
            run += 1
            longest = max(longest, run)
            i += 1
            continue
        run = 0
        if i + 1 >= len(opts):
            break
        length = opts[i + 1]
        if length < 2 or i + length > len(opts):
            break
        body = opts[i + 2 : i + length]
        if kind == 2 and len(body) == 2:
            mss = int.from_bytes(body, "big")
        elif kind == 3 and len(body) == 1:
            wscale = min(body[0], MAX_WSCALE)
        elif kind == 4:
            sack = True
        elif kind == 8:
            ts = True
        i += length
    return SynOptions(mss, wscale, sack, ts, longest)


def parse_syn(packet: bytes) -> SynOptions | None:
    """The options of a SYN from its IP header on (TCP_SAVED_SYN's layout); None when it
    is not IPv4/IPv6 carrying TCP or is cut short."""
    if not packet:
        return None
    version = packet[0] >> 4
    if version == 4:
        ihl = (packet[0] & 0x0F) * 4
        if ihl < 20 or len(packet) < ihl + 20 or packet[9] != IPPROTO_TCP:
            return None
        tcp = packet[ihl:]
    elif version == 6:
        # Linux saves the headers up to TCP; extension headers on a SYN are rare enough
        # that one is read as "unknown" rather than walked.
        if len(packet) < 60 or packet[6] != IPPROTO_TCP:
            return None
        tcp = packet[40:]
    else:
        return None
    offset = (tcp[12] >> 4) * 4
    if offset < 20 or len(tcp) < offset:
        return None
    return parse_options(tcp[20:offset])


def save_syns(listener: socket.socket) -> bool:
    """Ask the kernel to keep the SYN of every connection this listener accepts; False
    where it cannot (not Linux, or a kernel before 4.2)."""
    try:
        listener.setsockopt(socket.IPPROTO_TCP, TCP_SAVE_SYN, 1)
    except OSError:
        return False
    return True


def saved_syn(conn: socket.socket) -> SynOptions | None:
    """The options of the SYN that opened this accepted connection, as it arrived. The
    kernel hands them out once; None when none was kept."""
    data = b""
    with contextlib.suppress(OSError):
        data = conn.getsockopt(socket.IPPROTO_TCP, TCP_SAVED_SYN, SAVED_SYN_MAX)
    return parse_syn(data) if data else None
