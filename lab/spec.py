"""What a lab is: two hosts `a` and `b`, and one emulated link per direction.

Frozen (hashable) dataclasses, so the test fixture can cache labs by spec and the state file
can round-trip them through JSON.
"""

from __future__ import annotations

import hashlib
import ipaddress
import re
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal

from tcpwizard.exitcodes import UsageError
from tcpwizard.inputs import MAX_MTU, MIN_MTU, MIN_MTU_IPV6

Side = Literal["a", "b"]
SIDES: tuple[Side, Side] = ("a", "b")
BACKENDS = ("auto", "delayline", "netem")

# Lab names become namespace names (NAME-a, NAME-b) and file names in the state directory.
_NAME_RE = re.compile(r"[a-z0-9][a-z0-9_-]{0,39}")

# A queue smaller than this many full-size packets makes TCP collapse into timeouts on
# short/slow paths where 1 BDP is less than a packet; netem's default limit is 1000 packets.
MIN_QUEUE_PACKETS = 10


@dataclass(frozen=True)
class LinkSpec:
    """One direction of the bottleneck.

    rate_bps counts IP packet bytes (no link-layer header), so TCP goodput tops out at
    (mtu - 52) / mtu of the rate with timestamps on: 96.5 % at MTU 1500.
    queue_bytes None means 1 BDP of the round trip (resolved by LabSpec).
    policer_bps polices what leaves this link (a token bucket that drops, no queue: an
    nftables `limit rate over` in the receiving node, lab/policer.py) at that IP rate;
    policer_burst_bytes is the bucket's depth beyond nftables' own second of tokens.
    """

    rate_bps: float
    delay_s: float
    jitter_s: float = 0.0
    loss: float = 0.0
    queue_bytes: int | None = None
    policer_bps: float | None = None
    policer_burst_bytes: int | None = None

    def validate(self, what: str, mtu: int) -> None:
        if not self.rate_bps > 0:
            raise UsageError(f"{what}: rate must be positive")
        if not 0.0 <= self.delay_s <= 10.0:
            raise UsageError(f"{what}: one-way delay must be between 0 and 10 s")
        if not 0.0 <= self.jitter_s <= self.delay_s:
            raise UsageError(f"{what}: jitter must be between 0 and the one-way delay")
        if not 0.0 <= self.loss < 1.0:
            raise UsageError(f"{what}: loss must be a fraction in [0, 1)")
        if self.queue_bytes is not None and self.queue_bytes < mtu:
            raise UsageError(f"{what}: queue of {self.queue_bytes} B holds less than one packet")
        check_policer(what, self.policer_bps, self.policer_burst_bytes, mtu)


@dataclass(frozen=True)
class HopSpec:
    """One router namespace on a multi-hop path (lab/hops.py builds them).

    The router forwards with the real kernel. Its fields describe the link that leads *into*
    it from the previous node (a, or the router before it) and the router's own ICMP:
    rtt_s is added to the round trip of every later hop (split evenly per direction),
    rate_bps None means no shaping on that link, loss drops that share of the packets
    travelling toward b on it, mtu None means the lab's MTU. icmp_ratelimit_ms sets the
    router's net.ipv4.icmp_ratelimit / net.ipv6.icmp.ratelimit (0: answer every probe; the
    kernel allows a burst of 6 then one per interval); drop_frag_needed makes the router
    silently drop the "fragmentation needed" / "packet too big" messages it would send: a
    PMTU black hole when the link after it is narrower.
    """

    rtt_s: float = 0.0
    rate_bps: float | None = None
    loss: float = 0.0
    mtu: int | None = None
    icmp_ratelimit_ms: int = 0
    drop_frag_needed: bool = False
    # A token-bucket policer on the router's forward chain for packets toward b (nftables
    # `limit rate over ... drop`, lab/policer.py): IP bits per second and extra burst bytes.
    policer_bps: float | None = None
    policer_burst_bytes: int | None = None

    def validate(self, what: str) -> None:
        if not 0.0 <= self.rtt_s <= 10.0:
            raise UsageError(f"{what}: rtt must be between 0 and 10 s")
        if self.rate_bps is not None and not self.rate_bps > 0:
            raise UsageError(f"{what}: rate must be positive")
        if not 0.0 <= self.loss < 1.0:
            raise UsageError(f"{what}: loss must be a fraction in [0, 1)")
        if self.mtu is not None and not MIN_MTU_IPV6 <= self.mtu <= MAX_MTU:
            raise UsageError(
                f"{what}: mtu {self.mtu}: use {MIN_MTU_IPV6}-{MAX_MTU} (IPv6 needs {MIN_MTU_IPV6})"
            )
        if not 0 <= self.icmp_ratelimit_ms <= 60000:
            raise UsageError(f"{what}: icmp rate limit must be 0-60000 ms")
        check_policer(what, self.policer_bps, self.policer_burst_bytes, self.mtu or MIN_MTU)

    @property
    def emulated(self) -> bool:
        """The link into this router needs the delay line (delay, rate or loss)."""
        return self.rtt_s > 0 or self.rate_bps is not None or self.loss > 0


