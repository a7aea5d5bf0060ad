"""TTL-limited probes per hop (`tcpwizard path HOST`): traceroute, mtr and tracepath in one.

Three ways to probe, each bounded in count and wall time:

* ``icmp``: ICMP echo requests on a raw socket (root): routers answer "time exceeded", the
  target "echo reply" (never rate limited by Linux);
* ``udp``: UDP datagrams to a closed port on an ordinary socket with IP_RECVERR, as
  tracepath does, so no root is needed: the kernel queues every ICMP error (time exceeded,
  port unreachable, fragmentation needed) with the router's address on the socket's error
  queue;
* ``tcp``: a TCP connect (SYN) to an open port per probe, with IP_RECVERR: routers' "time
  exceeded" arrive on the error queue, the target answers SYN-ACK or RST (no root either).

Probes go out round-robin over the TTLs, `interval` apart, so each router sees one probe per
round and a link is never loaded by them. After the hops, the path MTU is searched with
don't-fragment probes to the target (sizes from this host's interface MTU down): a router
that cannot forward says "fragmentation needed" / "packet too big" with its next-hop MTU; when
large probes vanish with no such answer while small ones arrive, the path has a PMTU black
hole, located by the last hop that large probes still reach.

Why one module of this size: the three probe kinds (UDP, TCP SYN, ICMP echo) share one per-
hop state and one receive loop for the ICMP errors that answer all of them; alone each is a
fragment of that loop.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import errno
import ipaddress
import json
import os
import select
import socket
import struct
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass

from tcpwizard.exitcodes import PermissionRequired, Unavailable, UsageError
from tcpwizard.measure.probes.hop_model import (
    HopCounts,
    MtuFinding,
    PathHops,
    ProbeReply,
    analyse,
)
from tcpwizard.measure.probes.hop_settle import loss_floor, probes_wanted, stop_level
from tcpwizard.measure.probes.rtt import icmp_echo_packet
from tcpwizard.measure.probes.syntrace import MAX_TIME_S as MAX_SYN_TIME_S
from tcpwizard.measure.probes.syntrace import syn_trace
from tcpwizard.measure.probes.syntrace_model import SynTrace
from tcpwizard.measure.wire import spec, udp

METHODS = ("auto", "icmp", "udp", "tcp")
MAX_TTL = 30
MAX_COUNT = 1000
MAX_PROBES = 20000  # every probe of a run, all TTLs and the MTU search
# Where loss is not yet placed, probing goes on and the counts are looked at again after
# this much of it: the wait for a look's last answers (at least 0.25 s) is then an eighth
# of the time at most, and a look over 5 hops at 20 ms adds 20 probes per hop.
SETTLE_LOOK_S = 2.0
BASE_UDP_PORT = 33434
MAGIC = b"TWpt"
_PAYLOAD = struct.Struct("!4sH")

# Linux constants Python's socket module does not export.
IP_RECVERR = 11
IPV6_RECVERR = 25
IP_MTU_DISCOVER = 10
IPV6_MTU_DISCOVER = 23
IP_PMTUDISC_DONT = 0
IP_PMTUDISC_PROBE = 3
IPV6_DONTFRAG = 62
SO_EE_ORIGIN_LOCAL = 1
SO_EE_ORIGIN_ICMP = 2
SO_EE_ORIGIN_ICMP6 = 3
_EE = struct.Struct("=IBBBBII")
MAX_OPEN_SOCKETS = 256  # tcp: connects in flight at once (file descriptors)
TCP_SYN_RTO_MS = 950.0  # Linux resends a SYN after 1 s: a later answer is to the resend

# Sizes tried when large probes vanish without an answer (common link MTUs).
COMMON_MTUS = (9000, 8192, 4470, 4352, 2048, 1500, 1492, 1480, 1460, 1400, 1280, 1024, 576)


@dataclass(frozen=True)
class PathOptions:
    method: str = "auto"
    count: int = 10  # probes per hop
    # Then more where loss is not yet placed, within max_time (measure/probes/hop_settle.py);
    # False when the user asked for exactly `count`.
    settle: bool = True
    interval_s: float = 0.02  # between two probes (any TTL)
    timeout_s: float = 1.0  # wait for an answer after the last probe
    max_ttl: int = MAX_TTL
    max_time_s: float = 30.0  # probing stops sending after this (answers are still read)
    port: int | None = None  # tcp: the open port; udp: the first destination port
    mtu: bool = True
    resolve: bool = True
    family: int = 0  # 0: any, 4 or 6
    # SYNs with this host's TCP options per hop (measure/probes/syntrace.py), as root,
    # toward this port (else `port`, else serve's).
    syn_options: bool = True
    syn_port: int | None = None

    def validate(self) -> None:
        if self.method not in METHODS:
            raise UsageError(f"method {self.method!r}: use one of {', '.join(METHODS)}")
        if not 1 <= self.count <= MAX_COUNT:
            raise UsageError(f"--count {self.count}: use 1-{MAX_COUNT}")
        if not 0.0005 <= self.interval_s <= 5.0:
            raise UsageError("--interval: use 0.0005-5 s")
        if not 0.05 <= self.timeout_s <= 10.0:
            raise UsageError("--timeout: use 0.05-10 s")
        if not 1 <= self.max_ttl <= 64:
            raise UsageError(f"--max-hops {self.max_ttl}: use 1-64")
        if not 0.5 <= self.max_time_s <= 600:
            raise UsageError("--max-time: use 0.5-600 s")
        if self.method == "tcp" and not self.port:
            raise UsageError("the tcp method needs an open port (--port)")


class Prober:
    """One probing method: send(ttl, seq, size) and read answers from fds()."""

    def __init__(self, family: int, addr: tuple[object, ...]) -> None:
        self.family = family
        self.addr = addr
        self.sent_ns: dict[int, int] = {}

    def fds(self) -> list[int]:
        raise NotImplementedError

    def write_fds(self) -> list[int]:
        """fds whose writability is an answer (a TCP connect that completed)."""
        return []

    def send(self, ttl: int, seq: int, size: int) -> bool:
        raise NotImplementedError

    def read(self, fd: int) -> list[ProbeReply]:
        raise NotImplementedError

    def expire(self, seq: int) -> None:
        """No answer is expected any more for `seq`."""

    def busy(self) -> bool:
        """Too many probes in flight to send another now (open sockets)."""
        return False

    def close(self) -> None:
        raise NotImplementedError

    def _rtt(self, seq: int, rx_ns: int) -> float | None:
        t0 = self.sent_ns.get(seq)
        return None if t0 is None else max(0.0, (rx_ns - t0) / 1e6)

    def _ttl_opt(self) -> tuple[int, int]:
        if self.family == socket.AF_INET6:
            return socket.IPPROTO_IPV6, socket.IPV6_UNICAST_HOPS
        return socket.IPPROTO_IP, socket.IP_TTL

    def _df(self, sock: socket.socket) -> None:
        """Don't fragment, and ignore a cached path MTU: send the size asked for."""
        with contextlib.suppress(OSError):
            if self.family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, IPV6_MTU_DISCOVER, IP_PMTUDISC_PROBE)
                sock.setsockopt(socket.IPPROTO_IPV6, IPV6_DONTFRAG, 1)
            else:
                sock.setsockopt(socket.IPPROTO_IP, IP_MTU_DISCOVER, IP_PMTUDISC_PROBE)


