"""The host audit: run every check against one kernel (a /proc/sys root) and collect the
findings, the raw values and the throughput-ceiling table."""

from __future__ import annotations

import os

from tcpwizard.checks import (
    behaviour_checks,
    buffer_checks,
    cpu_checks,
    interface_checks,
    nic_checks,
    protocol_checks,
    stream_checks,
)
from tcpwizard.checks.base import AuditEnv, Check
from tcpwizard.checks.hostread import HostReader, RecordedHost
from tcpwizard.checks.model import BdpTarget, HostAudit
from tcpwizard.checks.netinfo import NetworkFacts, gather_network
from tcpwizard.checks.sysctl import SysctlReader
from tcpwizard.checks.window import DEFAULT_TARGET, ceilings
from tcpwizard.context import Context

CHECKS: tuple[Check, ...] = (
    protocol_checks.CHECKS
    + buffer_checks.CHECKS
    + behaviour_checks.CHECKS
    + interface_checks.CHECKS
    + nic_checks.CHECKS
    + cpu_checks.CHECKS
    + stream_checks.CHECKS
)

# Read first, so a tree without TCP at all fails with one clear error before any check runs.
ESSENTIAL_KEYS = (
    "net.ipv4.tcp_rmem",
    "net.ipv4.tcp_wmem",
    "net.core.rmem_max",
    "net.core.wmem_max",
    "net.ipv4.tcp_window_scaling",
)


def total_ram_bytes() -> int:
    # What psutil.virtual_memory().total reports (MemTotal), from the standard library, so
    # the audit also runs in the far end's zipapp where no third-party package exists.
    return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))


def check_ids() -> tuple[str, ...]:
    return tuple(c.id for c in CHECKS)


def audit(
    source: Context | SysctlReader,
    target: str | None = None,
    bdp: BdpTarget | None = None,
    *,
    network: NetworkFacts | None = None,
    ram_bytes: int | None = None,
    page_size: int | None = None,
    host: HostReader | None = None,
    streams: int = 1,
) -> HostAudit:
    """Audit the kernel behind `source` (a Context's sysctl_root, or a reader).

    target: an address (already resolved) whose route, interface and cached metrics to
    audit; None audits the default route. bdp: the path to judge buffers against
    (DEFAULT_TARGET when None). network/ram_bytes/page_size: facts to use instead of
    reading the live system (tests, or a peer's report). host: the NIC/CPU facts; None reads
    them live when the network facts are live too, and else has none (a replay says "not
    available here"). streams: how many parallel streams are to fill the target.

    Raises SysctlError (exit 3) when an essential entry is missing or unreadable."""
    if isinstance(source, Context):
        reader = SysctlReader(source.sysctl_root)
        sys_root, proc_root = source.sys_root, source.proc_root
    else:
        reader = source
        sys_root, proc_root = "/sys", "/proc"
    if host is None:
        host = HostReader(sys_root, proc_root) if network is None else RecordedHost()
    for key in ESSENTIAL_KEYS:
        reader.read(key)
    env = AuditEnv(
        reader=reader,
        target=bdp or DEFAULT_TARGET,
        network=network if network is not None else gather_network(target, sys_root),
        ram_bytes=ram_bytes if ram_bytes is not None else total_ram_bytes(),
        page_size=page_size or os.sysconf("SC_PAGE_SIZE"),
        target_address=target,
        host=host,
        streams=max(1, streams),
    )
    findings = tuple(check.evaluate(env) for check in CHECKS)
    rmem = env.ints("net.ipv4.tcp_rmem", 3)
    wmem = env.ints("net.ipv4.tcp_wmem", 3)
    moderate = env.optional("net.ipv4.tcp_moderate_rcvbuf") != "0"
    iface = env.network.interface
    table = ceilings(
        recv_space=rmem[2] if moderate else rmem[1],
        send_space=wmem[2],
        app_recv_space=2 * env.integer("net.core.rmem_max"),
        app_send_space=2 * env.integer("net.core.wmem_max"),
        kernel=env.kernel,
        adv_win_scale=env.adv_win_scale,
        window_scaling=env.integer("net.ipv4.tcp_window_scaling") != 0,
        route_window=iface.route.window if iface and iface.route else None,
    )
    notes = []
    if env.network.interface is None and env.network.interface_missing_reason:
        notes.append(f"interface checks skipped: {env.network.interface_missing_reason}")
    if env.target.source == "default":
        notes.append(
            "buffers judged against the default target "
            f"{env.describe_target()}; pass --rtt and --bandwidth for your path"
        )
    return HostAudit(
        hostname=env.optional("kernel.hostname") or "",
        kernel=env.kernel_release,
        findings=findings,
        congestion_control=env.optional("net.ipv4.tcp_congestion_control") or "",
        sysctls=tuple(sorted(env.read_values.items())),
        ceilings=table,
        target=env.target,
        interface=iface,
        target_address=target,
        ram_bytes=env.ram_bytes,
        notes=tuple(notes),
        host_facts=tuple(sorted(host.values.items())),
        streams=env.streams,
    )
