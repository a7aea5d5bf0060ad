"""The egress NIC at 10-100 Gbit/s: fq pacing with a per-flow maxrate, jumbo frames with
MTU probing, ring sizes, interrupt coalescing, Ethernet flow control and segmentation
offloads, each judged against the target path (docs/audit.md, "100G host").

Why one module of this size: the list of NIC checks, each short; the module is the list the
100G audit walks.
"""

from __future__ import annotations

import math

from tcpwizard.checks.base import AuditEnv, Check, EgressCheck
from tcpwizard.checks.behaviour_checks import MtuProbing
from tcpwizard.checks.host_rates import (
    ESNET_100G,
    ESNET_LINUX,
    FLOW_PLACEMENT_BPS,
    HOST_TUNING_BPS,
    NAPI_WEIGHT,
    HostCheck,
    per_flow_bps,
    wire_bits,
)
from tcpwizard.checks.model import Finding, Fix, InterfaceInfo, Severity
from tcpwizard.checks.nicfacts import (
    OFFLOADS,
    QdiscInfo,
    parse_coalesce,
    parse_offloads,
    parse_pause,
    parse_qdiscs,
    parse_rings,
)
from tcpwizard.units import format_rate

# fq keeps maxrate as a u32 of bytes per second: no per-flow cap above this is expressible.
FQ_MAXRATE_LIMIT_BPS = 0xFFFFFFFE * 8
# The kernel's softirq time limit when net.core.netdev_budget_usecs is not visible here:
# its default is 2 jiffies, 2000 us at HZ=1000 (net/core/dev.c).
DEFAULT_BUDGET_USECS = 2000


def _tc_rate(bps: float) -> str:
    """A tc rate no higher than `bps`, in whole Mbit/s (tc's 'mbit' is 10^6 bit/s)."""
    return f"{max(1, math.floor(bps / 1e6))}mbit"


def _queue_fixes(check: HostCheck, iface: InterfaceInfo, q: QdiscInfo | None, opts: str) -> Fix:
    """fq on every transmit queue: on a multiqueue NIC (root mq) one fq per queue keeps the
    queues' own locks; elsewhere fq at the root."""
    tail = f"fq {opts}".strip()
    if q is not None and q.root == "mq" and q.leaves:
        parents = " ".join(p for p, _ in q.leaves)
        command = f"for p in {parents}; do tc qdisc replace dev {iface.name} parent $p {tail}; done"
    else:
        command = f"tc qdisc replace dev {iface.name} root {tail}"
    return check.command_fix(f"qdisc {iface.name}", tail, command)