def _header_len(family: int) -> int:
    return 40 if family == socket.AF_INET6 else 20


def _errqueue(sock: socket.socket, family: int) -> tuple[bytes, int, int, int, int, str, int]:
    """(data, origin, type, code, info, offender, rx_ns) of one error-queue message."""
    data, anc, _flags, _addr = sock.recvmsg(2048, 512, socket.MSG_ERRQUEUE)
    origin = kind = code = info = 0
    offender = ""
    rx_ns = time.time_ns()
    for level, ctype, cdata in anc:
        if level == socket.SOL_SOCKET and ctype == udp.SCM_TIMESTAMPNS and len(cdata) >= 16:
            sec, nsec = struct.unpack_from("@qq", cdata)
            rx_ns = sec * 1_000_000_000 + nsec
        elif (level, ctype) in (
            (socket.IPPROTO_IP, IP_RECVERR),
            (socket.IPPROTO_IPV6, IPV6_RECVERR),
        ):
            _errno, origin, kind, code, _pad, info, _data = _EE.unpack_from(cdata)
            offender = _sockaddr(cdata[_EE.size :])
    return data, origin, kind, code, info, offender, rx_ns


def _sockaddr(raw: bytes) -> str:
    if len(raw) >= 8 and struct.unpack_from("=H", raw)[0] == socket.AF_INET:
        return socket.inet_ntop(socket.AF_INET, raw[4:8])
    if len(raw) >= 24 and struct.unpack_from("=H", raw)[0] == socket.AF_INET6:
        return socket.inet_ntop(socket.AF_INET6, raw[8:24])
    return ""


