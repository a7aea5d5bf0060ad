"""The NIC and CPU facts the 100G checks judge, parsed from what HostReader read: ethtool's
text output (-g rings, -c coalescing, -a pause, -k offloads; ethtool 5-6 print the same
labels from the netlink API), `tc -j qdisc`, and sysfs. A parser returns None when the
text is not what it expects; a check then says the fact is not available here."""

from __future__ import annotations

import re
from dataclasses import dataclass

from tcpwizard.checks.hostread import HostReader, parse_cpulist
from tcpwizard.checks.shaper import qdisc_objects, root_qdisc


def _number(text: str) -> int | None:
    text = text.strip()
    return int(text) if text.isdigit() else None


@dataclass(frozen=True)
class Rings:
    rx: int | None
    tx: int | None
    rx_max: int | None
    tx_max: int | None


def parse_rings(text: str) -> Rings | None:
    """`ethtool -g IF`: 'Pre-set maximums:' then 'Current hardware settings:', each with
    'RX:' and 'TX:' lines (n/a where the driver has no such ring)."""
    section = ""
    found: dict[str, int | None] = {}
    for line in text.splitlines():
        if line.startswith("Pre-set maximums"):
            section = "max"
        elif line.startswith("Current hardware settings"):
            section = "cur"
        elif section and ":" in line:
            label, _, value = line.partition(":")
            if label.strip() in ("RX", "TX"):
                found[f"{section}_{label.strip().lower()}"] = _number(value)
    if "cur_rx" not in found and "cur_tx" not in found:
        return None
    return Rings(found.get("cur_rx"), found.get("cur_tx"), found.get("max_rx"), found.get("max_tx"))


@dataclass(frozen=True)
class Coalesce:
    adaptive_rx: bool | None
    rx_usecs: int | None
    rx_frames: int | None


def parse_coalesce(text: str) -> Coalesce | None:
    """`ethtool -c IF`: 'Adaptive RX: on  TX: off', 'rx-usecs: 8', 'rx-frames: 128'."""
    m = re.search(r"Adaptive RX:\s*(\S+)", text)
    values = dict(
        (k.strip(), v.strip())
        for k, _, v in (line.partition(":") for line in text.splitlines())
        if k.strip() in ("rx-usecs", "rx-frames")
    )
    if m is None and not values:
        return None
    adaptive = None if m is None or m.group(1) == "n/a" else m.group(1) == "on"
    return Coalesce(
        adaptive, _number(values.get("rx-usecs", "")), _number(values.get("rx-frames", ""))
    )


@dataclass(frozen=True)
class Pause:
    autoneg: bool | None
    rx: bool | None
    tx: bool | None


def parse_pause(text: str) -> Pause | None:
    """`ethtool -a IF`: 'Autonegotiate: on', 'RX: on', 'TX: off'."""
    values: dict[str, bool | None] = {}
    for line in text.splitlines():
        label, sep, value = line.partition(":")
        if sep and label.strip() in ("Autonegotiate", "RX", "TX"):
            word = value.strip()
            values[label.strip()] = None if word not in ("on", "off") else word == "on"
    if "RX" not in values and "TX" not in values:
        return None
    return Pause(values.get("Autonegotiate"), values.get("RX"), values.get("TX"))


OFFLOADS = {
    "gro": "generic-receive-offload",
    "tso": "tcp-segmentation-offload",
    "gso": "generic-segmentation-offload",
}


def parse_offloads(text: str) -> dict[str, tuple[bool, bool]] | None:
    """`ethtool -k IF`: {short name: (on, fixed)} for GRO, TSO and GSO."""
    out: dict[str, tuple[bool, bool]] = {}
    wanted = {long: short for short, long in OFFLOADS.items()}
    for line in text.splitlines():
        label, sep, value = line.partition(":")
        if sep and label.strip() in wanted:
            out[wanted[label.strip()]] = (value.split()[0] == "on", "[fixed]" in value)
    return out or None