class FqPacing(HostCheck, EgressCheck):
    id = "fq_pacing"
    answers = ("congestion", "policer")
    title = "fq pacing and per-flow maxrate"
    keys = ("tc qdisc (egress)", "net.core.default_qdisc")
    why = (
        "A NIC faster than the path sends each flow's window in line-rate bursts that "
        "overrun the slower hop's buffer; fq paces every flow, and its maxrate holds each "
        "flow to its share of the path."
    )
    guideline = f"{ESNET_LINUX}: 'Packet Pacing' (fq with maxrate)"
    severity_rule = (
        "warn when the NIC is faster than the target and the egress is not fq; info when fq "
        "lacks a maxrate there; info without fq at >= 1 Gbit/s per flow"
    )

    def judge(self, env: AuditEnv, iface: InterfaceInfo) -> Finding:
        default = env.optional("net.core.default_qdisc")
        text = env.host.command("tc", "-j", "qdisc", "show", "dev", iface.name)
        q = parse_qdiscs(text) if text is not None else None
        kinds = q.kinds if q is not None else ((iface.qdisc,) if iface.qdisc else ())
        flow = per_flow_bps(env)
        nic = iface.speed_mbps * 1e6 if iface.speed_mbps else None
        # Pacing is needed where the NIC can burst faster than the path carries.
        needs = nic is not None and nic > env.target.rate_bps
        observed = f"{iface.name}: {'/'.join(sorted(set(kinds))) or '?'}"
        if q is not None and any(r is not None for r in q.maxrates_bps):
            shown = {format_rate(r) for r in q.maxrates_bps if r is not None}
            observed += f" maxrate {'/'.join(sorted(shown))}"
        observed += f"; NIC {format_rate(nic) if nic else 'speed unknown'}"
        maxrate = _tc_rate(flow) if flow < FQ_MAXRATE_LIMIT_BPS else ""
        expected = f"fq maxrate {maxrate}" if needs and maxrate else "fq"
        if iface.is_loopback or kinds == ("noqueue",):
            return self.finding("ok", observed, expected, f"{iface.name} has no queue to pace in.")
        if not kinds:
            return self.unavailable(
                "the egress qdisc", env.host.why("cmd:tc -j qdisc show dev " + iface.name)
            )
        fq_everywhere = all(k == "fq" for k in kinds)
        if fq_everywhere:
            rates = q.maxrates_bps if q is not None else ()
            if not needs or not maxrate:
                return self.finding("ok", observed, expected, "Every flow is paced by fq.")
            if q is None:  # fq, but whether it has a maxrate cannot be read here
                why = env.host.why(f"cmd:tc -j qdisc show dev {iface.name}")
                return self.unavailable(f"{iface.name}'s fq maxrate", why)
            if rates and all(r is not None and r <= flow * 1.001 for r in rates):
                return self.finding(
                    "ok", observed, expected, "fq paces each flow within its share."
                )
            return self.finding(
                "info",
                observed,
                expected,
                f"fq paces, but no maxrate holds a flow to its {format_rate(flow)} share of "
                f"the path: the {format_rate(nic or 0)} NIC can still burst above it.",
                (_queue_fixes(self, iface, q, f"maxrate {maxrate}"),),
            )
        if env.network.fq_available is False:
            return self.finding(
                "info",
                observed + "; this kernel has no fq qdisc (CONFIG_NET_SCH_FQ not set)",
                expected,
                "No fq pacing, and this kernel cannot provide it: TCP paces with its own timer "
                "(more CPU per packet), and nothing caps a flow's rate.",
            )
        if not needs and flow < HOST_TUNING_BPS:
            return self.finding(
                "ok",
                observed,
                expected,
                f"At {format_rate(flow)} per flow, on a NIC no faster than the path, pacing "
                "changes little.",
            )
        severity: Severity = "warn" if needs else "info"
        if env.target.source == "default":
            severity = "info"
        fixes = [_queue_fixes(self, iface, q, f"maxrate {maxrate}" if needs and maxrate else "")]
        if default is not None and default != "fq":
            fixes.append(self.fix("net.core.default_qdisc", "fq"))
        reason = (
            f"the {format_rate(nic or 0)} NIC sends each flow in bursts faster than the "
            f"{format_rate(env.target.rate_bps)} path; a shallow buffer on the way drops them"
            if needs
            else "bursts leave at line rate (only BBR paces without it, by its own timer at "
            "more CPU per packet)"
        )
        return self.finding(
            severity, observed, expected, f"The egress is not paced by fq: {reason}.", tuple(fixes)
        )


