"""Keyword builders for `conns` test objects (observations as inet_diag would give them)."""

from __future__ import annotations

from typing import Any

from tcpwizard.advice.conns import judge
from tcpwizard.conns_report import ConnEntry, ConnsReport
from tcpwizard.exitcodes import ExitCode
from tcpwizard.measure.observe.conns import ConnKey, ConnObservation, Owner

SYSCTLS = {"net.ipv4.tcp_rmem": "4096 131072 6291456", "net.ipv4.tcp_wmem": "4096 16384 4194304"}


def obs(**kw: Any) -> ConnObservation:
    base: dict[str, Any] = dict(
        key=ConnKey("10.0.0.1", 43210, "10.0.0.2", 5201),
        inode=1234,
        uid=0,
        seconds=1.0,
        send_mbps=24.0,
        recv_mbps=0.01,
        busy=1.0,
        rwnd_limited=0.0,
        sndbuf_limited=0.0,
        rtt_ms=50.5,
        min_rtt_ms=50.1,
        rcv_rtt_ms=0.0,
        snd_cwnd=200,
        snd_mss=1448,
        snd_wnd_max=160_000,
        snd_wnd_min=160_000,
        rcv_wnd_max=65_000,
        rcv_wnd_min=60_000,
        zero_window=False,
        retransmits=0,
        segs_out=2000,
        ooo_packets=0,
        delivery_rate_mbps=25.0,
        rqueue_max=0,
        rcvbuf=131_072,
        sndbuf=4_194_304,
        congestion_control="bbr",
        snd_wscale=7,
        rcv_wscale=7,
        window_scaling=True,
        samples=11,
    )
    base.update(kw)
    return ConnObservation(**base)


IPERF3 = Owner(4242, "iperf3", "iperf3 -c 10.0.0.2 -t 30", "alice")
RSYNC = Owner(5151, "rsync", "rsync -a big/ dtn:/data/", "bob")


def report() -> ConnsReport:
    """A host with a window-limited upload, a slow download reader and an idle ssh."""
    up = obs(rwnd_limited=0.4, busy=0.9)
    down = obs(
        key=ConnKey("10.0.0.1", 50000, "10.0.0.3", 873),
        inode=99,
        send_mbps=0.01,
        recv_mbps=8.0,
        rcv_rtt_ms=30.2,
        rqueue_max=3_000_000,
        rcvbuf=6_291_456,
    )
    idle = obs(
        key=ConnKey("10.0.0.1", 22, "10.0.0.9", 51000), inode=7, send_mbps=0.0, recv_mbps=0.0
    )
    entries = (
        ConnEntry(up, IPERF3, judge(up, SYSCTLS)),
        ConnEntry(down, RSYNC, judge(down, SYSCTLS)),
        ConnEntry(idle, None, judge(idle, SYSCTLS)),
    )
    return ConnsReport("near", 1.0, 5, entries, ("busy only",), (), ExitCode.WARNING)
