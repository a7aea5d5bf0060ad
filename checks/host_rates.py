"""What the 100G host checks share: the rates at which a host setting starts to matter, the
packet arithmetic, and the finding a check gives when a fact cannot be read here.

Two rates with their stated basis (ESnet's fasterdata host-tuning pages):
- HOST_TUNING_BPS, 1 Gbit/s: the host tuning there is written "for hosts connected at
  1 Gbps or higher", and several of its settings hurt hosts at 155 Mbit/s or less. Below it
  NIC settings (rings, offloads, coalescing, flow control, jumbo frames) are not judged.
- FLOW_PLACEMENT_BPS, 5 Gbit/s per flow: fasterdata's 40G tuning page says that for
  individual flows above 5-9 Gbit/s the core running the interrupts and the application, and
  the CPU clock rate, matter. Above it IRQ/NUMA placement, the CPU governor and SMT warn.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from tcpwizard.checks.base import AuditEnv, Check
from tcpwizard.checks.model import Finding, InterfaceInfo

HOST_TUNING_BPS = 1e9
FLOW_PLACEMENT_BPS = 5e9
ESNET_LINUX = "ESnet fasterdata, 'Linux Tuning'"
ESNET_100G = "ESnet fasterdata, '100G Tuning'"
# Ethernet's per-frame cost on the wire beyond the IP packet: header 14 + FCS 4 + preamble 8
# + inter-frame gap 12 bytes (IEEE 802.3). A qdisc counts the frame as the kernel holds it:
# the header, not the rest.
ETHERNET_HEADER = 14
ETHERNET_OVERHEAD = ETHERNET_HEADER + 4 + 8 + 12
# NAPI hands a driver at most this many packets per poll (NAPI_POLL_WEIGHT, Linux
# include/linux/netdevice.h): coalescing fewer packets per interrupt gains nothing per poll.
NAPI_WEIGHT = 64


def wire_bits(mtu: int) -> int:
    """Bits one full-sized packet takes on the wire."""
    return (max(mtu, 68) + ETHERNET_OVERHEAD) * 8


def per_flow_bps(env: AuditEnv) -> float:
    return env.per_stream.rate_bps


T = TypeVar("T")


class HostCheck(Check):
    """A check of the egress NIC or the CPUs: says "not available here" (info) when a fact
    cannot be read, and fixes with the exact command."""

    def unavailable(self, what: str, why: str) -> Finding:
        reason = f": {why}" if why else ""
        return self.finding(
            "info",
            f"{what} not available here{reason}",
            "-",
            f"Not judged: {what} not available here{reason}.",
        )

    def nic_setting(
        self,
        env: AuditEnv,
        iface: InterfaceInfo,
        flag: str,
        parse: Callable[[str], T | None],
        what: str,
        loopback: str,
        keep: tuple[str, ...] = (),
    ) -> T | Finding:
        """`ethtool FLAG IFACE` parsed; a finding instead on loopback (`loopback` says why
        it is fine) or when the NIC or ethtool does not answer ("not available here")."""
        text = env.host.command("ethtool", flag, iface.name, keep=keep)
        parsed = parse(text) if text is not None else None
        if iface.is_loopback:
            return self.finding("ok", "loopback", "-", loopback)
        if parsed is None:
            return self.unavailable(
                f"{iface.name}'s {what}", env.host.why(f"cmd:ethtool {flag} {iface.name}")
            )
        return parsed
