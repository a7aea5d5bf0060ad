"""What serve reports about its own host (the `audit` request).

The full host audit lives in tcpwizard.checks (another branch); when it is importable we
use it. Otherwise serve still reports the raw values of the sysctls that decide TCP
throughput, clearly labelled as a minimal audit, so the client can judge the far end.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import platform
import socket
from typing import Any

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


def _jsonable(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    return str(value)


def _full_audit() -> dict[str, Any] | None:
    """The real audit, if this build has it (tcpwizard.checks.audit.audit)."""
    try:
        mod = importlib.import_module("tcpwizard.checks.audit")
    except ImportError:
        return None
    fn = getattr(mod, "audit", None)
    if fn is None:
        return None
    from tcpwizard.context import Context

    result = _jsonable(fn(Context()))
    if isinstance(result, dict):
        result["source"] = "tcpwizard.checks"
        return result
    return None


def host_audit(sysctl_root: str = "/proc/sys") -> dict[str, Any]:
    full = _full_audit()
    if full is not None:
        return full
    sysctls = read_sysctls(sysctl_root)
    return {
        "source": "minimal-sysctl",
        "note": "this serve build has no full host audit; raw sysctl values only",
        "hostname": socket.gethostname(),
        "kernel": platform.release(),
        "congestion_control": sysctls.get("net.ipv4.tcp_congestion_control", ""),
        "findings": [],
        "sysctls": sorted(sysctls.items()),
    }