def _classify(family: int, origin: int, kind: int, code: int) -> str:
    if origin == SO_EE_ORIGIN_ICMP:
        if kind == 11:
            return "ttl"
        if kind == 3 and code == 4:
            return "mtu"
        if kind == 3 and code == 3:
            return "dest"  # port unreachable: the target itself answered
        return "unreach"
    if origin == SO_EE_ORIGIN_ICMP6:
        if kind == 3:
            return "ttl"
        if kind == 2:
            return "mtu"
        if kind == 1 and code == 4:
            return "dest"
        return "unreach"
    return "local"


class UdpProber(Prober):
    """Unprivileged: UDP with IP_RECVERR; the probe's seq rides in its payload."""

    def __init__(self, family: int, addr: tuple[object, ...], port: int) -> None:
        super().__init__(family, addr)
        self.port = port
        self.sock = socket.socket(family, socket.SOCK_DGRAM)
        self.sock.setblocking(False)
        level, opt = (
            (socket.IPPROTO_IPV6, IPV6_RECVERR)
            if family == socket.AF_INET6
            else (socket.IPPROTO_IP, IP_RECVERR)
        )
        self.sock.setsockopt(level, opt, 1)
        udp.enable_rx_timestamps(self.sock)
        self._df(self.sock)

    def fds(self) -> list[int]:
        return [self.sock.fileno()]

    def send(self, ttl: int, seq: int, size: int) -> bool:
        level, opt = self._ttl_opt()
        self.sock.setsockopt(level, opt, ttl)
        payload = _PAYLOAD.pack(MAGIC, seq)
        payload += bytes(max(0, size - _header_len(self.family) - 8 - len(payload)))
        dest = (str(self.addr[0]), self.port, *self.addr[2:])
        for _attempt in range(2):
            self.sent_ns[seq] = time.time_ns()
            try:
                self.sock.sendto(payload, dest)
            except OSError as exc:
                if exc.errno == errno.EMSGSIZE:
                    return False
                # An earlier ICMP error (unreachable) is reported on the next send: the
                # probe did not leave, send it again.
                continue
            return True
        return False

    def read(self, fd: int) -> list[ProbeReply]:
        out: list[ProbeReply] = []
        for _ in range(256):
            try:
                data, origin, kind, code, info, who, rx = _errqueue(self.sock, self.family)
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                # The socket's pending error was reported instead of a queued message.
                continue
            if len(data) < _PAYLOAD.size or data[:4] != MAGIC:
                continue
            seq = _PAYLOAD.unpack_from(data)[1]
            what = _classify(self.family, origin, kind, code)
            rtt = self._rtt(seq, rx)
            if what == "local" or rtt is None:
                continue
            out.append(ProbeReply(seq, what, who, rtt, info if what == "mtu" else None))
        with contextlib.suppress(OSError):
            self.sock.recv(65535)  # a datagram the target sent back (an open UDP port)
        return out

    def close(self) -> None:
        self.sock.close()


