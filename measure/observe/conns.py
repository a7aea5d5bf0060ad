"""Live TCP connections of this host through inet_diag (netlink SOCK_DIAG), not `ss` text.

pyroute2's DiagSocket sends the request and splits the reply; the INET_DIAG_INFO attribute
is decoded with this project's own `struct tcp_info` parser (measure/observe/tcpinfo.py),
which knows the newer fields (snd_wnd, rcv_wnd, ...) and reads the window-scale nibbles right. The
kernel gives TCP_INFO of every socket in this network namespace to any user (as `ss -ti`
shows), so no root is needed; the owning process of another user's socket needs root.

`observe()` samples all connections a few times over an interval and turns counter deltas
into rates and time shares: what held each connection back during that interval, not since
it was opened.
"""

from __future__ import annotations

import ipaddress
import socket
import struct
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tcpwizard.measure.observe.tcpinfo import TcpInfo, parse_tcp_info

# include/uapi/linux/inet_diag.h: attribute types, and the request bits (1 << (type - 1)).
INET_DIAG_MEMINFO = 1
INET_DIAG_INFO = 2
INET_DIAG_CONG = 4
INET_DIAG_SKMEMINFO = 8
EXTENSIONS = (
    1 << (INET_DIAG_MEMINFO - 1)
    | 1 << (INET_DIAG_INFO - 1)
    | 1 << (INET_DIAG_CONG - 1)
    | 1 << (INET_DIAG_SKMEMINFO - 1)
)
TCP_ESTABLISHED = 1
TIMER_ZERO_WINDOW_PROBE = 4  # idiag_timer: the persist timer (the peer's window is zero)
# SK_MEMINFO_* (include/uapi/linux/sock_diag.h): rmem_alloc, rcvbuf, wmem_alloc, sndbuf, ...
_SKMEM = struct.Struct("=9I")


class ConnsUnavailable(OSError):
    """inet_diag could not be asked (no netlink, no pyroute2)."""


@dataclass(frozen=True)
class ConnKey:
    local: str
    local_port: int
    remote: str
    remote_port: int

    def __str__(self) -> str:
        here = _hostport(self.local, self.local_port)
        return f"{here} -> {_hostport(self.remote, self.remote_port)}"


def _hostport(addr: str, port: int) -> str:
    return f"[{addr}]:{port}" if ":" in addr else f"{addr}:{port}"


def plain_address(addr: str) -> str:
    """::ffff:10.0.0.1 (an IPv4 peer of a dual-stack socket) as 10.0.0.1."""
    try:
        ip = ipaddress.ip_address(addr)
    except ValueError:
        return addr
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    return str(ip)


@dataclass(frozen=True)
class DiagRecord:
    """One socket as inet_diag reports it at one instant."""

    key: ConnKey
    inode: int
    uid: int
    timer: int
    rqueue: int  # bytes received, not yet read by the application
    wqueue: int  # bytes sent, not yet acknowledged
    congestion_control: str
    rcvbuf: int | None  # SK_MEMINFO_RCVBUF: the receive buffer's size now
    sndbuf: int | None
    info: TcpInfo


def _raw_attr(msg: Any, name: str) -> bytes | None:
    """The payload of one netlink attribute, undecoded."""
    attr = msg.get_attr(name)
    if isinstance(attr, str):  # attributes pyroute2 shows as hex ("00:02:...")
        try:
            return bytes.fromhex(attr.replace(":", ""))
        except ValueError:
            return None
    if attr is None or not hasattr(attr, "offset"):
        return None
    data: bytes = attr.data
    return bytes(data[attr.offset + 4 : attr.offset + attr.length])


def _record(msg: Any) -> DiagRecord | None:
    get = msg.__getitem__
    raw = _raw_attr(msg, "INET_DIAG_INFO")
    if raw is None:
        return None
    rcvbuf = sndbuf = None
    skmem = _raw_attr(msg, "INET_DIAG_SKMEMINFO")
    if skmem is not None and len(skmem) >= _SKMEM.size:
        mem = _SKMEM.unpack_from(skmem)
        rcvbuf, sndbuf = mem[1], mem[3]
    cong = msg.get_attr("INET_DIAG_CONG")
    key = ConnKey(
        plain_address(str(get("idiag_src"))),
        int(get("idiag_sport")),
        plain_address(str(get("idiag_dst"))),
        int(get("idiag_dport")),
    )
    return DiagRecord(
        key=key,
        inode=int(get("idiag_inode")),
        uid=int(get("idiag_uid")),
        timer=int(get("idiag_timer")),
        rqueue=int(get("idiag_rqueue")),
        wqueue=int(get("idiag_wqueue")),
        congestion_control=str(cong or ""),
        rcvbuf=rcvbuf,
        sndbuf=sndbuf,
        info=parse_tcp_info(raw),
    )


