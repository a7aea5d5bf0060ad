"""Round-trip time probes: UDP echo to serve (preferred), TCP connect time, ICMP echo.

All three pace their probes (default 10 ms apart) so the probes themselves never queue at
the bottleneck, and all are bounded in count and wall time.
"""

from __future__ import annotations

import contextlib
import os
import select
import socket
import struct
import time
from collections.abc import Callable

from tcpwizard.exitcodes import PermissionRequired
from tcpwizard.measure.model import RttStats
from tcpwizard.measure.stats import rtt_stats
from tcpwizard.measure.wire import udp
from tcpwizard.measure.wire.protocol import PeerUnavailable

MAX_PROBES = 1000
ECHO_SIZE = udp.HEADER_LEN  # small: less transmission time in the RTT on slow links
# The idle follow-up's spacing (advice/idle_follow_up.py): a probe of 65 bytes on the wire
# (37 + UDP 8 + IPv4 20) every 4 ms is 130 kbit/s, under 5 % of the slowest policer the
# scenario matrix and the lab tests set (3 Mbit/s), so a bucket refills between probes;
# 2 s of them are 500, which rule out random loss down to 0.9 % (ln 0.01 / 500).
FOLLOW_UP_INTERVAL_S = 0.004
FOLLOW_UP_BUDGET_S = 2.0


def _wait_readable(sock: socket.socket, until: float) -> bool:
    remaining = until - time.monotonic()
    if remaining <= 0:
        return False
    readable, _, _ = select.select([sock], [], [], remaining)
    return bool(readable)


def _paced_probe_loop(
    sock: socket.socket,
    count: int,
    interval: float,
    timeout: float,
    send: Callable[[int], None],
    receive: Callable[[], tuple[int, float] | None],
) -> dict[int, float]:
    """Send `count` probes `interval` apart, collecting replies in between; after the last
    one wait until every reply is in or `timeout` after it. Returns seq -> RTT in ms.
    Replies for the same seq count once (duplicates are ignored)."""
    count = max(1, min(count, MAX_PROBES))
    got: dict[int, float] = {}
    start = time.monotonic()
    for seq in range(count):
        send(seq)
        until = start + (seq + 1) * interval if seq + 1 < count else time.monotonic() + timeout
        while len(got) < count and _wait_readable(sock, until):
            r = receive()
            if r is not None and 0 <= r[0] < count:
                got.setdefault(r[0], r[1])
    return got


def udp_echo(
    sock: socket.socket,
    token: bytes,
    count: int = 20,
    interval: float = 0.01,
    timeout: float = 1.0,
    size: int = ECHO_SIZE,
) -> RttStats | None:
    """RTT to serve's UDP reflector. sock is connected to it (ControlClient.udp_socket()).

    RTT = (kernel receive time of the reply) - (our send time) - (server turnaround,
    kernel receive to its sendto(), reported in the reply): what is left is the path."""
    train = int.from_bytes(os.urandom(4), "big")  # tells this run's replies from stale ones
    size = max(udp.HEADER_LEN, size)
    # Kernel transmit stamps, keyed by send order (OPT_ID restarts at 0 here); without them
    # the user-space time just before send() is used.
    tx_kernel = udp.set_tx_timestamps(sock, True)
    sent_ids: dict[int, int] = {}  # OPT_ID -> seq
    tx_ns: dict[int, int] = {}  # seq -> kernel transmit time
    next_id = 0

    def take_stamps() -> None:
        for ident, ns in udp.drain_tx_timestamps(sock):
            seq = sent_ids.get(ident)
            if seq is not None:
                tx_ns[seq] = ns

    def send(seq: int) -> None:
        nonlocal next_id
        pkt = udp.pack(udp.KIND_ECHO, token, train, seq, time.time_ns(), 0, size)
        try:
            sock.send(pkt)
        except OSError:
            return  # ICMP errors surface here; count as loss
        sent_ids[next_id] = seq
        next_id += 1

    def receive() -> tuple[int, float] | None:
        if tx_kernel:
            take_stamps()
        try:
            data, _addr, rx_ns, _kernel = udp.recv_stamped(sock, flags=socket.MSG_DONTWAIT)
        except OSError:  # includes BlockingIOError: only transmit stamps were waiting
            return None
        pkt = udp.unpack(data)
        if pkt is None or pkt.kind != udp.KIND_ECHO_REPLY or pkt.train != train:
            return None
        if tx_kernel:
            take_stamps()
        sent_at = tx_ns.get(pkt.seq, pkt.client_ns)
        rtt_ns = rx_ns - sent_at - pkt.turnaround_ns
        return pkt.seq, max(0.0, rtt_ns / 1e6)

    try:
        got = _paced_probe_loop(sock, count, interval, timeout, send, receive)
    finally:
        if tx_kernel:
            udp.set_tx_timestamps(sock, False)
            udp.drain_tx_timestamps(sock)
    return rtt_stats([got[s] for s in sorted(got)], count, "udp-echo")