class IcmpProber(Prober):
    """Root: ICMP echo on a raw socket; answers matched by identifier and sequence."""

    def __init__(self, family: int, addr: tuple[object, ...]) -> None:
        super().__init__(family, addr)
        proto = socket.IPPROTO_ICMPV6 if family == socket.AF_INET6 else socket.IPPROTO_ICMP
        try:
            self.sock = socket.socket(family, socket.SOCK_RAW, proto)
        except PermissionError:
            raise PermissionRequired(
                "ICMP probes need root (a raw socket); use --method udp or tcp"
            ) from None
        self.sock.setblocking(False)
        udp.enable_rx_timestamps(self.sock)
        self._df(self.sock)
        self.ident = (os.getpid() ^ int.from_bytes(os.urandom(2), "big")) & 0xFFFF

    def fds(self) -> list[int]:
        return [self.sock.fileno()]

    def send(self, ttl: int, seq: int, size: int) -> bool:
        level, opt = self._ttl_opt()
        self.sock.setsockopt(level, opt, ttl)
        payload = bytes(max(0, size - _header_len(self.family) - 8))
        pkt = icmp_echo_packet(self.family, self.ident, seq, payload)
        self.sent_ns[seq] = time.time_ns()
        try:
            self.sock.sendto(pkt, self.addr)
        except OSError as exc:
            if exc.errno == errno.EMSGSIZE:
                return False
            raise
        return True

    def read(self, fd: int) -> list[ProbeReply]:
        out: list[ProbeReply] = []
        for _ in range(256):
            try:
                data, addr, rx, _k = udp.recv_stamped(self.sock, 65535)
            except (BlockingIOError, InterruptedError):
                break
            who = str(addr[0]) if isinstance(addr, tuple) else ""
            parsed = self._parse(data)
            if parsed is None:
                continue
            seq, what, mtu = parsed
            rtt = self._rtt(seq, rx)
            if rtt is not None:
                out.append(ProbeReply(seq, what, who, rtt, mtu))
        return out

    def _parse(self, data: bytes) -> tuple[int, str, int | None] | None:
        v6 = self.family == socket.AF_INET6
        if not v6:
            if len(data) < 20:
                return None
            data = data[(data[0] & 0x0F) * 4 :]
        if len(data) < 8:
            return None
        kind, code = data[0], data[1]
        if (not v6 and kind == 0) or (v6 and kind == 129):
            ident, seq = struct.unpack_from("!HH", data, 4)
            return (seq, "dest", None) if ident == self.ident else None
        if v6:
            what = {3: "ttl", 2: "mtu", 1: "unreach"}.get(kind)
            mtu = struct.unpack_from("!I", data, 4)[0] if kind == 2 else None
            inner = data[8 + 40 :]
        else:
            what = "ttl" if kind == 11 else ("mtu" if (kind, code) == (3, 4) else None)
            if kind == 3 and code != 4:
                what = "unreach"
            mtu = struct.unpack_from("!H", data, 6)[0] if (kind, code) == (3, 4) else None
            quoted = data[8:]
            if len(quoted) < 20:
                return None
            inner = quoted[(quoted[0] & 0x0F) * 4 :]
        if what is None or len(inner) < 8:
            return None
        ident, seq = struct.unpack_from("!HH", inner, 4)
        if ident != self.ident:
            return None
        return seq, what, mtu

    def close(self) -> None:
        self.sock.close()


class TcpProber(Prober):
    """Unprivileged: one non-blocking connect (SYN) per probe, IP_RECVERR on each socket."""

    def __init__(self, family: int, addr: tuple[object, ...], port: int) -> None:
        super().__init__(family, addr)
        self.port = port
        self.socks: dict[int, tuple[int, socket.socket]] = {}  # fd -> (seq, socket)
        self.by_seq: dict[int, socket.socket] = {}

    def fds(self) -> list[int]:
        return list(self.socks)

    def write_fds(self) -> list[int]:
        return list(self.socks)

    def busy(self) -> bool:
        return len(self.socks) >= MAX_OPEN_SOCKETS

    def send(self, ttl: int, seq: int, size: int) -> bool:
        s = socket.socket(self.family, socket.SOCK_STREAM)
        s.setblocking(False)
        level, opt = self._ttl_opt()
        s.setsockopt(level, opt, ttl)
        recverr = (
            (socket.IPPROTO_IPV6, IPV6_RECVERR)
            if self.family == socket.AF_INET6
            else (socket.IPPROTO_IP, IP_RECVERR)
        )
        s.setsockopt(*recverr, 1)
        udp.enable_rx_timestamps(s)
        self.sent_ns[seq] = time.time_ns()
        s.connect_ex((str(self.addr[0]), self.port, *self.addr[2:]))
        self.socks[s.fileno()] = (seq, s)
        self.by_seq[seq] = s
        return True

    def read(self, fd: int) -> list[ProbeReply]:
        seq, s = self.socks[fd]
        reply: ProbeReply | None = None
        late = self._rtt(seq, time.time_ns())
        if late is not None and late >= TCP_SYN_RTO_MS:
            # The SYN was lost and the kernel sent it again: that answer is not this probe's.
            self.expire(seq)
            return []
        try:
            _d, origin, kind, code, _info, who, rx = _errqueue(s, self.family)
            what = _classify(self.family, origin, kind, code)
            rtt = self._rtt(seq, rx)
            if what in ("ttl", "unreach") and rtt is not None:
                reply = ProbeReply(seq, what, who, rtt)
        except (BlockingIOError, InterruptedError):
            err = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            rtt = self._rtt(seq, time.time_ns())
            if err in (0, errno.ECONNREFUSED) and rtt is not None:
                reply = ProbeReply(seq, "dest", str(self.addr[0]), rtt)
        except OSError:
            pass
        self.expire(seq)
        return [reply] if reply else []

    def expire(self, seq: int) -> None:
        s = self.by_seq.pop(seq, None)
        if s is not None:
            self.socks.pop(s.fileno(), None)
            s.close()

    def close(self) -> None:
        for seq in list(self.by_seq):
            self.expire(seq)


