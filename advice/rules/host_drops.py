"""`interface` from packets dropped inside a host during the transfer (measure/observe/hostload.py):
the sender's transmit ring and qdisc, the receiver's receive ring, FIFO and input backlog.

Drops inside a host cost the transfer what loss on the path costs: the loss-based bound
(Mathis) at the drop rate. They hold the transfer when that bound at the host's drops alone
is below the probed capacity, and when they are at least half the sender's retransmissions
(otherwise the path's own loss is the larger part).
"""

from __future__ import annotations

from tcpwizard.advice.evidence import Candidate, Direction, Evidence, mss, probe_capacity, rtt_ms
from tcpwizard.advice.rules.host_cpu import cpu_bound
from tcpwizard.advice.window_law import mathis_mbps
from tcpwizard.checks.model import Fix, FixKind, HostRole
from tcpwizard.measure.model import ModeResult
from tcpwizard.measure.observe.hostload import HostDrops

HOST_SHARE = 0.5  # of the retransmissions: the host's drops are the loss that counts


def lost_by(drops: HostDrops, side: str) -> int:
    """The drops that belong to this end's role in the transfer."""
    if side == "sender":
        return drops.tx_dropped + drops.qdisc_drops
    return drops.rx_dropped + drops.rx_missed_errors + drops.rx_fifo_errors + drops.softnet_dropped


def drop_fixes(host: HostRole, drops: HostDrops, side: str) -> tuple[Fix, ...]:
    iface = drops.interface or "<iface>"

    def fix(i: str, kind: FixKind, key: str, value: str, command: str, why: str) -> Fix:
        return Fix(f"host-drops-{i}", kind, host, key, value, command, why, answers=("interface",))

    ring = "tx" if side == "sender" else "rx"
    out = [
        fix(
            "ring",
            "other",
            f"{iface} {ring} ring",
            "",
            f"ethtool -g {iface}; ethtool -G {iface} {ring} <the maximum -g reports>",
            f"a larger {ring} ring holds a burst the driver or CPU cannot take at once",
        )
    ]
    if side == "sender":
        out.append(
            fix(
                "txqueuelen",
                "other",
                f"{iface} txqueuelen",
                "10000",
                f"ip link set dev {iface} txqueuelen 10000",
                "a longer transmit queue (and qdisc limit) holds the sender's bursts",
            )
        )
    else:
        out += [
            fix(
                "backlog",
                "sysctl",
                "net.core.netdev_max_backlog",
                "30000",
                "sysctl -w net.core.netdev_max_backlog=30000",
                "the per-CPU input queue: packets beyond it are dropped (softnet dropped)",
            ),
            fix(
                "budget",
                "sysctl",
                "net.core.netdev_budget",
                "600",
                "sysctl -w net.core.netdev_budget=600",
                "packets per NAPI poll round: more of them before time_squeeze defers the rest",
            ),
        ]
    return tuple(out)


def rule(ev: Evidence, d: Direction) -> Candidate | None:
    m = d.current
    if m is None or m.bytes <= 0:
        return None
    cap, rtt = probe_capacity(ev, d), rtt_ms(ev, d)
    # Segments the sender put on the wire: those delivered and those sent again.
    segments = max(1, m.bytes // mss(d) + m.retransmits)
    best: tuple[int, HostRole, str, HostDrops] | None = None
    for role, side, load in (
        (d.sender_role, "sender", m.sender_load),
        (d.receiver_role, "receiver", m.receiver_load),
    ):
        if load is None or load.drops is None:
            continue
        lost = lost_by(load.drops, side)
        if lost > 0 and (best is None or lost > best[0]):
            best = (lost, role, side, load.drops)
    if best is None:
        return None
    lost, host, side, drops = best
    if m.retransmits > 0 and lost < HOST_SHARE * m.retransmits:
        return None
    bound = mathis_mbps(mss(d), rtt or 0.0, lost / segments)
    if cap is None or bound is None or bound >= cap.mbps or m.throughput_mbps >= cap.mbps * 0.85:
        return None
    counts = ", ".join(
        f"{k} {v}"
        for k, v in (
            ("qdisc drops", drops.qdisc_drops),
            ("tx_dropped", drops.tx_dropped),
            ("rx_dropped", drops.rx_dropped),
            ("rx_missed_errors", drops.rx_missed_errors),
            ("rx_fifo_errors", drops.rx_fifo_errors),
            ("softnet dropped", drops.softnet_dropped),
            ("time_squeeze", drops.time_squeeze),
        )
        if v
    )
    where = f" on {drops.interface}" if drops.interface else ""
    return Candidate(
        d.name,
        "interface",
        0.85,
        host,
        f"{d.name}: the {side} ({host}) dropped {lost} packets inside the host{where} during "
        "the transfer; that loss alone bounds TCP below the path's capacity.",
        (
            f"{host}: {counts} during the transfer ({lost / segments:.2%} of "
            f"{segments} segments; {m.retransmits} retransmitted)",
            f"loss bound at that rate {bound:.1f} Mbit/s < capacity {cap.mbps:.1f} Mbit/s",
        ),
        fixes=drop_fixes(host, drops, side),
    )


def held_by_host(m: ModeResult) -> bool:
    """Either end's CPU or its drops held `m` back: its rate is not the path's."""
    for side, load in (("sender", m.sender_load), ("receiver", m.receiver_load)):
        if load is None:
            continue
        if cpu_bound(load) is not None:
            return True
        lost = lost_by(load.drops, side) if load.drops is not None else 0
        if lost > 0 and lost >= HOST_SHARE * m.retransmits:
            return True
    return False
