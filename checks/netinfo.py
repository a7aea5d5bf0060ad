"""Facts about the egress path of this host: route lookup (pyroute2), interface counters,
link speed and duplex (sysfs under an injectable root).

Everything here may legitimately be unavailable (no default route in a fresh namespace, a
virtual NIC without speed); gathering returns a reason instead of raising."""

from __future__ import annotations

import ipaddress
import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from tcpwizard.checks.kernel_features import qdisc_available
from tcpwizard.checks.model import InterfaceInfo, RouteInfo
from tcpwizard.checks.tcp_metrics import MetricsEntry, read_tcp_metrics

# rtnetlink stores RTAX_RTT in milliseconds shifted left by 3 (ip-route(8) prints ms).
_RTAX_RTT_SHIFT = 3


@dataclass(frozen=True)
class NetworkFacts:
    interface: InterfaceInfo | None
    interface_missing_reason: str
    metrics: tuple[MetricsEntry, ...] | None  # None: could not be read
    metrics_missing_reason: str = ""
    fq_available: bool | None = None  # this kernel has the fq qdisc (None: cannot tell)

    @classmethod
    def unavailable(cls, reason: str) -> NetworkFacts:
        return cls(None, reason, None, reason)


def _counter(sys_root: Path, ifname: str, name: str) -> int:
    try:
        return int((sys_root / "class/net" / ifname / "statistics" / name).read_text())
    except (OSError, ValueError):
        return 0


# The interface's statistics an audit reads (sysfs, what `ip -s link` shows).
COUNTERS = ("rx_packets", "tx_packets", "rx_dropped", "tx_dropped", "rx_errors", "tx_errors")


def _counters(sys_root: Path, ifname: str) -> dict[str, int]:
    return {name: _counter(sys_root, ifname, name) for name in COUNTERS}


def _speed_duplex(
    sys_root: Path, ifname: str
) -> tuple[int | None, Literal["full", "half", "unknown"]]:
    """What the driver reports (ethtool's numbers, as psutil reads them), from sysfs so the
    audit needs no third-party package on a far end. Virtual links report none."""
    base = sys_root / "class/net" / ifname
    try:
        speed: int | None = int((base / "speed").read_text())
    except (OSError, ValueError):  # EINVAL on links without a speed (lo, veth, tun)
        speed = None
    try:
        duplex = (base / "duplex").read_text().strip()
    except OSError:
        duplex = ""
    speed = speed if speed is not None and speed > 0 else None
    if duplex == "full":
        return speed, "full"
    if duplex == "half":
        return speed, "half"
    return speed, "unknown"


def _metrics(msg: Any) -> dict[str, int]:
    raw = msg.get_attr("RTA_METRICS")
    if not raw:
        return {}
    return {str(k): int(v) for k, v in raw.get("attrs", [])}


def _matching_prefix(ipr: Any, address: str, table: int) -> str:
    """The destination of the FIB route that carries `address` (longest prefix match), so a
    route fix can name the route to change."""
    addr = ipaddress.ip_address(address)
    family = 4 if addr.version == 4 else 6
    best: tuple[int, str] | None = None
    for r in ipr.get_routes(family=2 if family == 4 else 10, table=table):
        dst = r.get_attr("RTA_DST")
        plen = int(r["dst_len"])
        if dst is None:
            prefix = "default"
            net = ipaddress.ip_network("0.0.0.0/0" if family == 4 else "::/0")
        else:
            net = ipaddress.ip_network(f"{dst}/{plen}", strict=False)
            prefix = f"{dst}/{plen}"
        if addr in net and (best is None or plen > best[0]):
            best = (plen, prefix)
    return best[1] if best else address


def _default_route(ipr: Any) -> Any:
    for family in (2, 10):  # AF_INET, then AF_INET6
        routes = list(ipr.get_default_routes(family=family))
        if routes:
            return routes[0]
    return None


