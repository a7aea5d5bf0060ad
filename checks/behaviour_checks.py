"""How TCP behaves over time: congestion control and pacing, cached slow-start thresholds,
PMTU probing and restarts after idle."""

from __future__ import annotations

from tcpwizard.checks.base import SECTION5, TIERNEY, AuditEnv, Check
from tcpwizard.checks.model import Finding, Fix
from tcpwizard.units import format_bytes

# Loss-based algorithms that grow slower than cubic/bbr on long fat paths (Reno: one
# segment per RTT; at 2% loss on 52 ms it fell to ~1.9 Mbit/s where BBR kept 87%).
SLOW_ON_LFN = frozenset({"reno", "vegas", "veno", "westwood", "lp", "nv", "yeah"})
DEFAULT_MSS = 1448


class NoMetricsSave(Check):
    id = "tcp_no_metrics_save"
    answers = ("cached-metrics",)
    title = "Saving TCP metrics between connections"
    keys = ("net.ipv4.tcp_no_metrics_save",)
    why = (
        "The kernel caches ssthresh per destination after a connection closes; after one "
        "lossy transfer every new connection leaves slow start early for up to an hour."
    )
    guideline = f"{SECTION5}: (optional) flush caches between runs; {TIERNEY}: ssthresh caching"
    severity_rule = "info when saving is on"

    def evaluate(self, env: AuditEnv) -> Finding:
        value = env.integer(self.keys[0])
        if value:
            return self.finding("ok", "1", "1", "Metrics are not cached between connections.")
        return self.finding(
            "info",
            "0 (metrics cached)",
            "1",
            "Slow-start thresholds are cached per destination; a stale one slows the start "
            "of later transfers. Harmless unless a cached entry is small (see cached_metrics).",
            (self.fix(self.keys[0], "1"),),
        )