def resolve_target(host: str, family: int = 0) -> tuple[int, tuple[object, ...]]:
    fam = {4: socket.AF_INET, 6: socket.AF_INET6}.get(family, socket.AF_UNSPEC)
    try:
        infos = socket.getaddrinfo(host, None, fam, socket.SOCK_DGRAM)
    except socket.gaierror as exc:
        raise Unavailable(f"cannot resolve host {host!r}: {exc.strerror}") from None
    except UnicodeError:
        raise Unavailable(f"cannot resolve host {host!r}: invalid name") from None
    f, _, _, _, addr = infos[0]
    return int(f), tuple(addr)


def choose_method(method: str) -> str:
    if method != "auto":
        return method
    return "icmp" if os.geteuid() == 0 else "udp"


def make_prober(method: str, family: int, addr: tuple[object, ...], port: int | None) -> Prober:
    if method == "icmp":
        return IcmpProber(family, addr)
    if method == "tcp":
        assert port is not None
        return TcpProber(family, addr, port)
    return UdpProber(family, addr, port or BASE_UDP_PORT)


class _Run:
    """Sends probes, collects answers, keeps every bound."""

    def __init__(self, prober: Prober, opts: PathOptions) -> None:
        self.prober = prober
        self.opts = opts
        self.seq = 0
        self.sent = 0
        self.meta: dict[int, tuple[int, int]] = {}  # seq -> (ttl, size)
        self.replies: dict[int, ProbeReply] = {}
        self.extra: list[ProbeReply] = []  # "mtu" answers (a probe may get one, then none)
        self.start = time.monotonic()

    def out_of_time(self) -> bool:
        return time.monotonic() - self.start > self.opts.max_time_s or self.sent >= MAX_PROBES

    def send(self, ttl: int, size: int) -> int | None:
        for _ in range(1000):  # bounded: at most ~timeout for the oldest to answer or expire
            if not self.prober.busy():
                break
            self.pump(time.monotonic() + 0.005)
            self.reap()
        self.seq = (self.seq + 1) & 0xFFFF
        seq = self.seq
        self.meta[seq] = (ttl, size)
        self.sent += 1
        ok = self.prober.send(ttl, seq, size)
        return seq if ok else None

    def reap(self) -> None:
        """Give up on probes older than the timeout (closes TCP sockets)."""
        cutoff = time.time_ns() - int(self.opts.timeout_s * 1e9)
        for seq in [s for s, t in self.prober.sent_ns.items() if t < cutoff]:
            self.prober.expire(seq)

    def pump(self, until: float, done: Callable[[], bool] = lambda: False) -> None:
        """Read answers until `until` (monotonic) or done()."""
        while not done():
            left = until - time.monotonic()
            if left <= 0:
                return
            fds = self.prober.fds()
            if not fds:
                time.sleep(min(left, 0.005))
                continue
            poller = select.poll()  # not select(): TCP probes may hold fds above 1023
            writers = set(self.prober.write_fds())
            for fd in fds:
                poller.register(fd, select.POLLIN | (select.POLLOUT if fd in writers else 0))
            for fd, _ev in poller.poll(max(1, int(min(left, 0.05) * 1000))):
                for r in self.prober.read(fd):
                    if r.kind == "mtu":
                        self.extra.append(r)
                    elif r.seq in self.meta:
                        self.replies.setdefault(r.seq, r)

    def wait_for(self, seqs: list[int], timeout: float) -> None:
        pending = set(seqs)
        self.pump(time.monotonic() + timeout, lambda: pending <= set(self.replies))
        for s in seqs:
            self.prober.expire(s)


