"""Path characterization: RTT, loss, bottleneck capacity and BDP within a time budget.

With a serve at the far end: UDP echo for RTT, upload pairs+train and a download train.
Without one: TCP connect time to a known open port and/or ICMP echo, and peerless ICMP
pairs for capacity, all with lower confidence and the missing evidence named in `notes`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from tcpwizard.exitcodes import PermissionRequired
from tcpwizard.measure.model import CapacityEstimate, PathEstimate, RttStats
from tcpwizard.measure.probes import capacity, rtt, synpairs
from tcpwizard.measure.wire import spec
from tcpwizard.measure.wire.control import ControlClient, resolve
from tcpwizard.measure.wire.protocol import AuthFailed, PeerUnavailable

Progress = Callable[[str], None]


def bdp_bytes(cap: CapacityEstimate | None, rtt_stats: RttStats) -> int | None:
    """Bandwidth-delay product from the *minimum* RTT: queueing delay is not path."""
    if cap is None:
        return None
    return round(cap.mbps * 1e6 / 8 * rtt_stats.min / 1000.0)


def probe(
    host: str,
    port: int = 5301,
    *,
    secret: bytes | None = None,
    tcp_port: int | None = None,
    budget_s: float = spec.PROBE_BUDGET_S,
    download: bool = True,
    progress: Progress | None = None,
    serve: bool = True,
    connect_rtt: bool = True,
    control: ControlClient | None = None,
) -> PathEstimate:
    """Characterize the path to `host`. Raises PeerUnavailable when nothing answers at all
    (or the name does not resolve), AuthFailed when serve rejects our secret. serve=False
    goes peerless at once; connect_rtt=False keeps `tcp_port` for SYN pairs only (an iperf3
    port, where a connection that sends nothing ends a one-off server). `control`: an open
    connection to serve to probe over (not closed here)."""
    say = progress or (lambda _m: None)
    start = time.monotonic()
    deadline = start + budget_s
    infos = resolve(host, port)
    notes: list[str] = []
    if not serve:
        return _peerless(host, infos, tcp_port, deadline, start, notes, say, connect_rtt)
    if control is not None:  # the caller's open connection, left open for what follows
        return _with_serve(control, host, port, deadline, start, download, notes, say)
    try:
        say(f"connecting to tcpwizard serve at {host} port {port}")
        wait = max(0.5, min(2.0, budget_s / 2))  # the budget holds: no wait for a starved serve
        client = ControlClient(host, port, secret, timeout=wait, starved_wait=wait)
    except AuthFailed:
        raise
    except PeerUnavailable as exc:
        notes.append(f"no serve: {exc}; peerless probes, lower confidence")
        return _peerless(host, infos, tcp_port, deadline, start, notes, say)
    with client:
        return _with_serve(client, host, port, deadline, start, download, notes, say)


ECHOES = 20  # UDP echoes for the RTT
SHORT_BUDGET_S = 1.5  # below this the probe sends half as many


def _left(deadline: float) -> float:
    return max(0.0, deadline - time.monotonic())


def interface_bps(address: str) -> float | None:
    """The speed of the interface packets to `address` leave by, when the driver states one:
    no path through it can be faster, whatever bursty arrivals suggest."""
    from tcpwizard.checks.netinfo import lookup_egress

    iface, _reason = lookup_egress(address)
    if iface is None or iface.is_loopback or not iface.speed_mbps:
        return None
    return iface.speed_mbps * 1e6


def _with_serve(
    client: ControlClient,
    host: str,
    port: int,
    deadline: float,
    start: float,
    download: bool,
    notes: list[str],
    say: Progress,
) -> PathEstimate:
    udp = client.udp_socket()
    try:
        say("RTT: UDP echo")
        # Ten echoes 10 ms apart find the minimum as well as twenty on a quiet path; a
        # short budget (--quick) keeps the other 0.1 s for the capacity trains.
        count = ECHOES if _left(deadline) >= SHORT_BUDGET_S else ECHOES // 2
        stats = rtt.udp_echo(udp, client.udp_token, count=count, timeout=min(1.0, _left(deadline)))
        udp_ok = stats is not None
        if stats is None:
            notes.append(
                "no UDP echo replies (UDP blocked?): RTT from TCP connect time; "
                "capacity not measured"
            )
            stats = rtt.require_reply(
                rtt.tcp_connect(
                    str(client.address[0]), port, count=5, timeout=min(1.0, _left(deadline))
                ),
                "TCP connect",
                host,
            )
        up: CapacityEstimate | None = None
        down: CapacityEstimate | None = None
        if udp_ok:
            if download:
                capacity.register(client, udp)
            say("capacity: packet pairs and trains (upload)")
            link = interface_bps(str(client.address[0]))
            up = capacity.measure_upload(client, udp, budget_s=_left(deadline) * 0.6, link_bps=link)
            if up is None:
                notes.append("upload capacity probe got no arrivals (UDP blocked?)")
            if download and _left(deadline) > 0.2:
                say("capacity: train (download)")
                hint = up.mbps * 1e6 if up else None
                down = capacity.measure_download(
                    client, udp, budget_s=_left(deadline) * 0.9, hint_bps=hint, link_bps=link
                )
                if down is None:
                    notes.append("download train did not arrive (UDP blocked inbound?)")
            elif download:
                notes.append("download capacity skipped: time budget used up")
    finally:
        udp.close()
    return PathEstimate(
        rtt=stats,
        capacity=up,
        bdp_bytes=bdp_bytes(up, stats),
        duration_s=time.monotonic() - start,
        address=str(client.address[0]),
        port=port,
        peer=True,
        capacity_down=down,
        notes=tuple(notes),
    )


def _peerless(
    host: str,
    infos: list[Any],
    tcp_port: int | None,
    deadline: float,
    start: float,
    notes: list[str],
    say: Progress,
    connect_rtt: bool = True,
) -> PathEstimate:
    address = str(infos[0][4][0])
    stats: RttStats | None = None
    if tcp_port is not None and connect_rtt:
        say(f"RTT: TCP connect to port {tcp_port}")
        stats = rtt.tcp_connect(host, tcp_port, count=10, timeout=min(1.0, _left(deadline)))
        if stats is None:
            notes.append(f"TCP port {tcp_port} did not answer")
    elif tcp_port is None:
        notes.append("no --tcp-port given: TCP connect RTT skipped")
    icmp_ok = True
    if stats is None:
        say("RTT: ICMP echo")
        try:
            stats = rtt.icmp_echo(host, count=10, timeout=min(1.0, _left(deadline)))
        except PermissionRequired as exc:
            icmp_ok = False
            notes.append(str(exc))
        if icmp_ok and stats is None:
            notes.append("no ICMP echo replies")
    if stats is None:
        raise PeerUnavailable(f"{host} did not answer any probe: " + "; ".join(notes))
    cap: CapacityEstimate | None = None
    if tcp_port is not None and _left(deadline) > 0.3:
        # SYN pairs first: they measure the forward direction and pass where ICMP is filtered.
        say(f"capacity: peerless TCP SYN pairs to port {tcp_port}")
        try:
            cap = synpairs.syn_pairs(host, tcp_port, timeout=min(1.0, _left(deadline)))
        except PermissionRequired as exc:
            notes.append(f"peerless capacity: {exc}")
        if cap is None:
            notes.append(f"TCP SYN pairs to port {tcp_port} got no usable answers")
    if cap is None and icmp_ok and _left(deadline) > 0.3:
        say("capacity: peerless ICMP pairs")
        try:
            cap = capacity.peerless_pairs(host, timeout=min(1.0, _left(deadline)))
        except PermissionRequired as exc:
            notes.append(f"peerless capacity: {exc}")
        if cap is None:
            notes.append("peerless ICMP pairs got no usable replies")
    return PathEstimate(
        rtt=stats,
        capacity=cap,
        bdp_bytes=bdp_bytes(cap, stats),
        duration_s=time.monotonic() - start,
        address=address,
        port=tcp_port or 0,
        peer=False,
        notes=tuple(notes),
    )
