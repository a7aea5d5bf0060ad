"""Bottleneck capacity: the packet I/O of the probe -- packet pairs (CapProbe) and packet
trains sent up or fetched down through serve and timed with kernel receive timestamps, plus a
peerless ICMP-pair mode. What the arrival times mean, and the capacity made of them, is
measure/probes/dispersion.py.

Why one module of this size: the upload, download and peerless methods share the train
sender, the arrival fetch and one time budget; the maths they feed is already apart
(dispersion.py).
"""

from __future__ import annotations

import contextlib
import os
import select
import socket
import statistics
import time
from collections.abc import Callable
from typing import Any

from tcpwizard.measure.model import CapacityEstimate
from tcpwizard.measure.probes.dispersion import (
    LOSSY,
    MIN_MINI,
    MINI,
    MINI_LOAD,
    MINI_TRAINS,
    PAIRS,
    PROBE_TRAIN_LEN,
    REPORT_SEGMENTS,
    SEGMENT,
    TrainScore,
    capprobe,
    combine,
    score_mini_trains,
    score_train,
    segments,
    too_short,
    train_len,
)
from tcpwizard.measure.probes.rtt import icmp_echo_packet, open_icmp, parse_icmp_reply
from tcpwizard.measure.wire import udp
from tcpwizard.measure.wire.control import ControlClient
from tcpwizard.measure.wire.probe_msgs import ProbeReport, ProbeReportRequest, ProbeTrain
from tcpwizard.measure.wire.session import ErrorReply


