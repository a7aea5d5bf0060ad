"""`calc`: the bandwidth-delay product and the buffer sizes and sysctl lines it implies."""

from __future__ import annotations

from dataclasses import dataclass

from tcpwizard.checks.window import KERNEL_INT_MAX, MAX_RECOMMENDED_BUFFER, next_power_of_two

# Stock Linux limits (net.ipv4.tcp_rmem/tcp_wmem max on a machine with enough RAM; the
# defaults of net.core.rmem_max/wmem_max are far lower). Recommendations never go below them.
LINUX_TCP_RMEM_MAX = 6291456
LINUX_TCP_WMEM_MAX = 4194304
LINUX_RMEM_MIN_DEFAULT = (4096, 131072)
LINUX_WMEM_MIN_DEFAULT = (4096, 16384)


@dataclass(frozen=True)
class SysctlLine:
    key: str
    value: str

    @property
    def command(self) -> str:
        shown = f'"{self.value}"' if " " in self.value else self.value
        return f"sysctl -w {self.key}={shown}"


@dataclass(frozen=True)
class BufferPlan:
    rtt_s: float
    rate_bps: float
    bdp_bytes: int
    buffer_1x: int  # bandwidth x RTT (Tierney: 'buffer size = bandwidth * RTT')
    buffer_2x: int  # 2 x BDP (Tierney: 'Recommended size = 2 x BDP'; Linux halves it)
    sysctl_max: int  # the value the sysctl lines use
    defaults_ok: bool  # stock Linux autotuning already covers 2 x BDP
    sysctls: tuple[SysctlLine, ...]
    capped: bool = False  # 2 x BDP is more than one socket buffer may be (MAX_RECOMMENDED_BUFFER)

    @property
    def cap_note(self) -> str | None:
        if not self.capped:
            return None
        return (
            f"2 x BDP ({self.buffer_2x} bytes) is more than one socket buffer can be: the kernel "
            f"takes an int ({KERNEL_INT_MAX} at most) and tcpwizard caps buffers at "
            f"{MAX_RECOMMENDED_BUFFER} bytes. One connection cannot fill this path; use "
            "parallel streams (e.g. --streams 8) or a larger MTU."
        )


def buffer_plan(rtt_s: float, rate_bps: float) -> BufferPlan:
    bdp = round(rate_bps * rtt_s / 8)
    two = 2 * bdp
    wanted = max(next_power_of_two(max(two, 1)), LINUX_TCP_WMEM_MAX)
    # The same cap as the audit's fixes (checks.window.recommended_buffer): a larger value is
    # either refused by the kernel (EINVAL above INT_MAX) or starves the host.
    top = min(wanted, MAX_RECOMMENDED_BUFFER)
    rmax = max(top, LINUX_TCP_RMEM_MAX)
    lines = (
        SysctlLine("net.core.rmem_max", str(top)),
        SysctlLine("net.core.wmem_max", str(top)),
        SysctlLine(
            "net.ipv4.tcp_rmem", f"{LINUX_RMEM_MIN_DEFAULT[0]} {LINUX_RMEM_MIN_DEFAULT[1]} {rmax}"
        ),
        SysctlLine(
            "net.ipv4.tcp_wmem", f"{LINUX_WMEM_MIN_DEFAULT[0]} {LINUX_WMEM_MIN_DEFAULT[1]} {top}"
        ),
    )
    return BufferPlan(
        rtt_s=rtt_s,
        rate_bps=rate_bps,
        bdp_bytes=bdp,
        buffer_1x=bdp,
        buffer_2x=two,
        sysctl_max=top,
        defaults_ok=two <= LINUX_TCP_WMEM_MAX,
        sysctls=lines,
        capped=wanted > top,
    )