def read_connections() -> tuple[DiagRecord, ...]:
    """Every established TCP socket of this network namespace (IPv4 and IPv6)."""
    try:
        from pyroute2 import DiagSocket
    except ImportError as exc:  # pragma: no cover - a dependency of the package
        raise ConnsUnavailable(f"pyroute2 is missing: {exc}") from None
    out: list[DiagRecord] = []
    try:
        with DiagSocket() as ds:
            ds.bind()
            for family in (socket.AF_INET, socket.AF_INET6):
                for msg in ds.get_sock_stats(
                    family=family, states=1 << TCP_ESTABLISHED, extensions=EXTENSIONS
                ):
                    rec = _record(msg)
                    if rec is not None:
                        out.append(rec)
    except OSError as exc:
        raise ConnsUnavailable(f"inet_diag (netlink sock_diag) failed: {exc}") from None
    return tuple(out)


# ---------------------------------------------------------------------------- observe


@dataclass(frozen=True)
class ConnObservation:
    """One connection over the sampling interval: rates from counter deltas, shares of the
    interval from the TCP_INFO chrono counters, and the extremes of the windows sampled."""

    key: ConnKey
    inode: int
    uid: int
    seconds: float
    send_mbps: float  # bytes the peer acknowledged, per second
    recv_mbps: float  # bytes received, per second
    busy: float  # share of the interval with data in flight (TCP_INFO busy_time)
    rwnd_limited: float  # share of the interval stalled by the peer's receive window
    sndbuf_limited: float  # share of the interval stalled by our send buffer
    rtt_ms: float
    min_rtt_ms: float
    rcv_rtt_ms: float  # the receiver's RTT estimate (0: none yet)
    snd_cwnd: int
    snd_mss: int
    snd_wnd_max: int  # the window the peer offered, largest and smallest seen
    snd_wnd_min: int
    rcv_wnd_max: int  # the window we offered, largest and smallest seen
    rcv_wnd_min: int
    zero_window: bool  # the peer's window was zero (persist timer or snd_wnd 0) in a sample
    retransmits: int  # segments retransmitted in the interval
    segs_out: int  # segments sent in the interval
    ooo_packets: int  # out-of-order segments received in the interval (loss upstream)
    delivery_rate_mbps: float
    rqueue_max: int  # unread bytes in our receive queue, most seen
    rcvbuf: int | None
    sndbuf: int | None
    congestion_control: str
    snd_wscale: int | None
    rcv_wscale: int | None
    window_scaling: bool  # TCPI_OPT_WSCALE: both SYNs carried the option
    samples: int
    # The highest delivery rate any sample reported (a burst a policer's bucket let pass).
    delivery_rate_max_mbps: float = 0.0
    # Share of the samples whose last delivery-rate sample the kernel marked app-limited
    # (tcpi_delivery_rate_app_limited: nothing left to send with room in cwnd); None when
    # the kernel does not report the flag or this host sent nothing.
    app_limited: float | None = None
    # Bytes in flight (sent, not acknowledged: Send-Q minus tcpi_notsent_bytes) at the
    # samples: the lowest, the median and the highest.
    inflight_min: int = 0
    inflight_p50: int = 0
    inflight_max: int = 0
    zero_window_samples: int = 0  # samples in which the peer's window was zero
    rcv_space: int = 0  # tcpi_rcv_space: what the reader took per RTT, as autotuning saw it
    rqueue_p50: int = 0  # unread bytes in our receive queue, the median sample
    # The window the peer offered in the first and the last sample: one shrinking over the
    # interval is the peer's buffer filling with data its reader has not taken.
    snd_wnd_first: int = 0
    snd_wnd_last: int = 0
    sack: bool = True  # TCPI_OPT_SACK: both SYNs offered selective acknowledgements

    @property
    def sending(self) -> bool:
        """This host is the data sender of the connection (it moves more than it takes)."""
        return self.send_mbps >= self.recv_mbps

    @property
    def rate_mbps(self) -> float:
        return max(self.send_mbps, self.recv_mbps)


TCPI_OPT_SACK = 2
TCPI_OPT_WSCALE = 4


def _delta(first: TcpInfo, last: TcpInfo, name: str) -> int:
    a, b = first.get(name), last.get(name)
    return max(0, b - a) if a is not None and b is not None else 0