def _tally(run: _Run, ttls: range, dest_ttl: int | None) -> list[HopCounts]:
    per: dict[int, list[tuple[int, ProbeReply | None]]] = {t: [] for t in ttls}
    for seq in sorted(run.meta, key=lambda s: s):
        ttl, size = run.meta[seq]
        if ttl in per and size == 0:
            per[ttl].append((seq, run.replies.get(seq)))
    counts = []
    for ttl, probes in per.items():
        answered = [r for _, r in probes if r is not None and r.kind in ("ttl", "dest")]
        stamps = [run.prober.sent_ns.get(s, 0) for s, _ in probes]
        counts.append(
            HopCounts(
                ttl=ttl,
                sent=len(probes),
                rtts=tuple(r.rtt_ms for r in answered),
                addresses=tuple(r.address for r in answered),
                destination=dest_ttl is not None and ttl == dest_ttl,
                span_s=(max(stamps) - min(stamps)) / 1e9 if stamps else 0.0,
            )
        )
    return counts


def _dest_ttl(run: _Run) -> int | None:
    ttls = [run.meta[s][0] for s, r in run.replies.items() if r.kind == "dest"]
    return min(ttls) if ttls else None


def trace(host: str, opts: PathOptions) -> PathHops:
    """Probe every hop to `host`; see the module docstring."""
    opts.validate()
    family, addr = resolve_target(host, opts.family)
    method = choose_method(opts.method)
    prober = make_prober(method, family, addr, opts.port)
    run = _Run(prober, opts)
    notes: list[str] = []
    route = route_to(str(addr[0]))
    try:
        # Discovery, 8 TTLs at a time (the target sees few probes beyond its own TTL).
        dest: int | None = None
        last_answer = 0
        for first in range(1, opts.max_ttl + 1, 8):
            batch = []
            for ttl in range(first, min(first + 8, opts.max_ttl + 1)):
                s = run.send(ttl, 0)
                if s is not None:
                    batch.append(s)
                run.pump(time.monotonic() + opts.interval_s)
            run.wait_for(batch, opts.timeout_s)
            dest = _dest_ttl(run)
            answered = [run.meta[s][0] for s in run.replies]
            last_answer = max(answered, default=last_answer)
            if dest is not None or run.out_of_time():
                break
            if last_answer < first - 8:  # nothing answered for two batches: give up
                break
        top = dest if dest is not None else min(opts.max_ttl, last_answer + 1)
        if dest is None:
            notes.append(f"{host} did not answer within {opts.max_ttl} hops")
        ttls = range(1, top + 1)
        # Rounds over the hops, one probe per hop per round, until count per hop.
        pending: list[int] = []
        for _round in range(opts.count - 1):
            if run.out_of_time():
                notes.append(f"stopped sending after {opts.max_time_s:g} s (--max-time)")
                break
            for ttl in ttls:
                s = run.send(ttl, 0)
                if s is not None:
                    pending.append(s)
                run.pump(time.monotonic() + opts.interval_s)
            # Expire what is older than the timeout, so TCP sockets do not pile up.
            cutoff = time.time_ns() - int(opts.timeout_s * 1e9)
            while pending and prober.sent_ns.get(pending[0], 0) < cutoff:
                prober.expire(pending.pop(0))
        run.wait_for(pending, opts.timeout_s)
        counts = _tally(run, ttls, dest)
        if opts.settle:
            counts = _settle_loss(run, ttls, dest, counts, notes)
        # A probe beyond the target's TTL in discovery is not a probe of any hop here.
        names = _resolve_names({a for c in counts for a in c.addresses}) if opts.resolve else {}
        hops, jump, jump_ms, loss_at, end_loss, limited = analyse(counts, names)
        mtu = None
        if opts.mtu and dest is not None:
            rtt = max((h.rtt_median_ms or 0.0) for h in hops) / 1e3
            mtu = _mtu_search(run, family, addr, dest, _answer_wait(rtt, opts.timeout_s))
    finally:
        prober.close()
    syn = _syn_options(opts, family, str(addr[0]), route.mtu, top, notes)
    return PathHops(
        host=host,
        address=str(addr[0]),
        family=6 if family == socket.AF_INET6 else 4,
        method=method,
        port=opts.port if method != "icmp" else None,
        hops=hops,
        reached=dest is not None,
        rtt_jump_hop=jump,
        rtt_jump_ms=jump_ms,
        loss_start_hop=loss_at,
        end_loss_pct=end_loss,
        rate_limited_hops=limited,
        mtu=mtu,
        probes_sent=run.sent,
        elapsed_s=time.monotonic() - run.start,
        notes=tuple(notes),
        gateway=route.gateway,
        dev=route.dev,
        syn=syn,
    )