class CachedMetrics(Check):
    id = "cached_metrics"
    answers = ("cached-metrics",)
    title = "Cached slow-start thresholds"
    keys = ("ip tcp_metrics",)
    why = NoMetricsSave.why
    guideline = NoMetricsSave.guideline
    severity_rule = "warn when the target's cached ssthresh is below the target BDP"

    def evaluate(self, env: AuditEnv) -> Finding:
        metrics = env.network.metrics
        if metrics is None:
            return self.finding(
                "info", "unknown", "-", env.network.metrics_missing_reason or "not read"
            )
        iface = env.network.interface
        mss = max(iface.mtu - 52, 536) if iface and not iface.is_loopback else DEFAULT_MSS
        bdp_segments = max(1, env.target.bdp_bytes // mss)
        if env.target_address is None:
            cached = [m for m in metrics if m.ssthresh is not None]
            if not cached:
                return self.finding(
                    "ok", f"{len(metrics)} entries, none with ssthresh", "-", "No cached ssthresh."
                )
            return self.finding(
                "info",
                f"{len(cached)} destinations with cached ssthresh",
                "-",
                "Some destinations have a cached slow-start threshold; give a HOST to check "
                "its entry.",
                (_flush_fix(self, None),),
            )
        mine = [m for m in metrics if m.address == env.target_address]
        stale = [m for m in mine if m.ssthresh is not None and m.ssthresh < bdp_segments]
        if not stale:
            seen = f"ssthresh {mine[0].ssthresh}" if mine and mine[0].ssthresh else "no entry"
            return self.finding(
                "ok", seen, f">= {bdp_segments} segments or none", "No stale entry."
            )
        entry = stale[0]
        ssthresh = entry.ssthresh or 0
        return self.finding(
            "warn",
            f"ssthresh {ssthresh} segments for {entry.address}",
            f">= {bdp_segments} segments (BDP) or no entry",
            f"New connections to {entry.address} leave slow start at {ssthresh} segments "
            f"(~{format_bytes(ssthresh * mss)}), far below the BDP: the window then grows by "
            "one segment per RTT.",
            (_flush_fix(self, entry.address),),
        )


def _flush_fix(check: Check, address: str | None) -> Fix:
    command = f"ip tcp_metrics delete {address}" if address else "ip tcp_metrics flush all"
    return check.command_fix("tcp_metrics", address or "all", command, name="flush")


class CongestionControl(Check):
    id = "congestion_control"
    answers = ("congestion",)
    title = "Congestion control"
    keys = (
        "net.ipv4.tcp_congestion_control",
        "net.ipv4.tcp_available_congestion_control",
        "net.ipv4.tcp_allowed_congestion_control",
    )
    why = (
        "Loss-based Reno-style algorithms need hours of loss-free transfer to open a big "
        "window; cubic and bbr recover much faster on long fat paths."
    )
    guideline = f"{TIERNEY}: 'More Problems: TCP congestion control'"
    severity_rule = "warn for reno and similar; ok for cubic, bbr and others"

    def evaluate(self, env: AuditEnv) -> Finding:
        current = env.text(self.keys[0])
        available = (env.optional(self.keys[1]) or "").split()
        allowed = (env.optional(self.keys[2]) or "").split()
        observed = (
            f"{current} (available: {' '.join(available) or '?'}; "
            f"allowed without privileges: {' '.join(allowed) or '?'})"
        )
        if current not in SLOW_ON_LFN:
            return self.finding("ok", observed, "cubic or bbr", f"{current} suits long paths.")
        better = "bbr" if "bbr" in available else "cubic" if "cubic" in available else "bbr"
        fixes: list[Fix] = []
        if better not in available:
            module = f"tcp_{better}"
            fixes.append(
                self.command_fix(
                    "kernel module",
                    module,
                    f"modprobe {module}",
                    name="modprobe",
                    why="the algorithm is not loaded",
                )
            )
        fixes.append(self.fix(self.keys[0], better))
        return self.finding(
            "warn",
            observed,
            "cubic or bbr",
            f"{current} grows the window by one segment per RTT after a loss: on a long fat "
            f"path it takes minutes to recover. Switch to {better}.",
            tuple(fixes),
        )


class PacingQdisc(Check):
    id = "pacing_qdisc"
    answers = ("congestion",)
    title = "Queueing discipline for pacing"
    keys = ("net.core.default_qdisc", "net.ipv4.tcp_congestion_control")
    why = (
        "BBR is built for paced sending; the fq qdisc paces cheaply (since Linux 4.13 BBR "
        "falls back to TCP's internal pacing, which costs more CPU)."
    )
    guideline = "BBR (Cardwell et al. 2016): use the fq qdisc"
    severity_rule = "info when BBR runs without fq on the egress interface"

    def evaluate(self, env: AuditEnv) -> Finding:
        cc = env.text("net.ipv4.tcp_congestion_control")
        default = env.optional("net.core.default_qdisc")
        iface = env.network.interface
        egress = iface.qdisc if iface else None
        where = f"{iface.name}: {egress or '?'}" if iface else "no egress interface"
        observed = f"default {default or 'not visible here'}; {where}"
        if cc != "bbr":
            return self.finding("ok", observed, "-", f"{cc} does not rely on pacing.")
        if egress == "fq" or (egress is None and default == "fq"):
            return self.finding("ok", observed, "fq", "BBR paces through fq.")
        if egress is None and default is None:
            return self.finding(
                "info",
                observed,
                "fq",
                "BBR runs here but neither the default nor the egress qdisc is visible; "
                "make sure the host's egress interface uses fq.",
            )
        if egress == "noqueue":
            return self.finding(
                "ok", observed, "fq", f"{iface.name if iface else '?'} has no queue to pace in."
            )
        if env.network.fq_available is False:
            # Advising `tc qdisc ... fq` here would only fail ("qdisc kind is unknown").
            return self.finding(
                "info",
                observed + "; this kernel has no fq qdisc (CONFIG_NET_SCH_FQ not set)",
                "fq",
                "BBR runs without fq pacing and this kernel cannot provide it: TCP paces with "
                "its internal timer (more CPU per byte; at 10 Gbit/s and above a sender core "
                "may saturate first). A kernel built with CONFIG_NET_SCH_FQ makes `tc qdisc "
                "replace dev IFACE root fq` possible.",
            )
        fixes: list[Fix] = []
        if iface and egress:
            command = f"tc qdisc replace dev {iface.name} root fq"
            fixes.append(self.command_fix(f"qdisc {iface.name}", "fq", command, name=iface.name))
        if default is not None and default != "fq":
            fixes.append(self.fix("net.core.default_qdisc", "fq"))
        return self.finding(
            "info",
            observed,
            "fq",
            "BBR runs without the fq qdisc, so it paces with TCP's internal timer (more CPU).",
            tuple(fixes),
            key="net.core.default_qdisc",
        )


class MtuProbing(Check):
    id = "tcp_mtu_probing"
    title = "Packetization-layer PMTU discovery"
    keys = ("net.ipv4.tcp_mtu_probing",)
    why = (
        "Where ICMP 'fragmentation needed' is filtered (a PMTU black hole) connections stall "
        "after the handshake; probing finds a working segment size instead."
    )
    guideline = "RFC 4821; Linux ip-sysctl: tcp_mtu_probing"
    severity_rule = "info when 0 (off)"

    def evaluate(self, env: AuditEnv) -> Finding:
        value = env.integer(self.keys[0])
        if value:
            return self.finding("ok", str(value), ">= 1", "MTU probing is enabled.")
        return self.finding(
            "info",
            "0 (off)",
            "1 (probe after a black hole is detected)",
            "MTU probing is off: a path that drops large packets silently will stall.",
            (self.fix(self.keys[0], "1"),),
        )


class SlowStartAfterIdle(Check):
    id = "tcp_slow_start_after_idle"
    title = "Slow start after idle"
    keys = ("net.ipv4.tcp_slow_start_after_idle",)
    why = (
        "After one RTO of silence the window collapses to its initial size; transfers that "
        "pause between files or requests start over with slow start each time."
    )
    guideline = "RFC 5681 §4.1; Linux ip-sysctl: tcp_slow_start_after_idle"
    severity_rule = "info when 1 (on)"

    def evaluate(self, env: AuditEnv) -> Finding:
        value = env.integer(self.keys[0])
        if not value:
            return self.finding("ok", "0", "0", "The window survives idle periods.")
        return self.finding(
            "info",
            "1 (on)",
            "0 for bulk transfers with pauses",
            "Each pause longer than a retransmission timeout restarts slow start; on a long "
            "path that costs several RTTs per file.",
            (self.fix(self.keys[0], "0"),),
        )


CHECKS: tuple[Check, ...] = (
    CongestionControl(),
    PacingQdisc(),
    NoMetricsSave(),
    CachedMetrics(),
    MtuProbing(),
    SlowStartAfterIdle(),
)
