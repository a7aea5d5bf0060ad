"""The CPUs behind a 10-100 Gbit/s flow: the NIC's IRQs and this process on the NIC's NUMA
node, the frequency governor and SMT, judged by the per-flow rate (docs/audit.md, "100G
host"). They matter once one flow needs a large share of one core."""

from __future__ import annotations

from tcpwizard.checks.base import AuditEnv, Check
from tcpwizard.checks.host_rates import (
    ESNET_100G,
    FLOW_PLACEMENT_BPS,
    HOST_TUNING_BPS,
    HostCheck,
    per_flow_bps,
)
from tcpwizard.checks.hostread import format_cpulist
from tcpwizard.checks.model import Finding, Severity
from tcpwizard.checks.nicfacts import Numa, governors, online_cpus, read_numa
from tcpwizard.units import format_rate


def placement_severity(env: AuditEnv) -> Severity:
    """warn once a flow needs placement (FLOW_PLACEMENT_BPS), info from host-tuning rates,
    else ok; a default target never warns."""
    flow = per_flow_bps(env)
    if flow >= FLOW_PLACEMENT_BPS:
        return "warn" if env.target.source != "default" else "info"
    return "info" if flow >= HOST_TUNING_BPS else "ok"


class _NumaCheck(HostCheck):
    def numa(self, env: AuditEnv) -> tuple[str, Numa | None, Finding | None]:
        iface = self.egress(env)
        if isinstance(iface, Finding):
            return "", None, iface
        numa = read_numa(env.host, iface.name)
        if iface.is_loopback:
            return iface.name, None, self.finding("ok", "loopback", "-", "Loopback.")
        if numa is None:
            why = env.host.why(f"file:/sys/class/net/{iface.name}/device/numa_node")
            return iface.name, None, self.unavailable(f"{iface.name}'s NUMA node", why)
        if numa.nodes is None:
            why = env.host.why("ls:/sys/devices/system/node")
            return iface.name, None, self.unavailable("the NUMA topology", why)
        if numa.nodes <= 1:
            return (
                iface.name,
                None,
                self.finding(
                    "ok", f"{iface.name}: one NUMA node", "-", "One NUMA node: every core is local."
                ),
            )
        if numa.node is None or numa.node_cpus is None:
            return (
                iface.name,
                None,
                self.unavailable(
                    f"{iface.name}'s NUMA node", "the device reports none (numa_node -1)"
                ),
            )
        return iface.name, numa, None


class IrqNuma(_NumaCheck):
    id = "irq_numa"
    answers = ("host-cpu", "interface")
    title = "NIC interrupts on the NIC's NUMA node"
    keys = ("/sys/class/net/IF/device/numa_node", "/proc/irq/N/smp_affinity_list")
    why = (
        "An interrupt served on the other socket reads every packet across the "
        "inter-socket link; at tens of Gbit/s per flow that costs a large share of a core."
    )
    guideline = f"{ESNET_100G}: IRQs on the NIC's NUMA node (set_irq_affinity, no irqbalance)"
    severity_rule = "warn when an IRQ may run off the NIC's node at >= 5 Gbit/s per flow"

    def evaluate(self, env: AuditEnv) -> Finding:
        name, numa, done = self.numa(env)
        if done is not None:
            return done
        assert numa is not None and numa.node_cpus is not None
        if not numa.irqs:
            return self.unavailable(f"{name}'s IRQs", numa.irq_missing)
        local = numa.node_cpus
        off = [irq for irq, cpus in numa.irqs if not cpus <= local]
        observed = (
            f"{name} on node {numa.node} (CPUs {format_cpulist(local)}); "
            f"{len(off)} of {len(numa.irqs)} IRQs may run elsewhere"
        )
        expected = f"every IRQ on CPUs {format_cpulist(local)}"
        if not off:
            return self.finding("ok", observed, expected, "Every NIC interrupt is NUMA-local.")
        irqs = " ".join(str(i) for i in off)
        command = (
            f"for i in {irqs}; do echo {format_cpulist(local)} > /proc/irq/$i/smp_affinity_list; "
            "done  # stop irqbalance first, or it moves them back"
        )
        return self.finding(
            placement_severity(env),
            observed,
            expected,
            f"IRQs {irqs} may be served off node {numa.node}, so packets cross sockets "
            f"before TCP sees them (at {format_rate(per_flow_bps(env))} per flow).",
            (self.command_fix("irq_affinity", format_cpulist(local), command),),
        )


