"""The egress interface and route towards the target: MTU, transmit queue, link speed and
duplex, error counters, and route metrics that clamp TCP (ip-route(8) `window`, `rtt`,
`initcwnd`)."""

from __future__ import annotations

from tcpwizard.checks.base import TIERNEY, AuditEnv, Check, EgressCheck, ratio_severity
from tcpwizard.checks.model import Finding, Fix, InterfaceInfo, RouteInfo, Severity
from tcpwizard.checks.shaper import GUIDELINE as SHAPER_GUIDELINE
from tcpwizard.checks.shaper import read_shaper, removal_fix
from tcpwizard.checks.window import mbps
from tcpwizard.units import format_bytes, format_rate

INITIAL_WINDOW = 10  # RFC 6928 initial window, the Linux default


class _InterfaceCheck(EgressCheck):
    answers = ("interface",)

    keys = ("egress interface",)


class InterfaceMtu(_InterfaceCheck):
    id = "interface_mtu"
    title = "Egress MTU"
    why = "Smaller packets mean more per-packet work and a slower window growth in bytes."
    guideline = f"{TIERNEY}: 'Jumbo Frames'"
    severity_rule = "warn below 1280 (IPv6 minimum); info below 1500"

    def judge(self, env: AuditEnv, iface: InterfaceInfo) -> Finding:
        observed = f"{iface.name} mtu {iface.mtu}"
        if iface.is_loopback or iface.mtu >= 1500:
            return self.finding("ok", observed, ">= 1500", f"MTU {iface.mtu}.")
        severity: Severity = "warn" if iface.mtu < 1280 else "info"
        return self.finding(
            severity,
            observed,
            ">= 1500",
            f"MTU {iface.mtu} is below Ethernet's 1500 (a tunnel or VPN?): each segment "
            f"carries {iface.mtu - 52} bytes, so slow start and loss recovery take longer.",
        )


# ESnet's Linux tuning set txqueuelen 10000 for 10 Gbit/s hosts: 10000 packets of 1500 bytes
# drain in 12.3 ms at 10 Gbit/s. The queue keeps that drain time at any rate, in the same
# 1500-byte packets (the queue counts packets; with TSO one is up to 64 KB, so this errs
# long), never below the Linux default of 1000 packets.
QUEUE_PACKET_BITS = (1500 + 38) * 8
QUEUE_DRAIN_S = 10000 * QUEUE_PACKET_BITS / 10e9
DEFAULT_TXQUEUELEN = 1000
# Root qdiscs that bound their queue with their own packet limit, not txqueuelen.
OWN_LIMIT_QDISCS = ("fq", "fq_codel", "cake")


