"""From `tcpwizard lab up` flag strings to a LabSpec (kept out of the CLI module so the
benchmarks and tests can build the same specs from the same strings)."""

from __future__ import annotations

import re
from dataclasses import replace

from tcpwizard.exitcodes import UsageError
from tcpwizard.lab.spec import (
    MAX_HOPS,
    MIN_QUEUE_PACKETS,
    HopSpec,
    LabSpec,
    LinkSpec,
    Side,
    parse_side_sysctl,
)
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


HOP_KEYS = ("rtt", "rate", "loss", "mtu", "icmp-ratelimit", "drop-frag-needed")


def parse_hops(count: int, texts: list[str] | tuple[str, ...] = ()) -> tuple[HopSpec, ...]:
    """`--hops N` routers; each `--hop K:rtt=40ms,loss=1%,mtu=1500,icmp-ratelimit=1s,
    drop-frag-needed` sets hop K (its link from the previous node, and its ICMP)."""
    if not 0 <= count <= MAX_HOPS:
        raise UsageError(f"--hops {count}: use 0-{MAX_HOPS}")
    hops = [HopSpec() for _ in range(count)]
    for text in texts:
        m = re.fullmatch(r"\s*(\d+)\s*:(.*)", text)
        if not m or not 1 <= int(m.group(1)) <= count:
            raise UsageError(f"--hop {text!r}: use K:key=value,... with K in 1-{count} (--hops)")
        k = int(m.group(1))
        fields: dict[str, object] = {}
        for part in filter(None, (p.strip() for p in m.group(2).split(","))):
            key, _sep, value = (x.strip() for x in part.partition("="))
            key = key.lower()
            if key == "rtt":
                fields["rtt_s"] = parse_duration(value)
            elif key == "rate":
                fields["rate_bps"] = parse_rate(value)
            elif key == "loss":
                fields["loss"] = parse_percent(value)
            elif key == "mtu" and value.isdigit():
                fields["mtu"] = int(value)
            elif key == "icmp-ratelimit":
                fields["icmp_ratelimit_ms"] = round(parse_duration(value, default_unit="ms") * 1e3)
            elif key == "drop-frag-needed" and value in ("", "1", "yes", "on"):
                fields["drop_frag_needed"] = True
            else:
                raise UsageError(f"--hop {text!r}: {key!r}: use {', '.join(HOP_KEYS)}")
        hops[k - 1] = replace(hops[k - 1], **fields)  # type: ignore[arg-type]
    return tuple(hops)


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
    hops: tuple[HopSpec, ...] = (),
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
        hops=hops,
    )
    spec.validate()
    return spec
