"""The grammar of `tcpwizard lab up`'s compound flags (--queue, --reverse, --hop, --sysctl,
--policer, --middlebox, --name) and the LabSpec the flags build. What a value inside them is
(a duration, a rate, a share, an MTU, a size) is tcpwizard.inputs' rule, the one every other
flag of the CLI follows; argparse (through argtypes.parsed) puts the flag in front of a
one-line error, exit 64."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

from tcpwizard.exitcodes import TcpWizardError, UsageError
from tcpwizard.inputs import (
    MIN_MTU_IPV6,
    check_duration,
    check_mtu,
    check_rate,
    check_share,
    check_size,
)
from tcpwizard.lab.spec import (
    MIDDLEBOX_WAYS,
    MIN_QUEUE_PACKETS,
    STRIPPABLE,
    HopSpec,
    LabSpec,
    LinkSpec,
    MiddleboxSpec,
    Side,
    check_name,
    parse_side_sysctl,
)

N = TypeVar("N", int, float)


@dataclass(frozen=True)
class Queue:
    """A drop-tail limit: `bdp` times the direction's bandwidth-delay product, or `nbytes`."""

    bdp: float = 1.0
    nbytes: int | None = None

    def resolve(self, rate_bps: float, rtt_s: float, mtu: int) -> int:
        if self.nbytes is not None:
            return self.nbytes
        # A queue below a few packets only measures timeouts; floor it like LabSpec does.
        return max(round(self.bdp * rate_bps * rtt_s / 8), MIN_QUEUE_PACKETS * mtu)


def parse_queue(text: str) -> Queue:
    """'1bdp', '0.5bdp' (of each direction's rate x the RTT) or a size like '256KB'."""
    m = re.fullmatch(r"\s*(.*?)\s*bdp\s*", text, re.IGNORECASE)
    if m is None:
        return Queue(nbytes=check_size(text))
    if not re.fullmatch(r"[0-9]*\.?[0-9]+", m.group(1)) or float(m.group(1)) <= 0:
        raise UsageError(f"{text!r}: use a positive multiple of the BDP (1bdp, 0.5bdp) or a size")
    return Queue(bdp=float(m.group(1)))


ONE_BDP = Queue()


@dataclass(frozen=True)
class Policer:
    """A token-bucket policer (lab/policer.py): rate_bps 0 means none."""

    rate_bps: float = 0.0
    burst_bytes: int | None = None


NO_POLICER = Policer()
POLICER_KEYS = ("rate", "burst")


def _policer_rate(text: str) -> float:
    return 0.0 if text.strip().lower() in ("off", "none", "0") else check_rate(text)


def parse_policer(text: str) -> Policer:
    """'rate=20mbit,burst=64KB' (or just '20mbit'): what exceeds the rate is dropped."""
    if "=" not in text:
        return Policer(_value("rate", _policer_rate, text))
    pol = Policer()
    for key, value in _settings(text, POLICER_KEYS):
        if key == "rate":
            pol = replace(pol, rate_bps=_value(key, _policer_rate, value))
        else:
            pol = replace(pol, burst_bytes=_value(key, check_size, value))
    if not pol.rate_bps and pol.burst_bytes is not None:
        raise UsageError("a policer burst needs a policer rate")
    return pol


@dataclass(frozen=True)
class Reverse:
    """`--reverse`: how the b->a direction differs from a->b (None: the same)."""

    rate_bps: float | None = None
    delay_s: float | None = None
    jitter_s: float | None = None
    loss: float | None = None
    queue: Queue | None = None
    policer: Policer | None = None


def _settings(body: str, keys: Sequence[str]) -> Iterator[tuple[str, str]]:
    """(key, value) of 'key=value,key,...' (a bare key has the value ''), keys checked."""
    for part in filter(None, (p.strip() for p in body.split(","))):
        key, _sep, value = (x.strip() for x in part.partition("="))
        if key.lower() not in keys:
            raise UsageError(f"{key!r}: use {', '.join(keys)}")
        yield key.lower(), value


def _value(key: str, read: Callable[[str], N], text: str) -> N:
    try:
        return read(text)
    except TcpWizardError as exc:
        raise UsageError(f"{key}: {exc}") from None


def _zero_ok(text: str) -> float:
    return check_duration(text, "ms", zero_ok=True)


