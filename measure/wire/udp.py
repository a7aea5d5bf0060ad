"""The UDP side of serve: packet layout and kernel receive timestamps.

Python's socket module exposes none of the timestamping constants, so the Linux values
are spelled out here. SO_TIMESTAMPNS stamps each datagram when the kernel receives it
(before our thread is scheduled), which removes the scheduling noise that user-space
time.time_ns() after recvmsg() would add.
"""

from __future__ import annotations

import errno
import socket
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# include/uapi/asm-generic/socket.h (x86-64, arm64 use the generic values).
SO_TIMESTAMPNS = 35
SCM_TIMESTAMPNS = SO_TIMESTAMPNS
_TIMESPEC = struct.Struct("@qq")  # struct timespec on 64-bit Linux

MAGIC = b"TWz1"
KIND_ECHO = 1  # client -> server, reflected as KIND_ECHO_REPLY
KIND_ECHO_REPLY = 2
KIND_TRAIN_UP = 3  # client -> server: recorded with its arrival time, reported over TCP
KIND_TRAIN_DOWN = 4  # server -> client: a train the client asked for with probe_train
KIND_REGISTER = 5  # client -> server: "send downlink trains to this address"
KIND_REGISTER_ACK = 6
KINDS = frozenset(range(1, 7))

TOKEN_LEN = 8
# magic, kind, token, train id, seq, client send time (opaque, echoed), server turnaround
HEADER = struct.Struct("!4sB8sIIQQ")
HEADER_LEN = HEADER.size
MAX_DATAGRAM = 9000  # jumbo-frame sized probes are allowed, nothing larger


# linux/udp.h: UDP generic segmentation offload (Linux 4.18). One sendmsg() hands the kernel
# many datagrams of one size, so a train leaves as fast as the kernel can put it on the
# interface instead of at Python's pace of one system call per packet: on a busy machine
# that pace, not the path, set the rate of a 1 Gbit/s train.
UDP_SEGMENT = 103
GSO_SEGMENTS = 32  # datagrams per call (the kernel allows 64; 32 x 1472 B fits 64 KB)
GSO_MAX_BYTES = 65_000  # one call's payload: a UDP length field, less the headers


def send_segments(
    sock: socket.socket,
    buf: bytes | bytearray | memoryview,
    seg: int,
    address: tuple[Any, ...] | None = None,
) -> bool:
    """Send buf as len(buf) / seg datagrams of seg bytes in one call (UDP GSO), to the
    connected peer or to `address`. False when this kernel or socket cannot (the caller
    then sends one datagram at a time)."""
    cmsg = [(socket.SOL_UDP, UDP_SEGMENT, struct.pack("=H", seg))]
    try:
        if address is None:
            sock.sendmsg([buf], cmsg)
        else:
            sock.sendmsg([buf], cmsg, 0, address)
    except BlockingIOError:
        return True  # a full buffer drops the batch, as a plain send would drop a packet
    except OSError as exc:
        # ENOBUFS: the interface queue overflowed; the packets are lost like any others.
        return exc.errno == errno.ENOBUFS
    return True


