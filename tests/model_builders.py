"""Builders of the measurement and audit objects the verdict, guard and format tests feed
the code: hosts, paths, per-mode transfers and their samples. One home, so a test that
reads "a 50 ms x 100 Mbit/s path" builds the same object whichever file it sits in.

Numbers here are what the golden files and the rule tests were written against: a change
to a default moves every test that uses it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from tcpwizard.checks import SysctlReader
from tcpwizard.checks import audit as audit_host
from tcpwizard.checks.audit import CHECKS
from tcpwizard.checks.model import BdpTarget, Fix, HostAudit
from tcpwizard.measure.model import (
    CapacityEstimate,
    Direction,
    Mode,
    ModeResult,
    PathEstimate,
    RttStats,
    TcpInfoSample,
    TransferResult,
    TransferSample,
)
from tests.fakes import make_tree, network

TUNED = {
    "net.ipv4.tcp_rmem": "4096 131072 33554432",
    "net.ipv4.tcp_wmem": "4096 16384 33554432",
    "net.ipv4.tcp_window_scaling": "1",
    "net.ipv4.tcp_adv_win_scale": "1",
}

# The far end of the TUI's and the formats' documents: 100 Mbit/s x 50 ms.
TARGET = BdpTarget(0.05, 100e6, "measured")


def audit(**overrides: str) -> HostAudit:
    """A host's audit as the rules read it: TUNED buffers with `overrides` on top."""
    values = {**TUNED, **overrides}
    return HostAudit("h", "6.18", (), "bbr", tuple(values.items()))


def host_audit(tmp: Path, name: str, overrides: Mapping[str, str | None]) -> HostAudit:
    """A full audit of a fake /proc/sys under tmp/name, for documents that show findings."""
    return audit_host(
        SysctlReader(make_tree(tmp / name, overrides)),
        "198.51.100.7",
        TARGET,
        network=network(),
        ram_bytes=8 << 30,
        page_size=4096,
    )


def path(rtt_ms: float, cap_mbps: float, loss_pct: float = 0.0) -> PathEstimate:
    """A probed path with a flat RTT and a train's capacity, its BDP from the two."""
    rtt = RttStats(rtt_ms, rtt_ms, rtt_ms, rtt_ms, 0.1, rtt_ms, loss_pct, 0.1, 20, "udp-echo")
    cap = CapacityEstimate(cap_mbps, "train", 0.9)
    return PathEstimate(rtt, cap, int(cap_mbps * 1e6 / 8 * rtt_ms / 1e3), 1.0, "10.0.0.2", 5301)


def rtt_around(min_ms: float) -> RttStats:
    """A UDP-echo RTT with a little spread above its minimum."""
    return RttStats(
        min_ms, min_ms + 0.1, min_ms + 0.5, min_ms + 0.1, 0.1, min_ms + 1.0, 0.0, 0.1, 20,
        "udp-echo",
    )  # fmt: skip


def peer_path(
    up: CapacityEstimate,
    down: CapacityEstimate | None = None,
    rtt_ms: float = 20.0,
    bdp_bytes: int | None = None,
) -> PathEstimate:
    """A path a serve answered for, with each way's capacity as its probe read it."""
    return PathEstimate(
        rtt_around(rtt_ms), up, bdp_bytes, 1.0, "10.0.0.2", 5301, True, capacity_down=down
    )


def far_path(capacity: CapacityEstimate, *, peer: bool = False) -> PathEstimate:
    """The path to the documents' far end at 198.51.100.7 (about 50 ms, 625 KB BDP)."""
    return PathEstimate(
        RttStats(50.1, 50.3, 51.0, 50.4, 0.2, 52.0, 0.0, 0.1, 20, "udp-echo"),
        capacity,
        625_000,
        2.5,
        "198.51.100.7",
        5301,
        peer=peer,
    )


def mode(
    mbps: float,
    name: Mode = "autotune",
    direction: Direction = "up",
    rwnd: float = 0.0,
    snd: float = 0.0,
    busy: float = 1.0,
    retrans: int = 0,
    nbytes: int = 50_000_000,
    cc: str = "bbr",
) -> ModeResult:
    """A 4 s transfer's summary without samples: the rate and what limited the sender."""
    return ModeResult(
        name,
        direction,
        1,
        nbytes,
        4.0,
        mbps,
        4_000_000,
        retrans,
        (),
        rwnd,
        snd,
        busy,
        cc,
    )


def samples(
    goodputs: Sequence[float],
    infos: Sequence[TcpInfoSample | None] | None = None,
    *,
    dt: float = 0.1,
    buf: int = 0,
) -> tuple[TransferSample, ...]:
    """One sample every `dt` s at each goodput, with the sender's TCP_INFO where given and
    both socket buffers at `buf`."""
    views = infos if infos is not None else [None] * len(goodputs)
    return tuple(
        TransferSample(dt * (i + 1), g, buf, buf, tcp_info=ti)
        for i, (g, ti) in enumerate(zip(goodputs, views, strict=True))
    )


def transfer_of(*modes: ModeResult) -> TransferResult:
    return TransferResult(modes)


def answers(key: str) -> tuple[str, ...]:
    """What the check that owns this sysctl declares its fixes answer."""
    return next((c.answers for c in CHECKS if key in c.keys), ())


def fixes(*keys: str) -> tuple[Fix, ...]:
    """This host's sysctl fixes for `keys`, each answering what its check says it does."""
    return tuple(
        Fix(k, "sysctl", "local", k, "x", f"sysctl -w {k}=x", answers=answers(k)) for k in keys
    )