MAX_HOPS = 16
# nftables counts a byte limit's rate in whole bytes per second (a 32-bit burst).
MIN_POLICER_BPS = 8_000.0
MAX_POLICER_BURST = 2**32 - 1


def check_policer(what: str, rate_bps: float | None, burst: int | None, mtu: int) -> None:
    if rate_bps is None:
        if burst is not None:
            raise UsageError(f"{what}: a policer burst needs a policer rate")
        return
    if not rate_bps >= MIN_POLICER_BPS:
        raise UsageError(f"{what}: policer rate must be at least {MIN_POLICER_BPS / 1e3:g} kbit/s")
    if burst is not None and not mtu <= burst <= MAX_POLICER_BURST:
        raise UsageError(f"{what}: policer burst must hold a packet ({mtu} B) and fit 4 GB")


STRIPPABLE = ("window", "sack-perm", "timestamp")  # nftables' `reset tcp option` names
MIDDLEBOX_WAYS = ("both", "syn", "syn-ack")  # which handshake packets the device rewrites
MIN_MSS_CLAMP = 88  # the kernel's own floor for a peer's MSS (TCP_MIN_SND_MSS, 48 + 40)


@dataclass(frozen=True)
class MiddleboxSpec:
    """A device that rewrites the TCP handshake (lab/middlebox.py builds it with nftables):
    it overwrites the options in `strip` with NOPs and lowers the MSS option to `mss`, in
    every SYN and SYN-ACK it forwards (`way` "syn" or "syn-ack": only those). With hops it
    sits on router `hop` (1 when None); in the two-host lab on the wire, as both hosts'
    packets leave them.
    """

    strip: tuple[str, ...] = ()
    mss: int | None = None
    hop: int | None = None
    way: str = "both"

    def validate(self, hops: int, mtu: int) -> None:
        for option in self.strip:
            if option not in STRIPPABLE:
                raise UsageError(f"middlebox: strip {option!r}: use {', '.join(STRIPPABLE)}")
        if self.mss is not None and not MIN_MSS_CLAMP <= self.mss <= mtu - 40:
            raise UsageError(
                f"middlebox: mss {self.mss}: use {MIN_MSS_CLAMP}-{mtu - 40} (the MTU less 40)"
            )
        if self.hop is not None and not 1 <= self.hop <= hops:
            where = f"use 1-{hops}" if hops else "a two-host lab has no routers (--hops N)"
            raise UsageError(f"middlebox: hop {self.hop}: {where}")
        if not self.strip and self.mss is None:
            raise UsageError("middlebox: give options to strip or an MSS to clamp to")
        if self.way not in MIDDLEBOX_WAYS:
            raise UsageError(f"middlebox: way {self.way!r}: use {', '.join(MIDDLEBOX_WAYS)}")