def _answer_wait(rtt_s: float, timeout_s: float) -> float:
    """How long to wait for the last probes' answers: three round trips and 0.1 s of
    scheduling, at least 0.25 s, at most the timeout. One round trip brings an answer back;
    the other two allow for the queue the probes meet on a loaded path, up to as much again
    each way. The 0.1 s and the 0.25 s floor are the MTU search's figures as it had them
    (the wait it used since its first version), not measured across a bench: a late answer
    costs one unplaced probe, and the settling probes again (measure/probes/hop_settle.py)."""
    return min(timeout_s, max(0.25, 3 * rtt_s + 0.1))


def _settle_loss(
    run: _Run, ttls: range, dest: int | None, counts: list[HopCounts], notes: list[str]
) -> list[HopCounts]:
    """More probes, SETTLE_LOOK_S at a time, while the counts do not yet say where loss
    begins (measure/probes/hop_settle.py), within the run's time and probe budget."""
    opts = run.opts
    level = stop_level(SETTLE_LOOK_S, opts.max_time_s)
    floor = loss_floor(opts.interval_s, opts.max_time_s, level)
    while targets := probes_wanted(counts, floor, level):
        if run.out_of_time():
            notes.append(
                f"loss not yet placed when --max-time ({opts.max_time_s:g} s) ran out: "
                "a longer --max-time sends more probes"
            )
            break
        pending: list[int] = []
        look = time.monotonic() + SETTLE_LOOK_S
        while time.monotonic() < look and not run.out_of_time():
            for ttl in targets:
                s = run.send(ttl, 0)
                if s is not None:
                    pending.append(s)
                run.pump(time.monotonic() + opts.interval_s)
            run.reap()
        slowest = max((max(c.rtts) for c in counts if c.rtts), default=0.0) / 1e3
        run.wait_for(pending, _answer_wait(slowest, opts.timeout_s))
        counts = _tally(run, ttls, dest)
    return counts


def _syn_options(
    opts: PathOptions, family: int, address: str, mtu: int, top: int, notes: list[str]
) -> SynTrace | None:
    """The SYN's options hop by hop, where they can be probed; a note where not."""
    if not opts.syn_options:
        return None
    if os.geteuid() != 0:
        notes.append("SYN options per hop: need root (raw sockets)")
        return None
    port = opts.syn_port or opts.port or spec.SERVE_PORT
    try:
        return syn_trace(address, port, mtu, top, max_time_s=min(opts.max_time_s, MAX_SYN_TIME_S))
    except OSError as exc:  # no route for the raw socket, a local firewall: the hops stand
        notes.append(f"SYN options per hop: {exc.strerror or exc}")
        return None


def _resolve_names(addresses: set[str], budget_s: float = 1.0) -> dict[str, str]:
    """Reverse names that come back within the budget (in all); the rest stay numeric."""
    out: dict[str, str] = {}
    if not addresses:
        return out
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=min(8, len(addresses)))
    futures = {pool.submit(socket.getnameinfo, (a, 0), socket.NI_NAMEREQD): a for a in addresses}
    done, _ = concurrent.futures.wait(futures, timeout=budget_s)
    for f in done:
        with contextlib.suppress(OSError):
            name = f.result()[0]
            if name and name != futures[f]:
                out[futures[f]] = name
    pool.shutdown(wait=False, cancel_futures=True)
    return out


@dataclass(frozen=True)
class RouteInfo:
    mtu: int
    gateway: str | None
    dev: str | None


def route_to(address: str) -> RouteInfo:
    """The route toward `address`: its interface's MTU (or the route's own, when set, but
    not a cached path MTU), gateway and device, from `ip -j route get`."""
    fam = "-6" if ipaddress.ip_address(address).version == 6 else "-4"
    gateway = dev = None
    try:
        proc = subprocess.run(
            ["ip", "-j", fam, "route", "get", address],
            capture_output=True, text=True, timeout=5, check=False,
        )  # fmt: skip
        route = json.loads(proc.stdout)[0] if proc.returncode == 0 else {}
        gateway, dev = route.get("gateway"), route.get("dev")
        if dev:
            with open(f"/sys/class/net/{dev}/mtu") as f:
                return RouteInfo(int(f.read()), gateway, dev)
    except (OSError, ValueError, subprocess.SubprocessError, IndexError, KeyError, TypeError):
        pass
    return RouteInfo(1500, gateway, dev)


