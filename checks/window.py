"""Buffer arithmetic the way the Linux kernel does it.

Two facts make "buffer = BDP" wrong on Linux:

1. setsockopt(SO_RCVBUF/SO_SNDBUF, n) grants 2*min(n, net.core.rmem_max/wmem_max): the kernel
   doubles the request to pay for its bookkeeping (socket(7)).
2. Only part of the receive buffer is advertised as window; the rest pays for sk_buff
   overhead. Since Linux 6.6 the share is a per-socket `scaling_ratio` out of 256
   (TCP_RMEM_TO_WIN_SCALE = 8) that starts at 128 (50%) and is later re-measured as
   skb->len/skb->truesize:  window = space * scaling_ratio >> 8.
   Before 6.6 it was net.ipv4.tcp_adv_win_scale:
   window = space - space >> s  (s > 0),   window = space >> -s  (s <= 0);
   the default s = 1 also gives 50%.
   Sizing (what a target needs) uses the starting ratio, 50%: the connection opens with it,
   so a buffer sized by it never holds the window back. Predictions (what a connection will
   get) use the share measured once the connection runs, TYPICAL_RECV_SHARE.

On the send side the kernel sizes its own send buffer at twice the congestion window
(tcp_sndbuf_expand), so sizing counts half of the send buffer as data in flight; a running
connection keeps more in flight than that (TYPICAL_SEND_SHARE). The halves give the classic
rule: buffers of 2 x BDP (Tierney, "Setting the TCP buffer sizes").

The typical shares were measured on the lab (Linux 6.18, MTU 1500, a 500 Mbit/s x 100 ms path
far larger than the buffer, steady state of a 6 s autotuned transfer): a tcp_rmem max of
1, 2 and 4 MiB advertised 0.622, 0.619 and 0.620 of it; a tcp_wmem max of 1, 2 and 4 MiB kept
0.735, 0.686 and 0.721 of it in flight.
"""

from __future__ import annotations

import re

from tcpwizard.checks.model import BdpTarget, ThroughputCeiling

TCP_RMEM_TO_WIN_SCALE = 8
DEFAULT_SCALING_RATIO = 1 << (TCP_RMEM_TO_WIN_SCALE - 1)  # 128/256 = 50%
TYPICAL_RECV_SHARE = 0.62  # advertised window / receive buffer, running (see module doc)
TYPICAL_SEND_SHARE = 0.70  # data in flight / send buffer, running
MAX_UNSCALED_WINDOW = 65535
MAX_SCALED_WINDOW = 65535 << 14  # RFC 7323: window scale shift at most 14
CEILING_RTTS_MS: tuple[float, ...] = (10.0, 50.0, 100.0, 200.0)
# Judged when neither --rtt/--bandwidth nor a measurement is given: a gigabit path across a
# continent, the long fat network this tool is for (BDP 12.5 MB).
DEFAULT_TARGET = BdpTarget(rtt_s=0.100, rate_bps=1e9, source="default")
# Buffer sysctls are C ints: `sysctl -w net.ipv4.tcp_rmem="... 2147483648"` fails with EINVAL.
KERNEL_INT_MAX = (1 << 31) - 1
# Per-socket buffer limits we never exceed in a recommendation (a power of two under
# KERNEL_INT_MAX, so every advised value is one the kernel takes).
MAX_RECOMMENDED_BUFFER = 1 << 30
RAM_FRACTION_PER_SOCKET = 16  # at most RAM/16 for one socket's buffer


def parse_kernel_version(release: str) -> tuple[int, int]:
    m = re.match(r"(\d+)\.(\d+)", release)
    if not m:
        return (0, 0)
    return (int(m.group(1)), int(m.group(2)))


def uses_scaling_ratio(kernel: tuple[int, int]) -> bool:
    """Linux 6.6 replaced tcp_adv_win_scale by the measured per-socket scaling_ratio.
    An unknown version (0, 0) is taken as modern."""
    return kernel >= (6, 6) or kernel == (0, 0)


def window_from_space(space: int, kernel: tuple[int, int], adv_win_scale: int = 1) -> int:
    """The receive window the kernel advertises for `space` bytes of receive buffer."""
    if uses_scaling_ratio(kernel):
        return (space * DEFAULT_SCALING_RATIO) >> TCP_RMEM_TO_WIN_SCALE
    if adv_win_scale <= 0:
        return space >> min(-adv_win_scale, 31)
    return space - (space >> adv_win_scale)


def typical_window_from_space(space: int, kernel: tuple[int, int], adv_win_scale: int = 1) -> int:
    """The window a running connection advertises for `space` bytes: the measured share
    on kernels with scaling_ratio; before 6.6 tcp_adv_win_scale fixes it exactly."""
    if uses_scaling_ratio(kernel):
        return int(space * TYPICAL_RECV_SHARE)
    return window_from_space(space, kernel, adv_win_scale)


