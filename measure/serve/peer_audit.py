"""What serve reports about its own host (the `audit` request): the raw facts, so the client
re-judges them against the path it measured (serve cannot know the BDP).
"""

from __future__ import annotations

import os
import platform
import socket
from typing import Any

from tcpwizard.checks.facts import facts_json, gather_facts
from tcpwizard.exitcodes import TcpWizardError

KEY_SYSCTLS = (
    "net.core.rmem_max",
    "net.core.wmem_max",
    "net.core.rmem_default",
    "net.core.wmem_default",
    "net.ipv4.tcp_rmem",
    "net.ipv4.tcp_wmem",
    "net.ipv4.tcp_window_scaling",
    "net.ipv4.tcp_timestamps",
    "net.ipv4.tcp_sack",
    "net.ipv4.tcp_congestion_control",
    "net.ipv4.tcp_no_metrics_save",
    "net.ipv4.tcp_moderate_rcvbuf",
    "net.ipv4.tcp_mtu_probing",
    "net.core.default_qdisc",
)


def read_sysctls(root: str = "/proc/sys") -> dict[str, str]:
    out: dict[str, str] = {}
    for key in KEY_SYSCTLS:
        path = os.path.join(root, *key.split("."))
        try:
            with open(path) as f:
                out[key] = " ".join(f.read().split())
        except OSError:
            continue
    return out


def host_audit(sysctl_root: str = "/proc/sys", client: str | None = None) -> dict[str, Any]:
    """The facts the client needs to audit this host against the path it measured: every
    sysctl the audit reads, the interface and route toward the client, cached tcp_metrics,
    RAM (tcpwizard.checks.facts). Falls back to the key sysctls if the audit cannot run."""
    try:
        facts = gather_facts(sysctl_root, client)
    except TcpWizardError as exc:
        sysctls = read_sysctls(sysctl_root)
        return {
            "source": "minimal-sysctl",
            "note": f"full audit failed on the serve host: {exc}",
            "hostname": socket.gethostname(),
            "kernel": platform.release(),
            "sysctls": sorted(sysctls.items()),
        }
    return {"source": "tcpwizard.checks", "facts": facts_json(facts)}
