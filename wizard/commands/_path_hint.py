"""The path to judge buffers against, from --rtt/--bandwidth (shared by check and transfer)."""

from __future__ import annotations

from tcpwizard.checks.model import BdpTarget
from tcpwizard.checks.window import DEFAULT_TARGET
from tcpwizard.exitcodes import UsageError
from tcpwizard.units import parse_duration, parse_rate


def bdp_from_args(rtt: str | None, bandwidth: str | None) -> BdpTarget | None:
    """None when neither flag is given (the audit then uses DEFAULT_TARGET); a missing half
    is taken from the default."""
    if rtt is None and bandwidth is None:
        return None
    rtt_s = parse_duration(rtt) if rtt is not None else DEFAULT_TARGET.rtt_s
    rate = parse_rate(bandwidth) if bandwidth is not None else DEFAULT_TARGET.rate_bps
    if rtt_s <= 0:
        raise UsageError(f"--rtt must be positive: {rtt!r}")
    return BdpTarget(rtt_s=rtt_s, rate_bps=rate, source="flags")