def send_train_batches(
    sock: socket.socket,
    count: int,
    size: int,
    stamp: Callable[[bytearray, int, int, int], None],
    address: tuple[Any, ...] | None = None,
) -> int:
    """Send `count` datagrams of `size` bytes back to back, up to GSO_SEGMENTS per system
    call; stamp(buf, offset, i, now_ns) writes packet i at offset with its batch's send
    time (taken once per batch: its packets leave together). Returns how many went to the
    kernel: fewer than `count` when it refused UDP GSO (0 when it never took a batch); the
    caller sends the rest one datagram at a time."""
    per = max(1, min(GSO_SEGMENTS, GSO_MAX_BYTES // size))
    buf = bytearray(size * min(count, per))
    for first in range(0, count, per):
        k = min(per, count - first)
        now = time.time_ns()
        for j in range(k):
            stamp(buf, j * size, first + j, now)
        if not send_segments(sock, memoryview(buf)[: k * size], size, address):
            return first
    return count


@dataclass(frozen=True)
class Packet:
    kind: int
    token: bytes
    train: int
    seq: int
    client_ns: int
    turnaround_ns: int


def pack(
    kind: int,
    token: bytes,
    train: int = 0,
    seq: int = 0,
    client_ns: int = 0,
    turnaround_ns: int = 0,
    size: int = HEADER_LEN,
) -> bytes:
    head = HEADER.pack(MAGIC, kind, token, train, seq, client_ns, turnaround_ns)
    return head + bytes(max(0, size - HEADER_LEN))


def unpack(data: bytes) -> Packet | None:
    """None for anything that is not one of our packets (never raises on garbage)."""
    if len(data) < HEADER_LEN:
        return None
    magic, kind, token, train, seq, client_ns, turn = HEADER.unpack_from(data)
    if magic != MAGIC or kind not in KINDS:
        return None
    return Packet(kind, token, train, seq, client_ns, turn)


def enable_rx_timestamps(sock: socket.socket) -> bool:
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    except OSError:
        return False
    return True


def recv_stamped(
    sock: socket.socket, bufsize: int = MAX_DATAGRAM, flags: int = 0
) -> tuple[bytes, object, int, bool]:
    """(data, address, receive time in ns since the epoch, True if the kernel stamped it).
    Falls back to the user-space clock when no timestamp came with the datagram."""
    data, ancdata, _flags, addr = sock.recvmsg(bufsize, socket.CMSG_SPACE(_TIMESPEC.size), flags)
    for level, ctype, cdata in ancdata:
        if level == socket.SOL_SOCKET and ctype == SCM_TIMESTAMPNS and len(cdata) >= 16:
            sec, nsec = _TIMESPEC.unpack_from(cdata)
            return data, addr, sec * 1_000_000_000 + nsec, True
    return data, addr, time.time_ns(), False


def udp_payload_size(family: int, mtu: int = 1500) -> int:
    """The largest UDP payload that fits one packet of this MTU (no fragmentation)."""
    return mtu - (40 if family == socket.AF_INET6 else 20) - 8


def wire_bytes(family: int, payload: int) -> int:
    """Bytes a bottleneck sees at the IP layer for one datagram of `payload` bytes."""
    return payload + 8 + (40 if family == socket.AF_INET6 else 20)


def wait_until_ns(due: int) -> None:
    """Sleep most of the way, busy-wait the last 200 us: sleep alone overshoots by ~60 us,
    spinning all the way would starve the other processes on a small machine."""
    while (left := due - time.perf_counter_ns()) > 0:
        if left > 300_000:
            time.sleep((left - 200_000) / 1e9)


# -- transmit timestamps (SO_TIMESTAMPING, software) ------------------------------------------
# The kernel stamps a datagram when the driver hands it to the device and returns the stamp
# on the socket's error queue, keyed by a per-socket counter (OPT_ID). This removes the time
# our own sendto() call takes from the RTT.
SO_TIMESTAMPING = 37
SCM_TIMESTAMPING = SO_TIMESTAMPING
SOF_TIMESTAMPING_TX_SOFTWARE = 1 << 1
SOF_TIMESTAMPING_SOFTWARE = 1 << 4
SOF_TIMESTAMPING_OPT_ID = 1 << 7
SOF_TIMESTAMPING_OPT_TSONLY = 1 << 11
IP_RECVERR = 11
IPV6_RECVERR = 25
SO_EE_ORIGIN_TIMESTAMPING = 4
_EXTENDED_ERR = struct.Struct("@IBBBBII")  # struct sock_extended_err
TX_FLAGS = (
    SOF_TIMESTAMPING_TX_SOFTWARE
    | SOF_TIMESTAMPING_SOFTWARE
    | SOF_TIMESTAMPING_OPT_ID
    | SOF_TIMESTAMPING_OPT_TSONLY
)


def set_tx_timestamps(sock: socket.socket, on: bool) -> bool:
    """Turn transmit stamping on (the OPT_ID counter restarts at 0) or off."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPING, TX_FLAGS if on else 0)
    except OSError:
        return False
    return True


def drain_tx_timestamps(sock: socket.socket, limit: int = 1024) -> list[tuple[int, int]]:
    """(OPT_ID, ns since the epoch) of every transmit stamp waiting on the error queue."""
    out: list[tuple[int, int]] = []
    for _ in range(limit):
        try:
            _d, ancdata, _f, _a = sock.recvmsg(0, 512, socket.MSG_ERRQUEUE | socket.MSG_DONTWAIT)
        except (BlockingIOError, InterruptedError):
            break
        except OSError:
            break
        stamp: int | None = None
        ident: int | None = None
        for level, ctype, cdata in ancdata:
            if level == socket.SOL_SOCKET and ctype == SCM_TIMESTAMPING and len(cdata) >= 16:
                sec, nsec = _TIMESPEC.unpack_from(cdata)  # [0] is the software stamp
                stamp = sec * 1_000_000_000 + nsec
            elif (level, ctype) in (
                (socket.SOL_IP, IP_RECVERR),
                (socket.IPPROTO_IPV6, IPV6_RECVERR),
            ) and len(cdata) >= _EXTENDED_ERR.size:
                _errno, origin, _t, _c, _p, _info, data = _EXTENDED_ERR.unpack_from(cdata)
                if origin == SO_EE_ORIGIN_TIMESTAMPING:
                    ident = data
        if stamp and ident is not None:
            out.append((ident, stamp))
    return out
