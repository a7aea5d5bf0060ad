"""Socket buffer limits judged against the target BDP (Weigle & Feng §5: 'Set the maximum
memory available to allocate per connection or for user-level tuning. Set ranges for Linux
autotuning.'; Tierney: 'TCP Buffer Tuning: System', buffer = 2 x BDP)."""

from __future__ import annotations

from tcpwizard.checks.base import SECTION5, TIERNEY, AuditEnv, Check, ratio_severity
from tcpwizard.checks.model import Finding, Fix, Severity
from tcpwizard.checks.window import (
    advised_buffer,
    granted_buffer,
    mbps,
    send_window_from_space,
    socket_buffer_cap,
    space_for_window,
    typical_send_window,
    typical_window_from_space,
    window_from_space,
)
from tcpwizard.units import format_bytes, format_rate

GUIDE_AUTOTUNE = f"{SECTION5}: set ranges for Linux autotuning; {TIERNEY}: buffer = 2 x BDP"
GUIDE_CORE = f"{SECTION5}: set the maximum memory per connection; {TIERNEY}: buffer = 2 x BDP"


def _ceiling_text(space: int, receive: bool, env: AuditEnv) -> tuple[float, str]:
    """(share of the target at the starting window, the sentence). The window starts at the
    kernel's opening share of the buffer and grows to the running share; both are shown, the
    severity goes by the first (a buffer that only fits the path later still stalls the
    start of every connection)."""
    if receive:
        lo = window_from_space(space, env.kernel, env.adv_win_scale)
        hi = typical_window_from_space(space, env.kernel, env.adv_win_scale)
    else:
        lo, hi = send_window_from_space(space), typical_send_window(space)
    direction = "receives" if receive else "sends"
    rate_lo, rate_hi = mbps(lo, env.per_stream.rtt_s), mbps(hi, env.per_stream.rtt_s)
    target = env.per_stream.rate_bps
    ratio = rate_lo * 1e6 / target
    if hi <= lo:
        span = f"{format_bytes(lo)} in flight, so one connection {direction} at most "
        span += f"{format_rate(rate_lo * 1e6)} at {env.per_stream.rtt_s * 1000:g} ms ({ratio:.0%}"
    else:
        span = (
            f"{format_bytes(lo)} to {format_bytes(hi)} in flight, so one connection "
            f"{direction} {format_rate(rate_lo * 1e6)} to {format_rate(rate_hi * 1e6)} at "
            f"{env.per_stream.rtt_s * 1000:g} ms ({ratio:.0%} to {rate_hi * 1e6 / target:.0%}"
        )
    share = " per-stream" if env.streams > 1 else ""
    return ratio, f"{span} of the {format_rate(target)}{share} target)"