def _mtu_search(
    run: _Run,
    family: int,
    addr: tuple[object, ...],
    dest_ttl: int,
    timeout: float,
) -> MtuFinding:
    """Path MTU with don't-fragment probes; a black hole located by TTL. At most ~40
    probes and a dozen timeouts."""
    local = route_to(str(addr[0])).mtu
    floor = 1280 if family == socket.AF_INET6 else 576
    used = run.sent
    size = min(local, 65535)  # an IPv4 packet's length field, and IPv6 without jumbograms
    said_hop: int | None = None
    said_addr: str | None = None
    ok_size: int | None = None
    failed: list[int] = []
    ttl_of = _ttl_by_address(run)
    for _step in range(12):
        if run.sent - used > 40:
            break
        seqs = [s for s in (run.send(64, size), run.send(64, size)) if s is not None]
        if not seqs:  # this host could not send it (larger than its own route allows)
            size = max([m for m in COMMON_MTUS if m < size] + [floor])
            continue
        n_before = len(run.extra)
        run.wait_for(seqs, timeout)
        if any(run.replies.get(s) is not None and run.replies[s].kind == "dest" for s in seqs):
            ok_size = size
            break
        told = [r for r in run.extra[n_before:] if r.mtu and r.mtu < size]
        if told:
            said_addr = told[0].address
            said_hop = ttl_of.get(said_addr)
            size = max(floor, told[0].mtu or floor)
            continue
        failed.append(size)
        # Nothing came back: try every common smaller size at once.
        smaller = [m for m in COMMON_MTUS if m < size and m >= floor]
        if not smaller:
            break
        batch = {m: [s for s in (run.send(64, m), run.send(64, m)) if s is not None]
                 for m in smaller}  # fmt: skip
        run.wait_for([s for v in batch.values() for s in v], timeout)
        arrived = [m for m, v in batch.items()
                   if any(run.replies.get(s) is not None and run.replies[s].kind == "dest"
                          for s in v)]  # fmt: skip
        if not arrived:
            break
        ok_size = max(arrived)
        failed += [m for m in smaller if m > ok_size]
        break
    if ok_size is None:
        return MtuFinding(local, None, said_hop, said_addr, False, None, None,
                          run.sent - used, "no probe reached the target")  # fmt: skip
    if not failed or min(failed) <= ok_size:
        return MtuFinding(local, ok_size, said_hop, said_addr, False, None, None,
                          run.sent - used, "")  # fmt: skip
    # Large probes vanished without an answer: a black hole. Narrow the size (bisection)
    # and find the last hop the smallest vanishing size still reaches.
    lo, hi = ok_size, min(failed)
    for _ in range(6):
        if hi - lo <= 8 or run.sent - used > 60:
            break
        mid = (lo + hi) // 2
        seqs = [s for s in (run.send(64, mid), run.send(64, mid)) if s is not None]
        run.wait_for(seqs, timeout)
        if any(run.replies.get(s) is not None and run.replies[s].kind == "dest" for s in seqs):
            lo = mid
        else:
            hi = mid
    seqs = [s for s in (run.send(t, hi) for t in range(1, dest_ttl)) if s is not None]
    run.wait_for(seqs, timeout)
    reached = [run.meta[s][0] for s in seqs if run.replies.get(s) is not None]
    last = max(reached, default=None)
    last_addr = None
    if last is not None:
        last_addr = next(run.replies[s].address for s in seqs if run.meta[s][0] == last
                         and run.replies.get(s) is not None)  # fmt: skip
    return MtuFinding(
        local, lo, last, last_addr, True, last, last_addr, run.sent - used,
        f"packets over {lo} B vanish after hop {last if last else '?'} and no "
        "'fragmentation needed' comes back",
    )  # fmt: skip


def _ttl_by_address(run: _Run) -> dict[str, int]:
    out: dict[str, int] = {}
    for seq, r in run.replies.items():
        if r.kind == "ttl":
            ttl = run.meta[seq][0]
            out[r.address] = min(ttl, out.get(r.address, ttl))
    return out