def typical_send_window(space: int) -> int:
    """Data in flight a running connection keeps with a send buffer of `space` bytes."""
    return int(space * TYPICAL_SEND_SHARE)


def space_for_window(window: int, kernel: tuple[int, int], adv_win_scale: int = 1) -> int:
    """The smallest receive buffer whose advertised window is at least `window`."""
    lo, hi = window, window * 64 + 1
    while lo < hi:  # window_from_space is monotonic: binary search, bounded by ~40 steps
        mid = (lo + hi) // 2
        if window_from_space(mid, kernel, adv_win_scale) >= window:
            hi = mid
        else:
            lo = mid + 1
    return lo


def send_window_from_space(space: int) -> int:
    """Data in flight a send buffer of `space` bytes sustains (half, see module doc)."""
    return space // 2


def granted_buffer(request: int, core_max: int) -> int:
    """What setsockopt(SO_RCVBUF/SO_SNDBUF, request) actually gives: twice the request,
    clamped to net.core.rmem_max/wmem_max first."""
    return 2 * min(request, core_max)


def mbps(window_bytes: float, rtt_s: float) -> float:
    return window_bytes * 8 / rtt_s / 1e6


def next_power_of_two(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def recommended_buffer(target: BdpTarget, ram_bytes: int | None) -> int:
    """2 x BDP rounded up to a power of two (headroom, and the values admins recognise),
    capped at RAM/16 and 1 GiB so a fix can never starve the host."""
    need = next_power_of_two(2 * max(target.bdp_bytes, 1))
    return min(need, buffer_cap(ram_bytes))


def socket_buffer_cap(ram_bytes: int | None) -> int:
    """The largest buffer the audit advises for one socket: the kernel's int cap, and at
    most RAM/16 (without a RAM figure, the 1 GiB of every other recommendation)."""
    if ram_bytes is None or ram_bytes <= 0:
        return MAX_RECOMMENDED_BUFFER
    return min(KERNEL_INT_MAX, ram_bytes // RAM_FRACTION_PER_SOCKET)


def advised_buffer(target: BdpTarget, ram_bytes: int | None) -> int:
    """recommended_buffer up to the kernel's int cap: 2 x BDP rounded up to a power of two;
    past 1 GiB the next power of two is over the cap, so the cap itself (2 GiB - 1, the
    value ESnet's 100G hosts use), where RAM/16 allows."""
    need = next_power_of_two(2 * max(target.bdp_bytes, 1))
    if need > MAX_RECOMMENDED_BUFFER:
        need = KERNEL_INT_MAX
    return min(need, socket_buffer_cap(ram_bytes))


def buffer_cap(ram_bytes: int | None) -> int:
    if ram_bytes is None or ram_bytes <= 0:
        return MAX_RECOMMENDED_BUFFER
    return min(MAX_RECOMMENDED_BUFFER, ram_bytes // RAM_FRACTION_PER_SOCKET)


def running_windows(
    recv_space: int,
    send_space: int,
    kernel: tuple[int, int],
    adv_win_scale: int,
    *,
    window_scaling: bool,
    route_window: int | None = None,
) -> tuple[int, int]:
    """The window law's one source: (receive window, data in flight) of a running
    connection with these buffers, with every clamp (no window scaling: 64 KB; a route's
    `window` metric). The audit's ceilings and the verdict's bounds both come from here."""
    limit = MAX_SCALED_WINDOW if window_scaling else MAX_UNSCALED_WINDOW
    if route_window:
        limit = min(limit, route_window)
    receive = min(typical_window_from_space(recv_space, kernel, adv_win_scale), limit)
    return receive, min(typical_send_window(send_space), limit)


def ceilings(
    *,
    recv_space: int,
    send_space: int,
    app_recv_space: int,
    app_send_space: int,
    kernel: tuple[int, int],
    adv_win_scale: int,
    window_scaling: bool,
    route_window: int | None = None,
    rtts_ms: tuple[float, ...] = CEILING_RTTS_MS,
) -> tuple[ThroughputCeiling, ...]:
    """The throughput one running connection of this host can receive and send per RTT.

    Without window scaling neither direction can exceed 64 KB in flight (the option is
    negotiated in the SYN, so one host without it turns it off both ways)."""

    def windows(recv: int, send: int) -> tuple[int, int]:
        return running_windows(
            recv,
            send,
            kernel,
            adv_win_scale,
            window_scaling=window_scaling,
            route_window=route_window,
        )

    recv, send = windows(recv_space, send_space)
    app_recv, app_send = windows(app_recv_space, app_send_space)
    out = []
    for rtt_ms in rtts_ms:
        rtt = rtt_ms / 1000
        out.append(
            ThroughputCeiling(
                rtt_ms=rtt_ms,
                receive_mbps=round(mbps(recv, rtt), 2),
                send_mbps=round(mbps(send, rtt), 2),
                receive_app_mbps=round(mbps(app_recv, rtt), 2),
                send_app_mbps=round(mbps(app_send, rtt), 2),
            )
        )
    return tuple(out)