# -- upload (client -> serve): we send, serve timestamps arrivals -----------------------------
class TrainSender:
    def __init__(self, sock: socket.socket, token: bytes, size: int) -> None:
        self.sock = sock
        self.token = token
        self.size = size
        self.buf = bytearray(size)
        self.gso = True  # until the kernel refuses UDP_SEGMENT

    def send(self, train: int, seq: int) -> int:
        now = time.time_ns()
        udp.HEADER.pack_into(
            self.buf, 0, udp.MAGIC, udp.KIND_TRAIN_UP, self.token, train, seq, now, 0
        )
        with contextlib.suppress(BlockingIOError, OSError):
            self.sock.send(self.buf)
        return now

    def train(
        self, train: int, count: int, rate_bps: float | None, wire: int, burst: int = 1
    ) -> dict[int, int]:
        """Send `count` packets back to back, or in back-to-back groups of `burst` whose
        average rate is rate_bps (mini-trains). Packet i goes out as train id
        train + i // SEGMENT, seq i % SEGMENT; tx is keyed by i."""
        tx: dict[int, int] = {}
        gap = wire * 8 * 1e9 / rate_bps if rate_bps else 0.0
        if not gap and self.gso and self._train_gso(train, count, tx):
            return tx
        t0 = time.perf_counter_ns()
        for i in range(count):
            if gap and i % burst == 0:
                udp.wait_until_ns(round(t0 + i * gap))
            tx[i] = self.send(train + i // SEGMENT, i % SEGMENT)
        return tx

    def _train_gso(self, train: int, count: int, tx: dict[int, int]) -> bool:
        """An unpaced train in batches of GSO_SEGMENTS datagrams per system call; every
        packet of a batch carries the batch's send time. False (nothing sent) when the
        kernel has no UDP GSO."""

        def stamp(buf: bytearray, offset: int, i: int, now: int) -> None:
            udp.HEADER.pack_into(
                buf, offset, udp.MAGIC, udp.KIND_TRAIN_UP, self.token,
                train + i // SEGMENT, i % SEGMENT, now, 0,
            )  # fmt: skip
            tx[i] = now

        sent = udp.send_train_batches(self.sock, count, self.size, stamp)
        if sent == 0:
            self.gso = False
            tx.clear()
            return False
        for i in range(sent, count):  # refused mid-train: the rest one datagram at a time
            tx[i] = self.send(train + i // SEGMENT, i % SEGMENT)
        return True

    def pairs(self, train: int, npairs: int, spacing_s: float) -> dict[int, int]:
        tx: dict[int, int] = {}
        t0 = time.perf_counter_ns()
        for i in range(npairs):
            udp.wait_until_ns(round(t0 + i * spacing_s * 1e9))
            tx[2 * i] = self.send(train, 2 * i)
            tx[2 * i + 1] = self.send(train, 2 * i + 1)
        return tx


def fetch_arrivals(
    client: ControlClient, trains: list[int], expect: int, wait_s: float
) -> dict[int, dict[int, int]]:
    ask = ProbeReportRequest(tuple(trains), expect, int(max(0.0, wait_s) * 1000))
    report = ProbeReport.from_wire(client.request(ask.to_wire(), timeout=wait_s + client.timeout))
    out: dict[int, dict[int, int]] = {tid: {} for tid in report.trains}
    for tid, arrivals in report.trains.items():
        for seq, t in arrivals:
            out[tid].setdefault(seq, t)  # a duplicated packet: its first copy
    return out


def _report_train(
    client: ControlClient,
    train: int,
    count: int,
    wait_s: float,
    extra: dict[int, int] | None = None,
) -> tuple[dict[int, int], dict[int, dict[int, int]]]:
    """Arrivals of a train sent as segments (see TrainSender.train), keyed by packet index; and
    those of the `extra` trains (id -> packets expected: the pairs), asked for with the first
    segments so a long path pays one round trip for both."""
    ids = [train + k for k in range(len(segments(count)))]
    out: dict[int, int] = {}
    others: dict[int, dict[int, int]] = {}
    for i in range(0, len(ids), REPORT_SEGMENTS):
        chunk = ids[i : i + REPORT_SEGMENTS]
        expect = sum(segments(count)[i : i + REPORT_SEGMENTS])
        more = list(extra or {}) if i == 0 else []
        expect += sum((extra or {}).values()) if i == 0 else 0
        rx = fetch_arrivals(client, chunk + more, expect, wait_s if i == 0 else min(wait_s, 0.2))
        for tid in chunk:
            for seq, t in rx.get(tid, {}).items():
                out[(tid - train) * SEGMENT + seq] = t
        others.update({tid: rx.get(tid, {}) for tid in more})
    return out, others


def measure_upload(
    client: ControlClient,
    sock: socket.socket,
    budget_s: float = 1.5,
    mtu: int = 1500,
    link_bps: float | None = None,
) -> CapacityEstimate | None:
    """Capacity client -> serve within about budget_s seconds. link_bps: the egress
    interface's speed, a bound no estimate may exceed."""
    deadline = time.monotonic() + budget_s
    size = udp.udp_payload_size(client.family, mtu)
    wire = udp.wire_bytes(client.family, size)
    sender = TrainSender(sock, client.udp_token, size)
    base_id = int.from_bytes(os.urandom(3), "big") << 4

    def left() -> float:
        return max(0.0, deadline - time.monotonic())

    # 1. A short unpaced train: a first rate, and how fast this host can send at all.
    tx_a = sender.train(base_id, PROBE_TRAIN_LEN, None, wire)
    rx_a = fetch_arrivals(client, [base_id], PROBE_TRAIN_LEN, min(1.0, left()))
    score_a = score_train(tx_a, rx_a.get(base_id, {}).items(), PROBE_TRAIN_LEN, wire, link_bps)
    rough = score_a.rate_bps
    # 2. Pairs, spaced so each pair meets an empty bottleneck queue (5x a pair's
    #    transmission time at the rough rate), within a quarter of what is left.
    npairs = PAIRS
    spacing = 0.002 if rough is None else max(0.0005, 5 * 2 * wire * 8 / rough)
    npairs = max(4, min(PAIRS, int(0.25 * left() / spacing)))
    # 3. The main train: unpaced and long, so a token bucket runs dry in its first half
    #    and competing traffic gets a small share of the bottleneck. If the rough train
    #    lost most of itself (a queue of a few packets), mini-trains instead.
    mini = bool(rough and score_a.loss > LOSSY)
    # Let the first train drain before the pairs. Its report holding every packet says it
    # has: serve answers once the last arrived, so no packet of it is left in a queue.
    if len(rx_a.get(base_id, {})) < PROBE_TRAIN_LEN:
        time.sleep(min(0.05, left() / 10))
    tx_p = sender.pairs(base_id + 1, npairs, spacing)
    time.sleep(min(spacing, left() / 10))
    if mini and rough:
        per_train_s = MINI * wire * 8 / (MINI_LOAD * rough)
        n_b = MINI * max(MIN_MINI + 3, min(MINI_TRAINS, int(0.5 * left() / per_train_s)))
        tx_b = sender.train(base_id + 2, n_b, MINI_LOAD * rough, wire, MINI)
    else:
        # Bursty arrivals make a 48-packet rough rate a guess: size the train for twice it.
        n_b = train_len(2 * rough if rough and score_a.bursty else rough, wire)
        tx_b = sender.train(base_id + 2, n_b, None, wire)
    rx_b, rx_p = _report_train(
        client, base_id + 2, n_b, min(1.0, left()), extra={base_id + 1: 2 * npairs}
    )
    arrivals_b = rx_b.items()
    if mini:
        score_b = score_mini_trains(tx_b, arrivals_b, n_b, wire)
    else:
        score_b = score_train(tx_b, arrivals_b, n_b, wire, link_bps)
        if too_short(score_b, n_b, wire) and left() > 0.3:
            assert score_b.rate_bps is not None
            n_c = train_len(score_b.rate_bps, wire)
            tx_c = sender.train(base_id + 6, n_c, None, wire)
            arrivals_c = _report_train(client, base_id + 6, n_c, min(1.0, left()))[0].items()
            score_c = score_train(tx_c, arrivals_c, n_c, wire, link_bps)
            if score_c.rate_bps is not None:
                score_b = score_c
    if score_b.rate_bps is None:
        score_b = score_a
    pairs = capprobe(tx_p, rx_p.get(base_id + 1, {}), npairs, wire)
    return combine(pairs, score_b, "up", link_bps, score_a.loss)


# -- download (serve -> client): serve sends a train, we timestamp ----------------------------
def measure_download(
    client: ControlClient,
    sock: socket.socket,
    budget_s: float = 1.0,
    mtu: int = 1500,
    hint_bps: float | None = None,
    link_bps: float | None = None,
) -> CapacityEstimate | None:
    """Capacity serve -> client. hint_bps (e.g. the upload estimate) sizes the train (short
    on slow paths, long on fast ones); it does not bias the estimate. link_bps: this host's
    interface speed, a bound no estimate may exceed."""
    deadline = time.monotonic() + budget_s
    size = udp.udp_payload_size(client.family, mtu)
    wire = udp.wire_bytes(client.family, size)
    if not ensure_registered(client, sock, deadline):
        return None
    # An unpaced train first; if most of it was lost (a small bottleneck queue),
    # mini-trains, as for the upload.
    count = train_len(hint_bps, wire)
    score = _download_train(client, sock, size, wire, 0.0, deadline, count, link_bps=link_bps)
    unpaced_loss = score.loss if score is not None else None
    if (
        score is not None
        and score.loss > LOSSY
        and score.rate_bps
        and deadline - time.monotonic() > 0.2
    ):
        rate = MINI_LOAD * score.rate_bps
        per_train_s = MINI * wire * 8 / rate
        left = deadline - time.monotonic()
        n = MINI * max(MIN_MINI + 3, min(MINI_TRAINS, int(0.5 * left / per_train_s)))
        mini = _download_train(client, sock, size, wire, rate, deadline, n, MINI)
        if mini is not None and mini.rate_bps:
            score = mini
    if score is not None and too_short(score, count, wire) and deadline - time.monotonic() > 0.3:
        assert score.rate_bps is not None
        n = train_len(score.rate_bps, wire)
        longer = _download_train(client, sock, size, wire, 0.0, deadline, n, link_bps=link_bps)
        if longer is not None and longer.rate_bps:
            score = longer
    if score is None:
        return None
    return combine(None, score, "down", link_bps, unpaced_loss)


# The most packets register_acked reads: the echoes' late replies and serve's answer are a
# few dozen; a connected UDP socket hears only serve, so more is no answer of ours.
MAX_WAITING = 256


def register(client: ControlClient, sock: socket.socket) -> None:
    """Tell serve where download trains go, before they are asked for: sent once the RTT
    echoes are in, its answer waits in the socket while the upload probe runs, and
    measure_download finds it there instead of spending a round trip on it."""
    with contextlib.suppress(OSError):  # lost or refused: measure_download registers itself
        sock.send(udp.pack(udp.KIND_REGISTER, client.udp_token))


def ensure_registered(client: ControlClient, sock: socket.socket, deadline: float) -> bool:
    """serve knows where download trains go: its answer to an earlier `register` waits in
    the socket, or a registration now is answered before `deadline` (three tries: UDP may
    drop it; it is tiny)."""
    if register_acked(sock):
        return True
    for _ in range(3):
        register(client, sock)
        if _wait(sock, min(0.3, max(0.0, deadline - time.monotonic()))) and register_acked(sock):
            return True
    return False


def register_acked(sock: socket.socket) -> bool:
    """Whether serve's answer to an earlier `register` is among the packets waiting (late
    echo replies may be too; they are no longer wanted)."""
    acked = False
    for _ in range(MAX_WAITING):
        if not select.select([sock], [], [], 0)[0]:
            break
        try:
            data, _a, _t, _k = udp.recv_stamped(sock)
        except OSError:
            break
        pkt = udp.unpack(data)
        acked = acked or (pkt is not None and pkt.kind == udp.KIND_REGISTER_ACK)
    return acked


def _download_train(
    client: ControlClient,
    sock: socket.socket,
    size: int,
    wire: int,
    rate_bps: float,
    deadline: float,
    count: int,
    burst: int = 1,
    link_bps: float | None = None,
) -> TrainScore | None:
    """One train from serve, scored."""
    got = download_arrivals(client, sock, size, rate_bps, deadline, count, burst)
    if got is None:
        return None
    tx, rx = got
    if burst > 1:
        return score_mini_trains(tx, rx.items(), count, wire, burst)
    return score_train(tx, rx.items(), count, wire, link_bps)


def download_arrivals(
    client: ControlClient,
    sock: socket.socket,
    size: int,
    rate_bps: float,
    deadline: float,
    count: int,
    burst: int = 1,
    quiet_s: float = 0.1,
) -> tuple[dict[int, int], dict[int, int]] | None:
    """One train from serve, back to back (rate_bps 0) or paced in groups of `burst`:
    (serve's send times, this host's kernel arrival times) by packet index, None when serve
    refused it. Longer than serve's per-train limit, it is asked for as back-to-back
    segments (requests sent together, so serve starts each as soon as the last one is
    out). The wait ends quiet_s after the last packet that came."""
    base = int.from_bytes(os.urandom(3), "big") << 4
    sizes = segments(count)
    for k, n in enumerate(sizes):
        client.send(ProbeTrain(base + k, n, size, round(rate_bps / 1000), burst).to_wire())
    rx: dict[int, int] = {}
    tx: dict[int, int] = {}
    quiet_until = deadline
    while len(rx) < count and _wait(sock, min(deadline, quiet_until) - time.monotonic()):
        try:
            data, _a, t, _k = udp.recv_stamped(sock)
        except OSError:
            break
        pkt = udp.unpack(data)
        if pkt and pkt.kind == udp.KIND_TRAIN_DOWN and 0 <= pkt.train - base < len(sizes):
            i = (pkt.train - base) * SEGMENT + pkt.seq
            rx.setdefault(i, t)
            tx.setdefault(i, pkt.client_ns)
            quiet_until = time.monotonic() + quiet_s
    for _ in sizes:
        done = client.recv(timeout=max(0.5, deadline - time.monotonic()) + client.timeout)
        if ErrorReply.of(done) is not None:
            return None
    return tx, rx


def _wait(sock: socket.socket, timeout: float) -> bool:
    if timeout <= 0:
        return False
    r, _, _ = select.select([sock], [], [], timeout)
    return bool(r)


# Which probe a received packet (bytes, source address) answers, by index; None: not ours.
AnswerOf = Callable[[bytes, Any], int | None]


def send_pairs(
    sock: socket.socket,
    pkts: list[bytes],
    addr: Any,
    npairs: int,
    spacing_s: float,
    timeout: float,
    answer_of: AnswerOf,
) -> tuple[dict[int, int], dict[int, int]]:
    """Send `npairs` back-to-back pairs `spacing_s` apart and take the answers in between
    and until all arrived or `timeout` passed: (send times, kernel arrival times of the
    first answer to each) by packet index."""
    tx: dict[int, int] = {}
    rx: dict[int, int] = {}
    udp.enable_rx_timestamps(sock)
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)

    def collect() -> None:
        try:
            data, src, t, _k = udp.recv_stamped(sock, 65535)
        except OSError:
            return
        k = answer_of(data, src)
        if k is not None:
            rx.setdefault(k, t)

    for i in range(npairs):
        for k in (2 * i, 2 * i + 1):
            tx[k] = time.time_ns()
            with contextlib.suppress(OSError):
                sock.sendto(pkts[k], addr)
        until = time.monotonic() + spacing_s
        while _wait(sock, until - time.monotonic()):
            collect()
    until = time.monotonic() + timeout
    while len(rx) < 2 * npairs and _wait(sock, until - time.monotonic()):
        collect()
    return tx, rx


# -- peerless: ICMP echo pairs --------------------------------------------------------------
def peerless_pairs(
    host: str, npairs: int = 12, spacing_s: float = 0.01, size: int = 1472, timeout: float = 1.0
) -> CapacityEstimate | None:
    """Pairs of large ICMP echo requests; the spacing of the replies is set by the narrowest
    link of the round trip. Lower confidence: no train, replies may be rate limited or
    deprioritised by routers, and the return path is mixed in. Needs root or ping sockets."""
    infos = socket.getaddrinfo(host, None, socket.AF_UNSPEC, socket.SOCK_DGRAM)
    family, _, _, _, addr = infos[0]
    sock, raw = open_icmp(family)
    payload_len = udp.udp_payload_size(family) if size > 1472 else size
    wire = udp.wire_bytes(family, payload_len)  # ICMP header is 8 bytes, like UDP
    ident = os.getpid() & 0xFFFF
    reply_kind = 129 if family == socket.AF_INET6 else 0
    with sock:
        if not raw:
            sock.connect(addr)
            ident = sock.getsockname()[1] & 0xFFFF
        base = int.from_bytes(os.urandom(2), "big") & 0x7FFF
        payload = bytes(payload_len)
        pkts = [
            icmp_echo_packet(family, ident, (base + i) & 0xFFFF, payload) for i in range(2 * npairs)
        ]
        tx, rx = send_pairs(
            sock,
            pkts,
            addr,
            npairs,
            spacing_s,
            timeout,
            lambda data, _src: _icmp_answer(data, family, raw, ident, reply_kind, base),
        )
    pairs = capprobe(tx, rx, npairs, wire)
    if pairs is None:
        return None
    dispersions = [
        rx[2 * i + 1] - rx[2 * i] for i in range(npairs) if 2 * i in rx and 2 * i + 1 in rx
    ]
    spread = (
        statistics.pstdev(dispersions) / statistics.mean(dispersions)
        if len(dispersions) > 1 and statistics.mean(dispersions) > 0
        else 0.0
    )
    return peerless_estimate(
        pairs,
        "peerless-icmp-pairs",
        "peerless ICMP pairs (no serve): round-trip bottleneck, lower confidence",
        0.35 if spread < 0.5 else 0.25,
    )


def peerless_estimate(
    pairs: tuple[float, float], method: str, note: str, confidence: float
) -> CapacityEstimate:
    """A CapProbe result without a peer: (rate bit/s, share of sender-limited pairs). Mostly
    sender-limited pairs say only that the path is at least this fast."""
    rate, sender_limited = pairs
    if sender_limited > 0.5:
        note += "; most pairs were sender-limited: the path is at least this fast"
    return CapacityEstimate(
        mbps=rate / 1e6,
        method=method,
        confidence=0.2 if sender_limited > 0.5 else confidence,
        pairs_mbps=rate / 1e6,
        limited_by="sender" if sender_limited > 0.5 else None,
        note=note,
    )


def _icmp_answer(
    data: bytes, family: int, raw: bool, ident: int, reply_kind: int, base: int
) -> int | None:
    """The index of the echo request `data` answers (None: not one of our replies)."""
    parsed = parse_icmp_reply(data, family, raw)
    if parsed is None:
        return None
    kind, rid, rseq = parsed
    if kind == reply_kind and (not raw or rid == ident):
        return (rseq - base) & 0xFFFF
    return None