def lookup_egress(target: str | None, sys_root: str = "/sys") -> tuple[InterfaceInfo | None, str]:
    """The interface (and route) a packet to `target` leaves by; without a target, the
    interface of the default route. Returns (info, reason-if-None)."""
    try:
        from pyroute2 import IPRoute
    except ImportError:  # a far end running the zipapp has the standard library only
        return lookup_egress_with_ip(target, sys_root)
    try:
        with IPRoute() as ipr:
            if target is None:
                route = _default_route(ipr)
                if route is None:
                    return None, "no default route (pass a HOST to audit its route)"
                prefix = "default"
            else:
                route = next(iter(ipr.route("get", dst=target)))
                prefix = _matching_prefix(ipr, target, int(route.get_attr("RTA_TABLE") or 254))
            route_metrics = _metrics(route)
            oif = route.get_attr("RTA_OIF")
            if oif is None:
                return None, "the route has no output interface"
            link = next(iter(ipr.get_links(oif)))
            qdiscs = [q for q in ipr.get_qdiscs(index=oif) if q["parent"] == 0xFFFFFFFF]
            qdisc = qdiscs[0].get_attr("TCA_KIND") if qdiscs else None
            name = str(link.get_attr("IFLA_IFNAME"))
            gateway = route.get_attr("RTA_GATEWAY")
            source = route.get_attr("RTA_PREFSRC")
            flags = int(link["flags"])
    except Exception as exc:  # netlink errors: unreachable, no permission, odd kernels
        reason = getattr(exc, "args", [None, str(exc)])
        text = reason[1] if len(reason) > 1 else str(exc)
        return None, f"route lookup failed: {text}"
    rtt = route_metrics.get("RTAX_RTT")
    route_info = RouteInfo(
        destination=prefix,
        gateway=str(gateway) if gateway else None,
        window=route_metrics.get("RTAX_WINDOW"),
        rtt_ms=(rtt >> _RTAX_RTT_SHIFT) if rtt else None,
        initcwnd=route_metrics.get("RTAX_INITCWND"),
        initrwnd=route_metrics.get("RTAX_INITRWND"),
    )
    sysp = Path(sys_root)
    speed, duplex = _speed_duplex(sysp, name)
    return (
        InterfaceInfo(
            name=name,
            mtu=int(link.get_attr("IFLA_MTU") or 0),
            txqueuelen=int(link.get_attr("IFLA_TXQLEN") or 0),
            qdisc=str(qdisc) if qdisc else None,
            speed_mbps=speed,
            duplex=duplex,
            is_loopback=bool(flags & 0x8),  # IFF_LOOPBACK
            **_counters(sysp, name),
            source_address=str(source) if source else None,
            route=route_info,
        ),
        "",
    )


def _ip_json(*args: str) -> Any:
    out = subprocess.run(
        ["ip", "-j", *args], capture_output=True, text=True, timeout=5, check=False
    )
    if out.returncode != 0:
        raise OSError(out.stderr.strip() or f"ip {' '.join(args)} failed")
    return json.loads(out.stdout or "[]")


def _ip_prefix(address: str, family: str) -> str:
    """The longest-prefix route of `address` in the main table, as _matching_prefix."""
    addr = ipaddress.ip_address(address)
    best: tuple[int, str] | None = None
    for r in _ip_json(family, "route", "show"):
        dst = str(r.get("dst", ""))
        if dst == "default":
            net = ipaddress.ip_network("0.0.0.0/0" if addr.version == 4 else "::/0")
            name = "default"
        else:
            try:
                net = ipaddress.ip_network(dst, strict=False)
            except ValueError:
                continue
            name = dst if "/" in dst else f"{dst}/{net.prefixlen}"
        if addr in net and (best is None or net.prefixlen > best[0]):
            best = (net.prefixlen, name)
    return best[1] if best else address


def lookup_egress_with_ip(
    target: str | None, sys_root: str = "/sys"
) -> tuple[InterfaceInfo | None, str]:
    """lookup_egress from iproute2's JSON output (`ip -j`), for hosts without pyroute2: the
    same facts, read from the same netlink replies by `ip` instead of by us."""
    try:
        if target is None:
            routes = _ip_json("route", "show", "default") or _ip_json(
                "-6", "route", "show", "default"
            )
            if not routes:
                return None, "no default route (pass a HOST to audit its route)"
            prefix = "default"
        else:
            family = "-6" if ipaddress.ip_address(target).version == 6 else "-4"
            routes = _ip_json(family, "route", "get", target)
            prefix = _ip_prefix(target, family)
        route = routes[0]
        name = route.get("dev")
        if not name:
            return None, "the route has no output interface"
        link = _ip_json("link", "show", "dev", str(name))[0]
    except FileNotFoundError:
        return None, "neither pyroute2 nor iproute2 (ip) is installed"
    except (OSError, ValueError, IndexError, KeyError, subprocess.SubprocessError) as exc:
        return None, f"route lookup failed: {exc}"
    metrics: dict[str, Any] = {}
    for entry in route.get("metrics", []):
        if isinstance(entry, dict):
            metrics.update(entry)
    sysp = Path(sys_root)
    speed, duplex = _speed_duplex(sysp, name)
    qdisc = link.get("qdisc")

    def number(key: str) -> int | None:
        value = metrics.get(key)
        return int(value) if isinstance(value, int | float) else None

    return (
        InterfaceInfo(
            name=str(name),
            mtu=int(link.get("mtu") or 0),
            txqueuelen=int(link.get("txqlen") or 0),
            qdisc=str(qdisc) if qdisc else None,
            speed_mbps=speed,
            duplex=duplex,
            is_loopback="LOOPBACK" in link.get("flags", []),
            **_counters(sysp, name),
            source_address=route.get("prefsrc"),
            route=RouteInfo(
                destination=prefix,
                gateway=route.get("gateway"),
                window=number("window"),
                rtt_ms=number("rtt"),  # ip prints milliseconds (it undoes the << 3)
                initcwnd=number("initcwnd"),
                initrwnd=number("initrwnd"),
            ),
        ),
        "",
    )


def gather_network(target: str | None, sys_root: str = "/sys") -> NetworkFacts:
    interface, reason = lookup_egress(target, sys_root)
    metrics, metrics_reason = read_tcp_metrics()
    fq = qdisc_available("fq", sys_root=sys_root)
    return NetworkFacts(interface, reason, metrics, metrics_reason, fq)