REVERSE_KEYS = ("rate", "delay", "loss", "jitter", "queue", "policer", "policer-burst")


def parse_reverse(text: str) -> Reverse:
    """'rate=10mbit,delay=40ms,loss=1%,jitter=1ms,queue=0.5bdp,policer=5mbit,
    policer-burst=64KB' (delay is one-way; policer=off: none this way)."""
    rev = Reverse()
    burst: int | None = None
    for key, value in _settings(text, REVERSE_KEYS):
        if key == "policer":
            rev = replace(rev, policer=Policer(_value(key, _policer_rate, value)))
        elif key == "policer-burst":
            burst = _value(key, check_size, value)
        elif key == "rate":
            rev = replace(rev, rate_bps=_value(key, check_rate, value))
        elif key == "delay":
            rev = replace(rev, delay_s=_value(key, _zero_ok, value))
        elif key == "loss":
            rev = replace(rev, loss=_value(key, check_share, value))
        elif key == "jitter":
            rev = replace(rev, jitter_s=_value(key, _zero_ok, value))
        else:
            try:
                rev = replace(rev, queue=parse_queue(value))
            except TcpWizardError as exc:
                raise UsageError(f"queue: {exc}") from None
    if burst is not None:
        if rev.policer is None or not rev.policer.rate_bps:
            raise UsageError("policer-burst needs policer=RATE")
        rev = replace(rev, policer=replace(rev.policer, burst_bytes=burst))
    return rev


SAME_BOTH_WAYS = Reverse()
HOP_KEYS = (
    "rtt", "rate", "loss", "mtu", "icmp-ratelimit", "drop-frag-needed", "policer",
    "policer-burst",
)  # fmt: skip


def _hop_mtu(text: str) -> int:
    return check_mtu(text, lowest=MIN_MTU_IPV6)


def parse_hop(text: str) -> tuple[int, HopSpec]:
    """'K:rtt=40ms,rate=50mbit,loss=1%,mtu=1500,icmp-ratelimit=1s,drop-frag-needed,
    policer=20mbit,policer-burst=64KB': hop K (its link from the previous node, its ICMP and
    a policer on what it forwards toward b)."""
    m = re.fullmatch(r"\s*(\d+)\s*:(.*)", text)
    if not m:
        raise UsageError(f"{text!r}: use K:key=value,... with K the hop's number")
    hop = HopSpec()
    for key, value in _settings(m.group(2), HOP_KEYS):
        if key == "rtt":
            hop = replace(hop, rtt_s=_value(key, _zero_ok, value))
        elif key == "rate":
            hop = replace(hop, rate_bps=_value(key, check_rate, value))
        elif key == "loss":
            hop = replace(hop, loss=_value(key, check_share, value))
        elif key == "mtu":
            hop = replace(hop, mtu=_value(key, _hop_mtu, value))
        elif key == "icmp-ratelimit":
            hop = replace(hop, icmp_ratelimit_ms=round(_value(key, _zero_ok, value) * 1e3))
        elif key == "policer":
            hop = replace(hop, policer_bps=_value(key, _policer_rate, value) or None)
        elif key == "policer-burst":
            hop = replace(hop, policer_burst_bytes=_value(key, check_size, value))
        elif value.lower() in ("", "1", "yes", "on"):
            hop = replace(hop, drop_frag_needed=True)
        else:
            raise UsageError(f"drop-frag-needed takes no value, not {value!r}")
    if hop.policer_burst_bytes is not None and hop.policer_bps is None:
        raise UsageError("policer-burst needs policer=RATE")
    return int(m.group(1)), hop


def hops_from(count: int, settings: Sequence[tuple[int, HopSpec]] = ()) -> tuple[HopSpec, ...]:
    """`--hops N` routers, hop K as its `--hop K:...` sets it (the others plain routers)."""
    hops = [HopSpec() for _ in range(count)]
    given: set[int] = set()
    for k, hop in settings:
        if not 1 <= k <= count:
            known = f"use 1-{count} (--hops {count})" if count else "give --hops N for N routers"
            raise UsageError(f"lab up: argument --hop: hop {k}: {known}")
        if k in given:
            raise UsageError(f"lab up: argument --hop: hop {k} twice: give its settings in one")
        given.add(k)
        hops[k - 1] = hop
    return tuple(hops)