@dataclass(frozen=True)
class QdiscInfo:
    root: str  # the root qdisc's kind ("fq", "mq", "pfifo_fast"...)
    handle: str
    leaves: tuple[tuple[str, str], ...]  # (parent, kind) of an mq root's children
    maxrates_bps: tuple[float | None, ...]  # per fq instance: maxrate (None: unlimited)

    @property
    def kinds(self) -> tuple[str, ...]:
        return tuple(k for _, k in self.leaves) if self.root == "mq" else (self.root,)

    @property
    def all_fq(self) -> bool:
        return bool(self.kinds) and all(k == "fq" for k in self.kinds)


def parse_qdiscs(text: str) -> QdiscInfo | None:
    """`tc -j qdisc show dev IF`. fq prints `maxrate` in bytes per second (a u32 in the
    kernel, so at most 34.4 Gbit/s per flow) only when one is set."""
    items = qdisc_objects(text)
    root = root_qdisc(items) if items is not None else None
    if items is None or root is None:
        return None
    handle = str(root.get("handle", ""))
    leaves = tuple(
        (str(q.get("parent", "")), str(q.get("kind", "")))
        for q in items
        if isinstance(q, dict) and not q.get("root") and str(q.get("parent", "")).startswith(handle)
    )
    fqs = [q for q in items if isinstance(q, dict) and q.get("kind") == "fq"]
    rates: list[float | None] = []
    for q in fqs:
        opts = q.get("options") if isinstance(q.get("options"), dict) else {}
        rate = opts.get("maxrate") if isinstance(opts, dict) else None
        rates.append(float(rate) * 8 if isinstance(rate, int | float) else None)
    return QdiscInfo(str(root.get("kind", "")), handle, leaves, tuple(rates))


@dataclass(frozen=True)
class Numa:
    node: int | None  # the NIC's node; None: the device says none (-1) or cannot tell
    node_cpus: frozenset[int] | None
    nodes: int | None  # NUMA nodes on the host (None: /sys/devices/system/node unreadable)
    irqs: tuple[tuple[int, frozenset[int]], ...]  # (IRQ, CPUs it may run on)
    irq_missing: str  # why the IRQs could not be read ("" when they could)


def read_numa(host: HostReader, ifname: str) -> Numa | None:
    """None when the interface has no device (veth, lo, tun) or no NUMA information."""
    raw = host.file(f"/sys/class/net/{ifname}/device/numa_node")
    nodes = host.listdir("/sys/devices/system/node")
    count = None if nodes is None else len([n for n in nodes if re.fullmatch(r"node\d+", n)])
    if raw is None or not raw.lstrip("-").isdigit():
        return None
    node = int(raw)
    cpus = None
    if node >= 0:
        text = host.file(f"/sys/devices/system/node/node{node}/cpulist")
        try:
            cpus = parse_cpulist(text) if text is not None else None
        except ValueError:
            cpus = None
    irq_dir = f"/sys/class/net/{ifname}/device/msi_irqs"
    names = host.listdir(irq_dir)
    irqs: list[tuple[int, frozenset[int]]] = []
    for name in names or ():
        if not name.isdigit():
            continue
        text = host.file(f"/proc/irq/{name}/smp_affinity_list")
        try:
            if text is not None:
                irqs.append((int(name), parse_cpulist(text)))
        except ValueError:
            continue
    missing = "" if names is not None else host.why("ls:" + irq_dir) or "no MSI IRQs listed"
    return Numa(node if node >= 0 else None, cpus, count, tuple(irqs), missing)


def online_cpus(host: HostReader) -> frozenset[int] | None:
    text = host.file("/sys/devices/system/cpu/online")
    try:
        return parse_cpulist(text) if text is not None else None
    except ValueError:
        return None


def governors(host: HostReader) -> dict[int, str] | None:
    """{cpu: scaling_governor} for every online CPU that has cpufreq; None when none has
    (a VM, or a kernel without cpufreq)."""
    cpus = online_cpus(host)
    out: dict[int, str] = {}
    for cpu in sorted(cpus or ()):
        value = host.file(f"/sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_governor")
        if value:
            out[cpu] = value
    return out or None