def tcp_connect(
    host: str,
    port: int,
    count: int = 10,
    interval: float = 0.02,
    timeout: float = 1.0,
    family: int = socket.AF_UNSPEC,
) -> RttStats | None:
    """RTT as the time connect() takes (SYN -> SYN-ACK, or RST: a refusal is a reply too).
    Sockets are closed with an RST (SO_LINGER 0) so we leave no TIME_WAIT behind."""
    infos = socket.getaddrinfo(host, port, family, socket.SOCK_STREAM)
    fam, _, _, _, addr = infos[0]
    count = max(1, min(count, MAX_PROBES))
    samples: list[float] = []
    start = time.monotonic()
    for i in range(count):
        s = socket.socket(fam, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.settimeout(timeout)
        t0 = time.perf_counter_ns()
        try:
            s.connect(addr)
            samples.append((time.perf_counter_ns() - t0) / 1e6)
        except ConnectionRefusedError:
            samples.append((time.perf_counter_ns() - t0) / 1e6)
        except OSError:
            pass  # timeout or unreachable: a loss
        finally:
            s.close()
        pause = start + (i + 1) * interval - time.monotonic()
        if pause > 0 and i + 1 < count:
            time.sleep(pause)
    return rtt_stats(samples, count, "tcp-connect")


# -- ICMP ---------------------------------------------------------------------------------
ICMP_ECHO, ICMP_ECHOREPLY = 8, 0
ICMP6_ECHO, ICMP6_ECHOREPLY = 128, 129


def icmp_checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    total = int(sum(struct.unpack(f"!{len(data) // 2}H", data)))
    total = (total >> 16) + (total & 0xFFFF)
    total += total >> 16
    return ~total & 0xFFFF


def icmp_echo_packet(family: int, ident: int, seq: int, payload: bytes) -> bytes:
    kind = ICMP6_ECHO if family == socket.AF_INET6 else ICMP_ECHO
    head = struct.pack("!BBHHH", kind, 0, 0, ident, seq)
    if family == socket.AF_INET6:
        return head + payload  # the kernel fills in the ICMPv6 checksum
    csum = icmp_checksum(head + payload)
    return struct.pack("!BBHHH", kind, 0, csum, ident, seq) + payload


def open_icmp(family: int) -> tuple[socket.socket, bool]:
    """(socket, raw). Raw needs root (CAP_NET_RAW); else an unprivileged ping socket,
    which Linux allows when net.ipv4.ping_group_range includes our group."""
    proto = socket.IPPROTO_ICMPV6 if family == socket.AF_INET6 else socket.IPPROTO_ICMP
    try:
        return socket.socket(family, socket.SOCK_RAW, proto), True
    except PermissionError:
        pass
    try:
        return socket.socket(family, socket.SOCK_DGRAM, proto), False
    except OSError:
        raise PermissionRequired(
            "ICMP echo needs root (raw socket) or net.ipv4.ping_group_range; skipped"
        ) from None


def parse_icmp_reply(data: bytes, family: int, raw: bool) -> tuple[int, int, int] | None:
    """(type, ident, seq) of an ICMP message; IPv4 raw sockets include the IP header."""
    if family == socket.AF_INET and raw:
        if len(data) < 20:
            return None
        data = data[(data[0] & 0x0F) * 4 :]
    if len(data) < 8:
        return None
    kind, _code, _csum, ident, seq = struct.unpack_from("!BBHHH", data)
    return kind, ident, seq


def icmp_echo(
    host: str,
    count: int = 10,
    interval: float = 0.02,
    timeout: float = 1.0,
    size: int = 56,
) -> RttStats | None:
    infos = socket.getaddrinfo(host, None, socket.AF_UNSPEC, socket.SOCK_DGRAM)
    family, _, _, _, addr = infos[0]
    sock, raw = open_icmp(family)
    reply_kind = ICMP6_ECHOREPLY if family == socket.AF_INET6 else ICMP_ECHOREPLY
    ident = os.getpid() & 0xFFFF
    sent_at: dict[int, int] = {}
    try:
        udp.enable_rx_timestamps(sock)
        if not raw:
            sock.connect(addr)
            ident = sock.getsockname()[1] & 0xFFFF  # ping sockets rewrite the id to the port
        base_seq = int.from_bytes(os.urandom(2), "big") & 0x7FFF

        def send(seq: int) -> None:
            wire_seq = (base_seq + seq) & 0xFFFF
            pkt = icmp_echo_packet(family, ident, wire_seq, bytes(max(0, size)))
            sent_at[wire_seq] = time.time_ns()
            with contextlib.suppress(OSError):
                sock.sendto(pkt, addr)

        def receive() -> tuple[int, float] | None:
            try:
                data, _a, rx_ns, _k = udp.recv_stamped(sock, 65535)
            except OSError:
                return None
            parsed = parse_icmp_reply(data, family, raw)
            if parsed is None:
                return None
            kind, rid, rseq = parsed
            if kind != reply_kind or (raw and rid != ident) or rseq not in sent_at:
                return None
            return (rseq - base_seq) & 0xFFFF, (rx_ns - sent_at[rseq]) / 1e6

        got = _paced_probe_loop(sock, count, interval, timeout, send, receive)
    finally:
        sock.close()
    return rtt_stats([got[s] for s in sorted(got)], count, "icmp")


def require_reply(stats: RttStats | None, what: str, host: str) -> RttStats:
    if stats is None:
        raise PeerUnavailable(f"no {what} replies from {host}")
    return stats