class JumboMtu(HostCheck, EgressCheck):
    id = "jumbo_mtu"
    answers = ("interface", "host-cpu")
    title = "Jumbo frames and MTU probing"
    keys = ("egress MTU", "net.ipv4.tcp_mtu_probing")
    why = (
        "9000-byte packets cut the packets per second (interrupts, softirq passes, ACKs) "
        "about six-fold; a jumbo host without MTU probing stalls on a path with one "
        "1500-byte hop whose ICMP is filtered."
    )
    guideline = f"{ESNET_LINUX}: MTU 9000 where the path carries it, tcp_mtu_probing=1; RFC 4821"
    severity_rule = (
        "warn for MTU >= 9000 without tcp_mtu_probing; info for MTU < 9000 at >= 5 Gbit/s "
        "per flow (whether the path carries 9000 is not known here)"
    )

    def judge(self, env: AuditEnv, iface: InterfaceInfo) -> Finding:
        probing = env.integer("net.ipv4.tcp_mtu_probing")
        flow = per_flow_bps(env)
        observed = f"{iface.name} mtu {iface.mtu}, tcp_mtu_probing {probing}"
        if iface.is_loopback:
            return self.finding("ok", observed, "-", "Loopback.")
        # The very fix the tcp_mtu_probing check gives, so a report lists it once.
        probe_fix = MtuProbing().fix("net.ipv4.tcp_mtu_probing", "1")
        if iface.mtu >= 9000:
            if probing:
                return self.finding("ok", observed, "mtu 9000, probing on", "Jumbo frames, probed.")
            return self.finding(
                "warn",
                observed,
                "tcp_mtu_probing 1",
                f"MTU {iface.mtu} without MTU probing: a path with one 1500-byte hop whose "
                "ICMP 'fragmentation needed' is filtered stalls every connection.",
                (probe_fix,),
                key="net.ipv4.tcp_mtu_probing",
            )
        if flow < FLOW_PLACEMENT_BPS:
            return self.finding(
                "ok",
                observed,
                "mtu 9000 above 5 Gbit/s per flow",
                f"At {format_rate(flow)} per flow the MTU's packet rate is no burden.",
            )
        pps = flow / wire_bits(iface.mtu)
        gain = wire_bits(9000) / wire_bits(iface.mtu)
        fixes: list[Fix] = [
            self.command_fix("mtu", "9000", f"ip link set dev {iface.name} mtu 9000")
        ]
        return self.finding(
            "info",
            observed,
            "mtu 9000 where every hop carries it",
            f"At {format_rate(flow)} per flow, MTU {iface.mtu} means {pps / 1e6:.2g} million "
            f"packets per second; MTU 9000 cuts that {gain:.1f}-fold where every hop carries "
            "it (find out with `tcpwizard path HOST`, which searches the path MTU).",
            tuple(fixes),
        )


class NicRings(HostCheck, EgressCheck):
    id = "nic_rings"
    answers = ("interface",)
    title = "NIC ring sizes"
    keys = ("ethtool -g", "net.core.netdev_budget_usecs")
    why = (
        "Packets that arrive while the receive softirq is busy wait in the ring; a full ring "
        "drops them before the kernel sees them, and TCP halves its window."
    )
    guideline = f"{ESNET_100G}: ring buffers at their maximum (ethtool -G)"
    severity_rule = (
        "warn when a ring is below both its maximum and the packets one flow brings in one "
        "softirq time limit (rate x netdev_budget_usecs / packet size)"
    )

    def judge(self, env: AuditEnv, iface: InterfaceInfo) -> Finding:
        rings = self.nic_setting(env, iface, "-g", parse_rings, "rings", "Loopback has no rings.")
        budget_text = env.optional("net.core.netdev_budget_usecs")
        budget = int(budget_text) if budget_text and budget_text.isdigit() else DEFAULT_BUDGET_USECS
        if isinstance(rings, Finding):
            return rings
        flow = per_flow_bps(env)
        # Packets one flow brings while one softirq run may hold the core: its time limit.
        need = math.ceil(flow * budget / 1e6 / wire_bits(iface.mtu))
        observed = (
            f"{iface.name} rx {rings.rx}/{rings.rx_max} tx {rings.tx}/{rings.tx_max} "
            "(current/maximum)"
        )
        expected = f">= {need} packets ({format_rate(flow)} x {budget} us) or the maximum"
        short = [
            (name, cur, top)
            for name, cur, top in (("rx", rings.rx, rings.rx_max), ("tx", rings.tx, rings.tx_max))
            if cur is not None and top is not None and cur < min(need, top)
        ]
        if short:
            severity: Severity = "warn" if flow >= HOST_TUNING_BPS else "info"
            settings = " ".join(f"{name} {top}" for name, _, top in short)
            return self.finding(
                severity,
                observed,
                expected,
                f"At {format_rate(flow)} per flow one softirq time limit ({budget} us) brings "
                f"{need} packets; the {' and '.join(n for n, _, _ in short)} "
                f"ring{'s hold' if len(short) > 1 else ' holds'} fewer and can grow.",
                (self.command_fix("rings", settings, f"ethtool -G {iface.name} {settings}"),),
            )
        if rings.rx is not None and rings.rx < need:
            return self.finding(
                "info",
                observed,
                expected,
                f"The rx ring is at its maximum yet below the {need} packets one softirq time "
                "limit brings at this rate: keep the receiving core free (IRQ placement) and "
                "watch `ethtool -S` drop counters.",
            )
        return self.finding("ok", observed, expected, "The rings hold what the rate brings.")


