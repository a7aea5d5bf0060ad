"""Parallel streams as the work-around when loss holds one stream down (Tierney, "Work-around:
Use Parallel Streams"; Weigle and Feng measured 1-8): N loss-bound streams each get about the
Mathis bound, so N = ceil(capacity / bound) of them reach the path. Only when the loss is
the limit: with a window limit (buffers), streams only hide the buffer problem."""

from __future__ import annotations

import math

from tcpwizard.checks.model import Fix, HostRole

MAX_STREAMS = 16  # more than this is no longer a work-around but a denial of service


def streams_needed(capacity_mbps: float, per_stream_mbps: float) -> int | None:
    """Streams whose loss-bound rates add up to the capacity, 2-MAX_STREAMS; None when one
    stream already reaches it or the numbers are missing."""
    if per_stream_mbps <= 0 or capacity_mbps <= 0 or per_stream_mbps >= capacity_mbps:
        return None
    return max(2, min(MAX_STREAMS, math.ceil(capacity_mbps / per_stream_mbps)))


def tool_commands(n: int, host: str = "HOST") -> tuple[str, ...]:
    """How the tools people move data with open n streams."""
    return (
        f"iperf3 -c {host} -P {n}",
        f"globus-url-copy -p {n} -fast gsiftp://{host}/path/file file:///path/file",
        f"bbcp -s {n} user@{host}:/path/file /path/file",
        f"rclone copy --multi-thread-streams {n} remote:path/file /path/",
        f"tcpwizard check {host} --try-streams",
    )


def streams_fix(n: int, per_stream_mbps: float, host: HostRole = "local") -> Fix:
    return Fix(
        "parallel_streams",
        "other",
        host,
        "streams",
        str(n),
        "; ".join(tool_commands(n)),
        why=f"loss holds each stream to ~{per_stream_mbps:.1f} Mbit/s (Mathis bound); {n} "
        "streams share the loss and together reach the path's capacity",
        guideline="Tierney, TCP tuning: Work-around: Use Parallel Streams",
    )