class ProcessNuma(_NumaCheck):
    id = "process_numa"
    answers = ("host-cpu",)
    title = "This process on the NIC's NUMA node"
    keys = ("/sys/class/net/IF/device/numa_node", "sched_getaffinity")
    why = (
        "A transfer whose threads run on the other socket copies every byte across the "
        "inter-socket link; bind the transfer application to the NIC's node."
    )
    guideline = f"{ESNET_100G}: run the application on the NIC's NUMA node (numactl)"
    severity_rule = "info when this process may run off the NIC's node at >= 1 Gbit/s per flow"

    def evaluate(self, env: AuditEnv) -> Finding:
        mine = env.host.affinity()
        name, numa, done = self.numa(env)
        if done is not None:
            return done
        assert numa is not None and numa.node_cpus is not None
        if mine is None:
            return self.unavailable("this process's CPUs", env.host.why("affinity"))
        local = numa.node_cpus
        observed = (
            f"this process on CPUs {format_cpulist(mine)}; {name} on node {numa.node} "
            f"(CPUs {format_cpulist(local)})"
        )
        expected = f"CPUs within {format_cpulist(local)}"
        if mine <= local:
            return self.finding("ok", observed, expected, "This process runs on the NIC's node.")
        severity = placement_severity(env)
        return self.finding(
            "info" if severity == "warn" else severity,
            observed,
            expected,
            "This process (and the transfers it starts) may run off the NIC's node; start "
            "transfer applications bound to it.",
            (
                self.command_fix(
                    "numactl",
                    f"node {numa.node}",
                    f"numactl --cpunodebind={numa.node} --membind={numa.node} COMMAND",
                ),
            ),
        )


class CpuGovernor(HostCheck):
    id = "cpu_governor"
    answers = ("host-cpu",)
    title = "CPU frequency governor"
    keys = ("/sys/devices/system/cpu/cpu*/cpufreq/scaling_governor",)
    why = (
        "A power-saving governor raises the clock only after the load has been seen; a "
        "flow bound by one core runs at whatever clock that core has."
    )
    guideline = f"{ESNET_100G}: the 'performance' CPU governor"
    severity_rule = "warn when a CPU is not on 'performance' at >= 5 Gbit/s per flow"

    def evaluate(self, env: AuditEnv) -> Finding:
        found = governors(env.host)
        if online_cpus(env.host) is None:
            why = env.host.why("file:/sys/devices/system/cpu/online")
            return self.unavailable("the online CPUs", why)
        if found is None:
            return self.unavailable(
                "cpufreq", "no CPU has a scaling_governor (a VM, or no cpufreq driver)"
            )
        others = sorted({g for g in found.values() if g != "performance"})
        slow = [c for c, g in found.items() if g != "performance"]
        observed = ", ".join(
            f"{g} on {len([c for c in found.values() if c == g])} CPUs"
            for g in sorted(set(found.values()))
        )
        if not slow:
            return self.finding("ok", observed, "performance", "Every CPU runs at full clock.")
        severity = placement_severity(env)
        command = "echo performance | tee /sys/devices/system/cpu/cpu*/cpufreq/scaling_governor"
        return self.finding(
            severity,
            observed,
            "performance",
            f"{len(slow)} CPU(s) use {'/'.join(others)}: a core holding one flow at "
            f"{format_rate(per_flow_bps(env))} may run below its full clock.",
            (self.command_fix("governor", "performance", command),),
        )


class Smt(HostCheck):
    id = "cpu_smt"
    answers = ("host-cpu",)
    title = "Simultaneous multithreading (SMT)"
    keys = ("/sys/devices/system/cpu/smt/active",)
    why = (
        "SMT siblings share one core's execution units: a flow's receive thread next to a "
        "busy sibling gets part of a core."
    )
    guideline = f"{ESNET_100G}: one flow per physical core (SMT off, or pin streams)"
    severity_rule = "info when SMT is active at >= 5 Gbit/s per flow"

    def evaluate(self, env: AuditEnv) -> Finding:
        text = env.host.file("/sys/devices/system/cpu/smt/active")
        if text not in ("0", "1"):
            why = env.host.why("file:/sys/devices/system/cpu/smt/active") or f"read {text!r}"
            return self.unavailable("SMT state", why)
        if text == "0":
            return self.finding("ok", "SMT off", "-", "Each thread has a core of its own.")
        severity: Severity = "info" if per_flow_bps(env) >= FLOW_PLACEMENT_BPS else "ok"
        return self.finding(
            severity,
            "SMT active",
            "SMT off, or streams pinned to separate cores",
            f"At {format_rate(per_flow_bps(env))} per flow, a stream sharing its core with "
            "a busy sibling slows down; turn SMT off or pin each stream to its own core.",
            (self.command_fix("smt", "off", "echo off > /sys/devices/system/cpu/smt/control"),),
        )


CHECKS: tuple[Check, ...] = (IrqNuma(), ProcessNuma(), CpuGovernor(), Smt())