class NicCoalescing(HostCheck, EgressCheck):
    id = "nic_coalescing"
    answers = ("interface", "host-cpu")
    title = "Interrupt coalescing"
    keys = ("ethtool -c", "ethtool -g")
    why = (
        "One interrupt per packet costs a core at high packet rates; too long a wait lets "
        "the ring overflow between interrupts."
    )
    guideline = f"{ESNET_100G}: interrupt coalescing (ethtool -C, adaptive-rx)"
    severity_rule = (
        "warn when rx-usecs lets more packets arrive than the rx ring holds; warn (info "
        "below 1 Gbit/s per flow) for fewer packets per interrupt than a NAPI poll takes"
    )

    def judge(self, env: AuditEnv, iface: InterfaceInfo) -> Finding:
        text = env.host.command("ethtool", "-c", iface.name)
        co = parse_coalesce(text) if text is not None else None
        ring_text = env.host.command("ethtool", "-g", iface.name)
        rings = parse_rings(ring_text) if ring_text is not None else None
        if iface.is_loopback:
            return self.finding("ok", "loopback", "-", "Loopback has no interrupts.")
        if co is None:
            return self.unavailable(
                f"{iface.name}'s coalescing", env.host.why(f"cmd:ethtool -c {iface.name}")
            )
        flow = per_flow_bps(env)
        pps = flow / wire_bits(iface.mtu)
        usecs, frames = co.rx_usecs or 0, co.rx_frames or 0
        observed = (
            f"{iface.name} adaptive-rx {'on' if co.adaptive_rx else 'off'}, rx-usecs {usecs}, "
            f"rx-frames {frames}"
        )
        expected = f"adaptive-rx on, or {NAPI_WEIGHT}+ packets per interrupt within the ring"
        adaptive = self.command_fix(
            "coalesce", "adaptive-rx on", f"ethtool -C {iface.name} adaptive-rx on"
        )
        if co.adaptive_rx:
            return self.finding(
                "ok", observed, expected, "The driver adapts coalescing to the rate."
            )
        waiting = pps * usecs / 1e6
        if rings is not None and rings.rx and waiting > rings.rx:
            return self.finding(
                "warn",
                observed,
                expected,
                f"rx-usecs {usecs} lets {waiting:.0f} packets arrive at {format_rate(flow)} "
                f"between interrupts, more than the {rings.rx}-packet rx ring: it overflows.",
                (adaptive,),
            )
        per_irq = max(1.0, min(waiting, frames) if frames else waiting)
        if per_irq >= NAPI_WEIGHT or flow < HOST_TUNING_BPS:
            return self.finding(
                "ok", observed, expected, f"About {per_irq:.0f} packets per interrupt at this rate."
            )
        return self.finding(
            "warn" if env.target.source != "default" else "info",
            observed,
            expected,
            f"At {format_rate(flow)} per flow ({pps / 1e3:.0f} thousand packets/s) the NIC "
            f"interrupts every {per_irq:.0f} packet(s), fewer than one NAPI poll takes "
            f"({NAPI_WEIGHT}): up to {pps / per_irq / 1e3:.0f} thousand interrupts/s on one core.",
            (adaptive,),
        )