def queue_needed(rate_bps: float) -> int:
    return max(DEFAULT_TXQUEUELEN, -(-int(rate_bps * QUEUE_DRAIN_S) // QUEUE_PACKET_BITS))


class InterfaceQueue(_InterfaceCheck):
    id = "interface_txqueuelen"
    title = "Transmit queue length"
    why = (
        "When the interface transmit queue overflows Linux treats it like a loss and halves "
        "the window."
    )
    guideline = (
        f"{TIERNEY}: 'Transmit queue overflow: increasing txqueuelen can help'; ESnet "
        "fasterdata, 'Linux Tuning': txqueuelen 10000 at 10 Gbit/s"
    )
    severity_rule = (
        "info below 12.3 ms of the target rate (at least 1000 packets); warn below 100 "
        "packets or a tenth of it; ignored without a queue or under fq, fq_codel, cake"
    )

    def judge(self, env: AuditEnv, iface: InterfaceInfo) -> Finding:
        observed = f"{iface.name} txqueuelen {iface.txqueuelen}, qdisc {iface.qdisc or '?'}"
        need = queue_needed(env.target.rate_bps)
        expected = f">= {need}"
        own_limit = iface.qdisc in OWN_LIMIT_QDISCS
        if iface.is_loopback or own_limit or iface.qdisc == "noqueue" or iface.txqueuelen >= need:
            return self.finding("ok", observed, expected, "The transmit queue is long enough.")
        low = iface.txqueuelen < 100 or iface.txqueuelen < need // 10
        severity: Severity = "warn" if low else "info"
        drain = iface.txqueuelen * QUEUE_PACKET_BITS / env.target.rate_bps
        return self.finding(
            severity,
            observed,
            expected,
            f"A {iface.txqueuelen}-packet transmit queue drains in {drain * 1000:.2g} ms at "
            f"{format_rate(env.target.rate_bps)} and overflows in bursts; each overflow "
            "halves the congestion window like a loss.",
            (
                self.command_fix(
                    "txqueuelen",
                    str(need),
                    f"ip link set dev {iface.name} txqueuelen {need}",
                ),
            ),
        )


class InterfaceLink(_InterfaceCheck):
    id = "interface_link"
    title = "Link speed and duplex"
    why = "The NIC is the first bottleneck; a duplex mismatch gives a working but crawling link."
    guideline = f"{TIERNEY}: 'Duplex Mismatch Issues'"
    severity_rule = "warn for half duplex or a link slower than the target rate"

    def judge(self, env: AuditEnv, iface: InterfaceInfo) -> Finding:
        speed = f"{iface.speed_mbps} Mbit/s" if iface.speed_mbps else "speed unknown"
        observed = f"{iface.name} {speed}, {iface.duplex} duplex"
        expected = f">= {format_rate(env.target.rate_bps)}, full duplex"
        if iface.is_loopback:
            return self.finding("ok", observed, expected, "Loopback.")
        if iface.duplex == "half":
            return self.finding(
                "warn",
                observed,
                expected,
                "The link runs half duplex: if the switch port is full duplex (a mismatch) "
                "throughput collapses to a few Mbit/s. Check both ends with ethtool.",
                (
                    self.command_fix(
                        "duplex",
                        "full",
                        f"ethtool -s {iface.name} autoneg on",
                    ),
                ),
            )
        if iface.speed_mbps is None:
            return self.finding(
                "info", observed, expected, "The driver does not report a speed (virtual NIC?)."
            )
        if iface.speed_mbps * 1e6 < env.target.rate_bps:
            return self.finding(
                "warn",
                observed,
                expected,
                f"The link itself ({iface.speed_mbps} Mbit/s) is slower than the "
                f"{format_rate(env.target.rate_bps)} target: no tuning can go faster.",
            )
        return self.finding("ok", observed, expected, "The link is fast enough.")


class InterfaceErrors(_InterfaceCheck):
    id = "interface_errors"
    title = "Interface drops and errors"
    why = "Local drops look like congestion to TCP and shrink the window."
    guideline = f"{TIERNEY}: 'host issues'"
    severity_rule = "warn above 0.1% of packets since boot; info when any"

    def judge(self, env: AuditEnv, iface: InterfaceInfo) -> Finding:
        bad = iface.rx_dropped + iface.tx_dropped + iface.rx_errors + iface.tx_errors
        packets = iface.rx_packets + iface.tx_packets
        observed = (
            f"{iface.name} drops rx {iface.rx_dropped} tx {iface.tx_dropped}, errors rx "
            f"{iface.rx_errors} tx {iface.tx_errors} of {packets} packets"
        )
        if bad == 0:
            return self.finding("ok", observed, "0", "No drops or errors.")
        share = bad / packets if packets else 1.0
        severity: Severity = "warn" if share > 0.001 else "info"
        return self.finding(
            severity,
            observed,
            "0",
            f"{share:.2%} of packets since boot were dropped or had errors on this host "
            "(counters are cumulative; watch whether they grow during a transfer).",
        )


def _route_command(route: RouteInfo, iface: InterfaceInfo, keep: list[str]) -> str:
    parts = ["ip route change", route.destination]
    if route.gateway:
        parts.append(f"via {route.gateway}")
    parts.append(f"dev {iface.name}")
    parts.extend(keep)
    return " ".join(parts)


class RouteClamps(_InterfaceCheck):
    id = "route_metrics"
    answers = ("receiver-window",)  # a route `window` clamps the advertised window
    title = "Route metrics that clamp TCP"
    why = (
        "A route's `window` caps the window TCP may advertise, `rtt` seeds the RTT estimate "
        "and `initcwnd` the first flight: set once for a slow link, they silently cap "
        "every later transfer."
    )
    guideline = "ip-route(8): window, rtt, initcwnd"
    severity_rule = "window judged like a buffer; small initcwnd/initrwnd info"

    def judge(self, env: AuditEnv, iface: InterfaceInfo) -> Finding:
        route = iface.route
        if route is None:
            return self.finding("ok", "no route metrics", "-", "No route metrics set.")
        attrs = []
        if route.window:
            attrs.append(f"window {route.window}")
        if route.rtt_ms:
            attrs.append(f"rtt {route.rtt_ms:g}ms")
        if route.initcwnd:
            attrs.append(f"initcwnd {route.initcwnd}")
        if route.initrwnd:
            attrs.append(f"initrwnd {route.initrwnd}")
        observed = f"{route.destination}: {' '.join(attrs) or 'none'}"
        problems: list[str] = []
        severity: Severity = "ok"
        keep: list[str] = []
        if route.window:
            rate = mbps(route.window, env.target.rtt_s)
            ratio = rate * 1e6 / env.target.rate_bps
            severity = ratio_severity(ratio, env.target)
            if severity != "ok":
                problems.append(
                    f"the route caps the window at {format_bytes(route.window)}: "
                    f"{format_rate(rate * 1e6)} at {env.target.rtt_s * 1000:g} ms"
                )
            else:
                keep.append(f"window {route.window}")
        for name, value in (("initcwnd", route.initcwnd), ("initrwnd", route.initrwnd)):
            if value and value < INITIAL_WINDOW:
                if severity == "ok":
                    severity = "info"
                problems.append(f"{name} {value} is below the default {INITIAL_WINDOW}")
            elif value:
                keep.append(f"{name} {value}")
        if route.rtt_ms:
            keep.append(f"rtt {route.rtt_ms:g}ms")
        if not problems:
            return self.finding("ok", observed, "no clamping metrics", "No metric clamps TCP.")
        fix = Fix(
            id=f"{self.id}:{route.destination}",
            kind="route",
            host="local",
            key=f"route:{route.destination}",
            value=" ".join(keep) or "(no metrics)",
            command=_route_command(route, iface, keep),
            why=self.why,
            guideline=self.guideline,
            answers=self.answers,
        )
        return self.finding(
            severity,
            observed,
            "no clamping metrics",
            "; ".join(problems).capitalize() + ".",
            (fix,),
        )


# tc rates come in whole units of its own (a maxrate set to a share floors to the Mbit/s):
# a limit within one Mbit/s of what is needed reaches it.
TC_RATE_STEP_BPS = 1e6


class InterfaceShaper(_InterfaceCheck):
    id = "interface_shaper"
    title = "Rate limit in the egress queue"
    keys = ("tc qdisc (egress)",)
    why = (
        "A shaper in this host's own egress queue (tbf, htb, cake, fq maxrate) holds every "
        "transfer to its rate, and the path's capacity is measured through it."
    )
    guideline = SHAPER_GUIDELINE
    severity_rule = (
        "ok without one or at the target rate (per flow for fq maxrate); warn below it, crit "
        "below half (a default target: at most warn)"
    )

    def judge(self, env: AuditEnv, iface: InterfaceInfo) -> Finding:
        shaper = None if iface.is_loopback else read_shaper(env.host, iface.name)
        need = env.per_stream.rate_bps if shaper and shaper.per_flow else env.target.rate_bps
        expected = f"no limit below {format_rate(need)}"
        if shaper is None:
            observed = f"{iface.name}: {iface.qdisc or 'no qdisc'}, no rate limit"
            return self.finding("ok", observed, expected, "Nothing in the egress queue caps it.")
        observed = f"{iface.name}: {shaper.describe()}"
        severity = ratio_severity((shaper.rate_bps + TC_RATE_STEP_BPS) / need, env.target)
        if severity == "ok":
            return self.finding("ok", observed, expected, f"The {shaper.kind} limit allows it.")
        fix = removal_fix(iface.name, "local", self.answers)
        return self.finding(
            severity,
            observed,
            expected,
            f"This host's own egress queue ({shaper.kind}) caps "
            f"{'each flow' if shaper.per_flow else 'the interface'} at "
            f"{format_rate(shaper.rate_bps)}, below the {format_rate(need)} the target needs: "
            "no transfer leaves faster, and a capacity probe from here sees the shaper.",
            (fix,),
        )


CHECKS: tuple[Check, ...] = (
    InterfaceLink(),
    InterfaceMtu(),
    InterfaceQueue(),
    InterfaceShaper(),
    InterfaceErrors(),
    RouteClamps(),
)
