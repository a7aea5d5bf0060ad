"""Can this host fill the target with N streams? Buffers per stream against the kernel's
per-socket cap, tcp_mem against N streams' buffers, one flow's rate through this host's
own stack against the per-stream share, and the cores the streams need."""

from __future__ import annotations

import math

from tcpwizard.checks.base import SECTION5, AuditEnv, Check
from tcpwizard.checks.host_rates import ESNET_LINUX, FLOW_PLACEMENT_BPS, HostCheck
from tcpwizard.checks.model import BdpTarget, Finding, Fix, Severity
from tcpwizard.checks.nicfacts import online_cpus
from tcpwizard.checks.window import KERNEL_INT_MAX, socket_buffer_cap, space_for_window
from tcpwizard.units import format_bytes, format_rate

MAX_ADVISED_STREAMS = 128  # bounds the search; far beyond any --streams (1-16)


def _stream_need(env: AuditEnv, streams: int) -> tuple[int, int]:
    """(receive buffer, send buffer) one of `streams` streams needs for its BDP share."""
    t = env.target
    share = BdpTarget(t.rtt_s, t.rate_bps / streams, t.source)
    return space_for_window(share.bdp_bytes, env.kernel, env.adv_win_scale), 2 * share.bdp_bytes


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:] + "."


def _rate_text(bps: float) -> str:
    return f"{max(1, math.floor(bps / 1e6))}mbit"


class StreamsForTarget(HostCheck):
    id = "streams_for_target"
    answers = ("host-cpu", "receiver-window", "sender-buffer")
    title = "Streams, buffers and cores for the target"
    keys = ("--streams", "net.ipv4.tcp_mem", "loopback flow", "/sys/devices/system/cpu/online")
    why = (
        "One socket's buffer is a C int (at most 2 GiB - 1) and one flow runs on one core: "
        "past either limit only parallel streams fill the path, and tcp_mem must hold all "
        "of their buffers at once."
    )
    guideline = f"{ESNET_LINUX}: buffers up to 2 GiB, parallel streams at 100G; {SECTION5}"
    severity_rule = (
        "crit (warn for the default target) when N streams cannot reach the target or the "
        "host has fewer cores than the streams it needs; warn when tcp_mem's pressure value "
        "is below N streams' buffers"
    )

    def evaluate(self, env: AuditEnv) -> Finding:
        n = env.streams
        t = env.target
        # One flow is timed only where a flow's core can be the limit (FLOW_PLACEMENT_BPS):
        # below it every current core keeps up, and the audit stays free of traffic.
        flow = env.host.flow_bps() if t.rate_bps / n >= FLOW_PLACEMENT_BPS else None
        cpus = online_cpus(env.host)
        rcv, snd = _stream_need(env, n)
        cap = socket_buffer_cap(env.ram_bytes)
        # Streams the buffers need: each socket's share within the advised per-socket cap.
        by_buffers = next(
            (k for k in range(1, MAX_ADVISED_STREAMS + 1) if max(_stream_need(env, k)) <= cap),
            MAX_ADVISED_STREAMS,
        )
        by_cpu = math.ceil(t.rate_bps / flow) if flow else 1
        needed = max(by_buffers, by_cpu)
        cores = len(cpus) if cpus else None
        observed = f"{n} stream{'s' if n > 1 else ''}; per stream {format_bytes(rcv)} receive, "
        observed += f"{format_bytes(snd)} send buffer"
        observed += (
            f"; one loopback flow {format_rate(flow)}" if flow else "; one flow: not measured"
        )
        observed += f"; {cores} CPUs" if cores else ""
        expected = f">= {needed} streams for {format_rate(t.rate_bps)} x {t.rtt_s * 1000:g} ms"
        problems: list[str] = []
        fixes: list[Fix] = []
        severity: Severity = "ok"
        hard: Severity = "crit" if t.source != "default" else "warn"
        if max(rcv, snd) > KERNEL_INT_MAX:
            problems.append(
                f"one stream's share needs {format_bytes(max(rcv, snd))} of buffer, past the "
                f"kernel's per-socket cap of {format_bytes(KERNEL_INT_MAX)} (a C int): no "
                f"sysctl can give it; use at least {by_buffers} parallel streams (jumbo "
                "frames do not shrink the window, only the per-packet work)"
            )
        elif max(rcv, snd) > cap:
            problems.append(
                f"one stream's share needs {format_bytes(max(rcv, snd))} of buffer, more than "
                f"the {format_bytes(cap)} advised per socket (RAM/16): use at least "
                f"{by_buffers} parallel streams"
            )
        if flow and t.rate_bps / n > flow:
            problems.append(
                f"one flow through this host's own stack (loopback, no NIC) reached "
                f"{format_rate(flow)}; {format_rate(t.rate_bps / n)} per stream is more than "
                f"one core can carry: it takes at least {by_cpu} streams, each on its own core"
            )
        if problems:
            severity = hard
            where = env.target_address or "HOST"
            fixes.append(
                self.command_fix(
                    "streams",
                    str(needed),
                    f"tcpwizard check {where} --bandwidth {_rate_text(t.rate_bps)} "
                    f"--rtt {t.rtt_s * 1000:g}ms --streams {needed}",
                )
            )
        if cores is not None and flow and by_cpu > cores:
            severity = hard
            problems.append(
                f"this host cannot reach the target: {by_cpu} streams want {by_cpu} cores "
                f"and it has {cores}"
            )
        mem = self._tcp_mem(env, n, rcv, snd)
        if mem is not None:
            problems.append(mem[0])
            fixes.append(mem[1])
            if severity == "ok":
                severity = "warn"
        if not flow:
            why = env.host.why("flow_bps")
            note = f" (one flow's rate not measured: {why})" if why else ""
        else:
            note = ""
        if not problems:
            return self.finding(
                "ok",
                observed,
                expected,
                f"{n} stream{'s' if n > 1 else ''} can carry the target: buffers within the "
                f"per-socket cap{', one flow per core' if flow else ''}{note}.",
            )
        return self.finding(
            severity,
            observed,
            expected,
            _sentence("; ".join(problems)) + note,
            tuple(fixes),
        )

    def _tcp_mem(self, env: AuditEnv, n: int, rcv: int, snd: int) -> tuple[str, Fix] | None:
        """tcp_mem's pressure value (pages) against N streams' full buffers: above it the
        kernel stops growing buffers and trims them (net/ipv4/tcp.c, tcp_mem)."""
        text = env.optional("net.ipv4.tcp_mem")
        if text is None:
            return None
        lo, pressure, hi = env.ints("net.ipv4.tcp_mem", 3)
        need = n * (rcv + snd)
        page = env.page_size
        if pressure * page >= need:
            return None
        new_pressure = -(-need // page)
        new_hi = max(hi, new_pressure + new_pressure // 2)
        if env.ram_bytes and new_hi * page > env.ram_bytes // 2:
            new_hi = max(hi, env.ram_bytes // 2 // page)
            new_pressure = min(new_pressure, new_hi)
        value = f"{lo} {new_pressure} {new_hi}"
        return (
            f"the pressure value of tcp_mem ({format_bytes(pressure * page)}) is below the "
            f"{format_bytes(need)} that {n} stream{'s' if n > 1 else ''} at full buffers hold: "
            "the kernel trims every socket's buffer before the streams reach the target",
            self.fix("net.ipv4.tcp_mem", value),
        )


CHECKS: tuple[Check, ...] = (StreamsForTarget(),)