class NicFlowControl(HostCheck, EgressCheck):
    id = "nic_flow_control"
    answers = ("interface",)
    title = "Ethernet flow control (pause frames)"
    keys = ("ethtool -a",)
    why = (
        "With pause frames a host whose rings fill asks the switch port to wait instead of "
        "dropping; on a long path each drop costs many round trips of recovery."
    )
    guideline = f"{ESNET_100G}: confirm flow control (ethtool -A); IEEE 802.3x"
    severity_rule = "info when rx or tx pause is off at >= 1 Gbit/s per flow (the switch decides)"

    def judge(self, env: AuditEnv, iface: InterfaceInfo) -> Finding:
        pause = self.nic_setting(env, iface, "-a", parse_pause, "pause settings", "Loopback.")
        if isinstance(pause, Finding):
            return pause

        def word(v: bool | None) -> str:
            return "?" if v is None else "on" if v else "off"

        observed = (
            f"{iface.name} autoneg {word(pause.autoneg)} rx {word(pause.rx)} tx {word(pause.tx)}"
        )
        if pause.rx and pause.tx:
            return self.finding(
                "ok", observed, "rx on tx on", "Pause frames are honoured and sent."
            )
        flow = per_flow_bps(env)
        if flow < HOST_TUNING_BPS:
            return self.finding(
                "ok", observed, "rx on tx on", f"At {format_rate(flow)} per flow the rings keep up."
            )
        return self.finding(
            "info",
            observed,
            "rx on tx on (where the switch port supports it)",
            "Flow control is off: a burst that fills the rings is dropped instead of paused. "
            "Turn it on where the switch port honours pause frames.",
            (self.command_fix("pause", "rx on tx on", f"ethtool -A {iface.name} rx on tx on"),),
        )


class NicOffloads(HostCheck, EgressCheck):
    id = "nic_offloads"
    answers = ("interface", "host-cpu")
    title = "Segmentation and receive offloads (TSO, GSO, GRO)"
    keys = ("ethtool -k",)
    why = (
        "TSO/GSO hand the NIC (or the last moment in the stack) up to 64 KB at once and GRO "
        "merges received packets: without them the stack handles every packet on its own."
    )
    guideline = f"{ESNET_LINUX}: keep TSO, GSO and GRO on"
    severity_rule = "warn when one is off at >= 1 Gbit/s per flow, info below"

    def judge(self, env: AuditEnv, iface: InterfaceInfo) -> Finding:
        found = self.nic_setting(
            env, iface, "-k", parse_offloads, "offloads", "Loopback.", tuple(OFFLOADS.values())
        )
        if isinstance(found, Finding):
            return found
        observed = f"{iface.name} " + " ".join(
            f"{k} {'on' if v[0] else 'off'}{' (fixed)' if v[1] else ''}" for k, v in found.items()
        )
        off = [k for k, (on, _) in found.items() if not on]
        if not off:
            return self.finding("ok", observed, "gro tso gso on", "Offloads are on.")
        flow = per_flow_bps(env)
        # A 64 KB super-packet replaces this many MTU-sized packets in the stack.
        batch = 65536 / max(iface.mtu - 52, 1)
        changeable = [k for k in off if not found[k][1]]
        fixes: tuple[Fix, ...] = ()
        if changeable:
            settings = " ".join(f"{k} on" for k in changeable)
            fixes = (self.command_fix("offloads", settings, f"ethtool -K {iface.name} {settings}"),)
        fixed = [k for k in off if found[k][1]]
        note = f" The driver fixes {', '.join(fixed)} off." if fixed else ""
        return self.finding(
            "warn" if flow >= HOST_TUNING_BPS else "info",
            observed,
            "gro tso gso on",
            f"{', '.join(off).upper()} off: the stack handles up to {batch:.0f} times as many "
            f"packets per byte as with them at MTU {iface.mtu}.{note}",
            fixes,
        )


CHECKS: tuple[Check, ...] = (
    FqPacing(),
    JumboMtu(),
    NicRings(),
    NicCoalescing(),
    NicFlowControl(),
    NicOffloads(),
)