@dataclass(frozen=True)
class LabSpec:
    """A lab. name "" means: let the caller (fixture, CLI) choose a unique one.

    hops () is the classic two-host lab (a and b joined by the bottleneck). With hops, a
    router namespace per HopSpec sits between them: a -[bottleneck]- r1 - r2 ... rN - b,
    the bottleneck (forward/reverse) on the first link.
    """

    forward: LinkSpec  # a -> b
    reverse: LinkSpec  # b -> a
    name: str = ""
    mtu: int = 1500
    sysctls_a: tuple[tuple[str, str], ...] = ()
    sysctls_b: tuple[tuple[str, str], ...] = ()
    backend: str = "auto"
    hops: tuple[HopSpec, ...] = ()
    middlebox: MiddleboxSpec | None = None

    @classmethod
    def symmetric(
        cls,
        rate_bps: float = 100e6,
        rtt_s: float = 0.050,
        *,
        loss: float = 0.0,
        jitter_s: float = 0.0,
        queue_bytes: int | None = None,
        name: str = "",
        mtu: int = 1500,
        sysctls_a: tuple[tuple[str, str], ...] = (),
        sysctls_b: tuple[tuple[str, str], ...] = (),
        backend: str = "auto",
        hops: tuple[HopSpec, ...] = (),
        policer_bps: float | None = None,
        policer_burst_bytes: int | None = None,
        middlebox: MiddleboxSpec | None = None,
    ) -> LabSpec:
        """The same link both ways; RTT split evenly, loss (and a policer) in each direction."""
        link = LinkSpec(
            rate_bps, rtt_s / 2, jitter_s, loss, queue_bytes, policer_bps, policer_burst_bytes
        )
        return cls(link, link, name, mtu, sysctls_a, sysctls_b, backend, hops, middlebox)

    @property
    def rtt_s(self) -> float:
        """Round trip a <-> b: the bottleneck's plus every hop's."""
        return self.forward.delay_s + self.reverse.delay_s + sum(h.rtt_s for h in self.hops)

    def queue_bytes(self, link: LinkSpec) -> int:
        """Drop-tail limit of `link`: as given, or 1 BDP of the round trip (floored)."""
        if link.queue_bytes is not None:
            return link.queue_bytes
        return max(round(link.rate_bps * self.rtt_s / 8), MIN_QUEUE_PACKETS * self.mtu)

    def sysctls(self, side: Side) -> tuple[tuple[str, str], ...]:
        return self.sysctls_a if side == "a" else self.sysctls_b

    def validate(self) -> None:
        if self.name:
            check_name(self.name)
        if not MIN_MTU <= self.mtu <= MAX_MTU:
            raise UsageError(f"mtu {self.mtu}: use {MIN_MTU}-{MAX_MTU}")
        if self.backend not in BACKENDS:
            raise UsageError(f"backend {self.backend!r}: use one of {', '.join(BACKENDS)}")
        self.forward.validate("a->b", self.mtu)
        self.reverse.validate("b->a", self.mtu)
        if len(self.hops) > MAX_HOPS:
            raise UsageError(f"{len(self.hops)} hops: use at most {MAX_HOPS}")
        if self.hops and self.backend == "netem":
            raise UsageError("a lab with hops uses the delay line; use --backend delayline")
        for i, hop in enumerate(self.hops, 1):
            hop.validate(f"hop {i}")
        if self.hops and (self.hops[0].emulated or self.hops[0].mtu is not None):
            raise UsageError(
                "hop 1's link is the lab's bottleneck: set its rate, RTT, loss and MTU with "
                "the lab's own options"
            )
        for side in SIDES:
            for key, _ in self.sysctls(side):
                check_sysctl_key(key)
        if self.middlebox is not None:
            self.middlebox.validate(len(self.hops), self.mtu)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LabSpec:
        def pairs(v: Any) -> tuple[tuple[str, str], ...]:
            return tuple((str(k), str(x)) for k, x in v)

        return cls(
            forward=LinkSpec(**data["forward"]),
            reverse=LinkSpec(**data["reverse"]),
            name=str(data["name"]),
            mtu=int(data["mtu"]),
            sysctls_a=pairs(data.get("sysctls_a", ())),
            sysctls_b=pairs(data.get("sysctls_b", ())),
            backend=str(data.get("backend", "auto")),
            hops=tuple(HopSpec(**h) for h in data.get("hops", ())),
            middlebox=_middlebox_from_json(data.get("middlebox")),
        )

    def with_name(self, name: str) -> LabSpec:
        return replace(self, name=name)


