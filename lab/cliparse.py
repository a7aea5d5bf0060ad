"""From `tcpwizard lab up` flag strings to a LabSpec (kept out of the CLI module so the
benchmarks and tests can build the same specs from the same strings)."""

from __future__ import annotations

import re
from dataclasses import replace

from tcpwizard.exitcodes import UsageError
from tcpwizard.lab.spec import MIN_QUEUE_PACKETS, LabSpec, LinkSpec, Side, parse_side_sysctl
from tcpwizard.units import parse_duration, parse_percent, parse_rate, parse_size


def queue_bytes(text: str, rate_bps: float, rtt_s: float, mtu: int) -> int:
    """'1bdp', '0.5bdp' (of this direction's rate x the RTT) or a size like '256KB'."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*bdp\s*", text, re.IGNORECASE)
    if m:
        # A queue below a few packets only measures timeouts; floor it like LabSpec does.
        return max(round(float(m.group(1)) * rate_bps * rtt_s / 8), MIN_QUEUE_PACKETS * mtu)
    return parse_size(text)


def parse_link_overrides(text: str) -> dict[str, str]:
    """'rate=10mbit,loss=1%' -> {'rate': '10mbit', 'loss': '1%'}."""
    out: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.partition("=")
        key = key.strip().lower()
        if not sep or key not in ("rate", "delay", "loss", "jitter", "queue"):
            raise UsageError(
                f"--reverse {text!r}: use comma-separated rate=, delay= (one-way), loss=, "
                "jitter=, queue="
            )
        out[key] = value.strip()
    return out


def build_spec(
    *,
    name: str,
    rtt: str,
    rate: str,
    loss: str = "0%",
    jitter: str = "0ms",
    queue: str = "1bdp",
    mtu: int = 1500,
    reverse: str | None = None,
    sysctls: list[str] | tuple[str, ...] = (),
    backend: str = "auto",
) -> LabSpec:
    rate_bps = parse_rate(rate)
    o = parse_link_overrides(reverse or "")
    fwd_delay = parse_duration(rtt) / 2
    back_delay = parse_duration(o["delay"]) if "delay" in o else fwd_delay
    back_rate = parse_rate(o["rate"]) if "rate" in o else rate_bps
    rtt_s = fwd_delay + back_delay  # what a 'bdp' queue is measured against, both ways
    forward = LinkSpec(
        rate_bps=rate_bps,
        delay_s=fwd_delay,
        jitter_s=parse_duration(jitter),
        loss=parse_percent(loss),
        queue_bytes=queue_bytes(queue, rate_bps, rtt_s, mtu),
    )
    back = replace(
        forward,
        rate_bps=back_rate,
        delay_s=back_delay,
        jitter_s=parse_duration(o["jitter"]) if "jitter" in o else forward.jitter_s,
        loss=parse_percent(o["loss"]) if "loss" in o else forward.loss,
        queue_bytes=queue_bytes(o.get("queue", queue), back_rate, rtt_s, mtu),
    )
    per_side: dict[Side, list[tuple[str, str]]] = {"a": [], "b": []}
    for item in sysctls:
        side, key, value = parse_side_sysctl(item)
        per_side[side].append((key, value))
    spec = LabSpec(
        forward=forward,
        reverse=back,
        name=name,
        mtu=mtu,
        sysctls_a=tuple(per_side["a"]),
        sysctls_b=tuple(per_side["b"]),
        backend=backend,
    )
    spec.validate()
    return spec