def _limit_note(env: AuditEnv, recommended: int, need: int) -> str:
    if recommended >= need:
        return ""
    streams = -(-need * env.streams // max(recommended, 1))  # the path's need, split evenly
    return (
        f" Even the largest safe value ({format_bytes(recommended)}: at most RAM/16 and the "
        "kernel's cap of 2 GiB - 1 per socket, an int) cannot reach the target "
        f"with {env.streams} connection{'s' if env.streams > 1 else ''}: use at least "
        f"{streams} parallel streams (--streams {streams}) or a larger MTU."
    )


class _VectorBufferCheck(Check):
    """tcp_rmem / tcp_wmem: 'min default max' where max bounds kernel autotuning."""

    receive: bool

    def needed_space(self, env: AuditEnv) -> int:
        bdp = env.per_stream.bdp_bytes
        if self.receive:
            return space_for_window(bdp, env.kernel, env.adv_win_scale)
        return 2 * bdp

    def evaluate(self, env: AuditEnv) -> Finding:
        key = self.keys[0]
        lo, default, hi = env.ints(key, 3)
        observed = f"{lo} {default} {hi}"
        need = self.needed_space(env)
        recommended = max(advised_buffer(env.per_stream, env.ram_bytes), need)
        recommended = min(recommended, max(socket_buffer_cap(env.ram_bytes), hi))
        expected = f"max >= {need} ({format_bytes(need)} for {env.describe_target()})"
        if not lo <= default <= hi:
            fixed = f"{min(lo, 4096)} {max(min(default, hi), lo)} {max(hi, recommended)}"
            return self.finding(
                "warn",
                observed,
                "min <= default <= max",
                f"{key} is inconsistent (min <= default <= max does not hold); the kernel "
                "clamps the values in surprising ways.",
                (self.fix(key, fixed),),
            )
        ratio, ceiling = _ceiling_text(hi, self.receive, env)
        severity = ratio_severity(ratio, env.per_stream)
        if severity == "ok":
            return self.finding(
                "ok", observed, expected, f"Autotuning may grow to {format_bytes(hi)}: {ceiling}."
            )
        return self.finding(
            severity,
            observed,
            expected,
            f"Autotuning stops at {format_bytes(hi)}: {ceiling}."
            + _limit_note(env, recommended, need),
            (self.fix(key, f"{lo} {default} {max(hi, recommended)}"),),
        )


class TcpRmem(_VectorBufferCheck):
    id = "tcp_rmem"
    answers = ("receiver-window",)
    title = "Receive autotuning range"
    keys = ("net.ipv4.tcp_rmem",)
    why = "The receive window, and so the download rate per RTT, is bounded by tcp_rmem max."
    guideline = GUIDE_AUTOTUNE
    severity_rule = "ok when max's window >= BDP; warn >= 50% of target rate; else crit"
    receive = True


class TcpWmem(_VectorBufferCheck):
    id = "tcp_wmem"
    answers = ("sender-buffer",)
    title = "Send autotuning range"
    keys = ("net.ipv4.tcp_wmem",)
    why = "Unacknowledged data stays in the send buffer: tcp_wmem max bounds the upload rate."
    guideline = GUIDE_AUTOTUNE
    severity_rule = "ok when half of max >= BDP; warn >= 50% of target rate; else crit"
    receive = False


class _CoreMaxCheck(Check):
    """net.core.rmem_max / wmem_max: the ceiling for applications that set SO_RCVBUF /
    SO_SNDBUF themselves (the kernel grants twice the request, clamped to this first)."""

    receive: bool

    def evaluate(self, env: AuditEnv) -> Finding:
        key = self.keys[0]
        core_max = env.integer(key)
        granted = granted_buffer(core_max, core_max)
        bdp = env.per_stream.bdp_bytes
        if self.receive:
            need_request = (space_for_window(bdp, env.kernel, env.adv_win_scale) + 1) // 2
        else:
            need_request = bdp
        ratio, ceiling = _ceiling_text(granted, self.receive, env)
        # Only applications that size their own buffers hit this limit: never critical,
        # and only informative for a target we merely assumed.
        severity: Severity = ratio_severity(ratio, env.per_stream, cap="warn", default_cap="info")
        expected = f">= {need_request} ({format_bytes(need_request)} for {env.describe_target()})"
        message = (
            f"An application that sets SO_{'RCV' if self.receive else 'SND'}BUF gets at most "
            f"2 x {format_bytes(core_max)}: {ceiling}."
        )
        if severity == "ok":
            return self.finding("ok", str(core_max), expected, message)
        recommended = max(core_max, advised_buffer(env.per_stream, env.ram_bytes))
        fixes: tuple[Fix, ...] = (self.fix(key, str(recommended)),)
        note = " (A global setting: change it in the initial network namespace.)"
        return self.finding(severity, str(core_max), expected, message + note, fixes)


class RmemMax(_CoreMaxCheck):
    id = "rmem_max"
    answers = ("receiver-window",)
    title = "Largest receive buffer an application may request"
    keys = ("net.core.rmem_max",)
    why = "User-level tuning (setsockopt, DRS, iperf3 -w) cannot exceed 2 x rmem_max."
    guideline = GUIDE_CORE
    severity_rule = "warn when 2 x rmem_max cannot hold a BDP window (info for default target)"
    receive = True


class WmemMax(_CoreMaxCheck):
    id = "wmem_max"
    answers = ("sender-buffer",)
    title = "Largest send buffer an application may request"
    keys = ("net.core.wmem_max",)
    why = "User-level tuning (setsockopt, DRS, iperf3 -w) cannot exceed 2 x wmem_max."
    guideline = GUIDE_CORE
    severity_rule = "warn when 2 x wmem_max cannot keep a BDP in flight (info for default)"
    receive = False


class ModerateRcvbuf(Check):
    id = "tcp_moderate_rcvbuf"
    answers = ("receiver-window",)
    title = "Receive buffer autotuning"
    keys = ("net.ipv4.tcp_moderate_rcvbuf", "net.ipv4.tcp_rmem")
    why = "With it off, sockets keep tcp_rmem's default size and the window never grows."
    guideline = f"{SECTION5}: set ranges for Linux autotuning"
    severity_rule = "off: the default buffer judged like tcp_rmem, at least warn"

    def evaluate(self, env: AuditEnv) -> Finding:
        value = env.integer(self.keys[0])
        if value != 0:
            return self.finding("ok", "1 (on)", "1 (on)", "Receive autotuning is on.")
        default = env.ints("net.ipv4.tcp_rmem", 3)[1]
        ratio, ceiling = _ceiling_text(default, True, env)
        severity = ratio_severity(ratio, env.per_stream)
        if severity == "ok":
            severity = "warn"
        return self.finding(
            severity,
            "0 (off)",
            "1 (on)",
            f"Receive autotuning is off, buffers stay at {format_bytes(default)}: {ceiling}.",
            (self.fix(self.keys[0], "1"),),
        )


class TcpMem(Check):
    id = "tcp_mem"
    title = "Total TCP memory"
    keys = ("net.ipv4.tcp_mem", "net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem")
    why = (
        "Above tcp_mem's pressure value the kernel shrinks every socket's buffers; above "
        "its max it refuses memory. It must hold several fully grown connections but "
        "stay well below RAM."
    )
    guideline = f"{SECTION5}: set the maximum memory available"
    severity_rule = "warn when max < one connection's full buffers or max > RAM"

    def evaluate(self, env: AuditEnv) -> Finding:
        text = env.optional(self.keys[0])
        if text is None:
            return self.finding(
                "info",
                "not visible",
                "-",
                "tcp_mem is global and not shown in this network namespace; "
                "audit the initial namespace to judge it.",
            )
        lo, pressure, hi = env.ints(self.keys[0], 3)
        page = env.page_size
        per_conn = env.ints("net.ipv4.tcp_rmem", 3)[2] + env.ints("net.ipv4.tcp_wmem", 3)[2]
        limit = hi * page
        ram = env.ram_bytes
        share = f" = {limit / ram:.0%} of RAM" if ram else ""
        observed = f"{lo} {pressure} {hi} pages (max {format_bytes(limit)}{share})"
        expected = f"max >= {format_bytes(per_conn)} (one connection at full buffers), < RAM"
        if ram and limit > ram:
            new_hi = ram // 8 // page
            scale = new_hi / hi
            value = f"{int(lo * scale)} {int(pressure * scale)} {new_hi}"
            return self.finding(
                "warn",
                observed,
                expected,
                "tcp_mem allows TCP more memory than the machine has: under load the host "
                "can run out of memory before TCP backs off.",
                (self.fix(self.keys[0], value),),
            )
        if limit < per_conn:
            target_bytes = 4 * per_conn
            if ram:
                target_bytes = min(target_bytes, ram // 4)
            new_hi = max(hi, target_bytes // page)
            scale = new_hi / hi
            value = f"{int(lo * scale)} {int(pressure * scale)} {new_hi}"
            return self.finding(
                "warn",
                observed,
                expected,
                f"All TCP sockets together may use {format_bytes(limit)}, less than one "
                f"connection with full buffers ({format_bytes(per_conn)}): the kernel will "
                "shrink windows under memory pressure.",
                (self.fix(self.keys[0], value),),
            )
        conns = limit // per_conn if per_conn else 0
        return self.finding(
            "ok",
            observed,
            expected,
            f"TCP may use {format_bytes(limit)} in total: room for {conns} connections "
            "with fully grown buffers.",
        )


CHECKS: tuple[Check, ...] = (
    TcpRmem(),
    TcpWmem(),
    RmemMax(),
    WmemMax(),
    ModerateRcvbuf(),
    TcpMem(),
)