def _middlebox_from_json(data: Any) -> MiddleboxSpec | None:
    if data is None:
        return None
    mss, hop = data.get("mss"), data.get("hop")
    return MiddleboxSpec(
        strip=tuple(str(o) for o in data.get("strip", ())),
        mss=None if mss is None else int(mss),
        hop=None if hop is None else int(hop),
        way=str(data.get("way", "both")),
    )


def check_name(name: str) -> str:
    """A lab name: it becomes namespace names and a file name in the state directory."""
    if not _NAME_RE.fullmatch(name):
        raise UsageError(
            f"lab name {name!r}: use 1-40 of a-z 0-9 _ - (starting with a letter/digit)"
        )
    return name


# net.core.* memory limits are global: a child namespace cannot see or change them.
_GLOBAL_ONLY = ("net.core.rmem_max", "net.core.wmem_max", "net.core.rmem_default",
                "net.core.wmem_default", "net.core.optmem_max", "net.ipv4.tcp_mem",
                "net.ipv4.udp_mem")  # fmt: skip


def check_sysctl_key(key: str) -> None:
    if not re.fullmatch(r"net(\.[A-Za-z0-9_-]+)+", key):
        raise UsageError(f"sysctl {key!r}: only net.* keys can be set per host")
    if key in _GLOBAL_ONLY:
        raise UsageError(
            f"sysctl {key} is global, not per network namespace, so it cannot differ between "
            "lab hosts; use net.ipv4.tcp_rmem/tcp_wmem, or set it host-wide yourself"
        )


@dataclass(frozen=True)
class Addresses:
    a4: str
    b4: str
    a6: str
    b6: str
    prefix4: int = 30
    prefix6: int = 64


def addresses_for(name: str) -> Addresses:
    """A /30 in 10.199.0.0/16 and a ULA /64, derived from the name.

    Each lab has its own namespaces, so two labs sharing a subnet cannot interfere; the
    derivation just makes a lab's addresses recognisable and stable across `lab up`s.
    """
    digest = hashlib.sha256(name.encode()).digest()
    index = int.from_bytes(digest[:2], "big") % 16384
    base4 = int(ipaddress.IPv4Address("10.199.0.0")) + 4 * index
    net6 = int(ipaddress.IPv6Address("fd00:7477::")) | (int.from_bytes(digest[2:6], "big") << 64)
    return Addresses(
        a4=str(ipaddress.IPv4Address(base4 + 1)),
        b4=str(ipaddress.IPv4Address(base4 + 2)),
        a6=str(ipaddress.IPv6Address(net6 + 1)),
        b6=str(ipaddress.IPv6Address(net6 + 2)),
    )


def parse_side_sysctl(text: str) -> tuple[Side, str, str]:
    """'a:net.ipv4.tcp_rmem=4096 65536 131072' -> ('a', key, value)."""
    m = re.fullmatch(r"\s*([ab])\s*:\s*([^=\s]+)\s*=\s*(.*?)\s*", text)
    if not m:
        raise UsageError(f"{text!r}: use HOST:KEY=VALUE with HOST a or b")
    side: Side = "a" if m.group(1) == "a" else "b"
    value = m.group(3)
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        value = value[1:-1]
    check_sysctl_key(m.group(2))
    return side, m.group(2), value