MIDDLEBOX_KEYS = ("strip", "mss", "hop", "way")


def parse_middlebox(text: str) -> MiddleboxSpec:
    """'strip=window+sack-perm,mss=1200,hop=2,way=syn': options the device overwrites in
    every SYN and SYN-ACK (or only one of them), the MSS it clamps them to, the router it
    sits on (checked against the lab's hops and MTU when the spec is built)."""
    strip: list[str] = []
    mss: int | None = None
    hop: int | None = None
    way = "both"
    for key, value in _settings(text, MIDDLEBOX_KEYS):
        if key == "way":
            if value.lower() not in MIDDLEBOX_WAYS:
                raise UsageError(f"way {value!r}: use {', '.join(MIDDLEBOX_WAYS)}")
            way = value.lower()
        elif key == "strip":
            for option in filter(None, (o.strip().lower() for o in value.split("+"))):
                if option not in STRIPPABLE:
                    raise UsageError(f"strip {option!r}: use {', '.join(STRIPPABLE)}")
                strip.append(option)
        elif not value.isdigit():
            raise UsageError(f"{key}: {value!r} is not a whole number")
        elif key == "mss":
            mss = int(value)
        else:
            hop = int(value)
    mb = MiddleboxSpec(tuple(dict.fromkeys(strip)), mss, hop, way)
    if not mb.strip and mb.mss is None:
        raise UsageError(f"{text!r}: give strip=OPTION[+OPTION] and/or mss=BYTES")
    return mb


# What argparse calls for each flag (by `lab up --FLAG`; `name` also for exec and down).
FLAG_TYPES: dict[str, Callable[[str], object]] = {
    "name": check_name,
    "queue": parse_queue,
    "reverse": parse_reverse,
    "hop": parse_hop,
    "policer": parse_policer,
    "sysctl": parse_side_sysctl,
    "middlebox": parse_middlebox,
}


def build_spec(
    *,
    name: str,
    rtt_s: float,
    rate_bps: float,
    loss: float = 0.0,
    jitter_s: float = 0.0,
    queue: Queue = ONE_BDP,
    mtu: int = 1500,
    reverse: Reverse = SAME_BOTH_WAYS,
    sysctls: Sequence[tuple[Side, str, str]] = (),
    backend: str = "auto",
    hops: tuple[HopSpec, ...] = (),
    policer: Policer = NO_POLICER,
    middlebox: MiddleboxSpec | None = None,
) -> LabSpec:
    """The lab the flags' values describe, validated: the RTT split evenly, b->a as a->b
    where `reverse` does not say otherwise, each direction's queue of its own rate."""
    back_policer = reverse.policer or policer
    fwd_delay = rtt_s / 2
    back_delay = fwd_delay if reverse.delay_s is None else reverse.delay_s
    back_rate = rate_bps if reverse.rate_bps is None else reverse.rate_bps
    round_trip = fwd_delay + back_delay  # what a 'bdp' queue is measured against, both ways
    forward = LinkSpec(
        rate_bps=rate_bps,
        delay_s=fwd_delay,
        jitter_s=jitter_s,
        loss=loss,
        queue_bytes=queue.resolve(rate_bps, round_trip, mtu),
        policer_bps=policer.rate_bps or None,
        policer_burst_bytes=policer.burst_bytes if policer.rate_bps else None,
    )
    back = LinkSpec(
        rate_bps=back_rate,
        delay_s=back_delay,
        jitter_s=jitter_s if reverse.jitter_s is None else reverse.jitter_s,
        loss=loss if reverse.loss is None else reverse.loss,
        queue_bytes=(reverse.queue or queue).resolve(back_rate, round_trip, mtu),
        policer_bps=back_policer.rate_bps or None,
        policer_burst_bytes=back_policer.burst_bytes if back_policer.rate_bps else None,
    )
    spec = LabSpec(
        forward=forward,
        reverse=back,
        name=name,
        mtu=mtu,
        sysctls_a=tuple((key, value) for side, key, value in sysctls if side == "a"),
        sysctls_b=tuple((key, value) for side, key, value in sysctls if side == "b"),
        backend=backend,
        hops=hops,
        middlebox=middlebox,
    )
    spec.validate()
    return spec