def combine(series: Sequence[DiagRecord], seconds: float) -> ConnObservation:
    """One observation from the samples of one connection (oldest first)."""
    first, last = series[0].info, series[-1].info
    span = max(seconds, 1e-6)
    wnds = [r.info.get("snd_wnd") or 0 for r in series]
    rcv_wnds = [r.info.get("rcv_wnd") or 0 for r in series]
    zeros = sum(
        r.timer == TIMER_ZERO_WINDOW_PROBE or (r.info.get("snd_wnd") == 0 and r.wqueue > 0)
        for r in series
    )
    inflight = sorted(max(0, r.wqueue - (r.info.get("notsent_bytes") or 0)) for r in series)
    flags = [r.info.get("app_limited_flags") for r in series]
    sent = _delta(first, last, "bytes_acked") > 0
    app_limited = (
        sum(f & 1 for f in flags if f is not None) / len(flags)
        if sent and None not in flags
        else None
    )
    v = last.values
    return ConnObservation(
        key=series[-1].key,
        inode=series[-1].inode,
        uid=series[-1].uid,
        seconds=seconds,
        send_mbps=_delta(first, last, "bytes_acked") * 8 / span / 1e6,
        recv_mbps=_delta(first, last, "bytes_received") * 8 / span / 1e6,
        busy=min(1.0, _delta(first, last, "busy_time") / 1e6 / span),
        rwnd_limited=min(1.0, _delta(first, last, "rwnd_limited") / 1e6 / span),
        sndbuf_limited=min(1.0, _delta(first, last, "sndbuf_limited") / 1e6 / span),
        rtt_ms=v.get("rtt", 0) / 1e3,
        min_rtt_ms=v.get("min_rtt", 0) / 1e3,
        rcv_rtt_ms=v.get("rcv_rtt", 0) / 1e3,
        snd_cwnd=v.get("snd_cwnd", 0),
        snd_mss=v.get("snd_mss", 0),
        snd_wnd_max=max(wnds, default=0),
        snd_wnd_min=min(wnds, default=0),
        rcv_wnd_max=max(rcv_wnds, default=0),
        rcv_wnd_min=min(rcv_wnds, default=0),
        zero_window=zeros > 0,
        retransmits=_delta(first, last, "total_retrans"),
        segs_out=_delta(first, last, "segs_out"),
        ooo_packets=_delta(first, last, "rcv_ooopack"),
        delivery_rate_mbps=v.get("delivery_rate", 0) * 8 / 1e6,
        rqueue_max=max(r.rqueue for r in series),
        rcvbuf=series[-1].rcvbuf,
        sndbuf=series[-1].sndbuf,
        congestion_control=series[-1].congestion_control,
        snd_wscale=last.snd_wscale,
        rcv_wscale=last.rcv_wscale,
        window_scaling=bool(v.get("options", 0) & TCPI_OPT_WSCALE),
        sack=bool(v.get("options", 0) & TCPI_OPT_SACK),
        samples=len(series),
        delivery_rate_max_mbps=max((r.info.get("delivery_rate") or 0) for r in series) * 8 / 1e6,
        app_limited=app_limited,
        inflight_min=inflight[0],
        inflight_p50=inflight[len(inflight) // 2],
        inflight_max=inflight[-1],
        zero_window_samples=zeros,
        rcv_space=v.get("rcv_space", 0),
        rqueue_p50=sorted(r.rqueue for r in series)[len(series) // 2],
        snd_wnd_first=wnds[0] if wnds else 0,
        snd_wnd_last=wnds[-1] if wnds else 0,
    )


Reader = Callable[[], Sequence[DiagRecord]]


def observe(
    interval_s: float = 1.0,
    samples: int = 10,
    reader: Reader = read_connections,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[ConnObservation, ...]:
    """Sample every established connection `samples` times over `interval_s`; connections
    seen in the first and the last sample are observed (ones that opened or closed in
    between have no interval to judge)."""
    samples = max(2, samples)
    step = interval_s / (samples - 1)
    series: dict[tuple[ConnKey, int], list[DiagRecord]] = {}
    first_keys: set[tuple[ConnKey, int]] = set()
    last_keys: set[tuple[ConnKey, int]] = set()
    start = end = 0.0
    for i in range(samples):
        if i:
            sleep(max(0.0, start + i * step - clock()))
        recs = reader()
        # The interval runs from the first answer to the last (the first call may import
        # and open the netlink socket: that time is not part of what the counters saw).
        end = clock()
        keys = {(r.key, r.inode) for r in recs}
        if i == 0:
            first_keys, start = keys, end
        last_keys = keys
        for r in recs:
            series.setdefault((r.key, r.inode), []).append(r)
    elapsed = end - start
    return tuple(
        combine(series[k], elapsed)
        for k in sorted(first_keys & last_keys, key=lambda k: (str(k[0]), k[1]))
    )


# ---------------------------------------------------------------------------- owners


@dataclass(frozen=True)
class Owner:
    pid: int
    name: str
    cmdline: str
    user: str


def owners() -> dict[tuple[str, int, str, int], Owner]:
    """(local, port, remote, port) -> the process holding that socket (psutil). Sockets of
    other users' processes are missing without root (the kernel hides their fds)."""
    import psutil

    out: dict[tuple[str, int, str, int], Owner] = {}
    try:
        conns = psutil.net_connections(kind="tcp")
    except (psutil.Error, OSError):
        return out
    cache: dict[int, Owner | None] = {}
    for c in conns:
        laddr, raddr = c.laddr, c.raddr
        if c.pid is None or not laddr or not raddr or c.status != psutil.CONN_ESTABLISHED:
            continue
        if c.pid not in cache:
            try:
                p = psutil.Process(c.pid)
                with p.oneshot():
                    cache[c.pid] = Owner(c.pid, p.name(), " ".join(p.cmdline()), p.username())
            except (psutil.Error, OSError):
                cache[c.pid] = None
        owner = cache[c.pid]
        if owner is not None:
            key = (
                plain_address(laddr.ip),  # type: ignore[union-attr]
                int(laddr.port),  # type: ignore[union-attr]
                plain_address(raddr.ip),  # type: ignore[union-attr]
                int(raddr.port),  # type: ignore[union-attr]
            )
            out[key] = owner
    return out
