"""Which far end a check gets, and what takes over when one fails mid-run.

`REGISTRY` is ordered best first: the check walks it and takes the first far end that
answers (`choose`). Each entry says how it is asked, whether asking is free, and what it
falls back to when it fails mid-run (`fall_back`). An explicit `--far-end` runs exactly
that entry, and the last entry (the open TCP port, which always answers) when it does not.
A new far end is one module in this package and one `Entry` line below.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tcpwizard.measure.farends.interface import FarEnd, FarEndError, FarEndKind
from tcpwizard.measure.farends.iperf3 import Iperf3Far
from tcpwizard.measure.farends.port import PortFar
from tcpwizard.measure.farends.serve import ServeFar
from tcpwizard.measure.farends.url import UrlFar
from tcpwizard.measure.wire import spec


@dataclass(frozen=True)
class Reach:
    """Where the far end is and how the check may reach it (from the check's request)."""

    host: str  # as the user named it, for the notes
    address: str  # the one address every probe and transfer goes to
    sysctl_root: str = "/proc/sys"
    serve_port: int = spec.SERVE_PORT
    secret: bytes | None = None
    iperf3_port: int = spec.IPERF3_PORT
    tcp_port: int | None = None
    url: str | None = None
    # The transfers will run both ways at once: serve opens the way back's connection now.
    both_ways: bool = False


# A far end that answered, with the notes its answer brought (redirects followed), or why
# nothing answered.
Answer = tuple[FarEnd, tuple[str, ...]] | str


@dataclass(frozen=True)
class Entry:
    name: FarEndKind  # its `kind`, and the `--far-end` choice that runs it alone
    answer: Callable[[Reach], Answer]
    # How its absence reads in the notes: from the reach and why it did not answer.
    absent: Callable[[Reach, str], str]
    # Asking costs the far end what it is there for (a one-off iperf3 server runs one test,
    # and a silent connection would end it): `answer` builds it unasked, and the first
    # transfer is the question. Its FarEndError with `absent` set means it was not there.
    asked_by_first_transfer: bool = False
    # The entry that takes over when this one fails mid-run as absent (auto mode only).
    fallback: str | None = None
    # The request names this far end by what it asks for (a URL names a web server): then
    # it is the only one asked; otherwise the walk passes it by.
    named_by: Callable[[Reach], bool] | None = None


def _url(r: Reach) -> Answer:
    assert r.url is not None  # named_by: only asked for a URL
    far = UrlFar(r.url, r.address, r.host, r.sysctl_root)
    return far, far.notes


def _serve(r: Reach) -> Answer:
    got = ServeFar.reach(r.address, r.serve_port, r.secret, r.host, both_ways=r.both_ways)
    return (got, got.notes) if isinstance(got, ServeFar) else got


def _iperf3(r: Reach) -> Answer:
    return Iperf3Far(r.address, r.iperf3_port, r.host), ()


def _port(r: Reach) -> Answer:
    return PortFar(r.address, r.tcp_port, r.host, r.sysctl_root), ()


REGISTRY: tuple[Entry, ...] = (
    Entry(
        "url",
        _url,
        lambda r, why: f"no web server at {r.url} ({why})",
        named_by=lambda r: r.url is not None,
    ),
    Entry(
        "serve",
        _serve,
        lambda r, why: f"no tcpwizard serve at {r.host} port {r.serve_port} ({why})",
    ),
    Entry(
        "iperf3",
        _iperf3,
        lambda r, why: f"no iperf3 at {r.host} port {r.iperf3_port} ({why})",
        asked_by_first_transfer=True,
        fallback="tcp-port",
    ),
    Entry("tcp-port", _port, lambda r, why: f"TCP port {r.tcp_port} not answering ({why})"),
)
LAST_RESORT = REGISTRY[-1]


def entry(name: str) -> Entry:
    for e in REGISTRY:
        if e.name == name:
            return e
    raise KeyError(name)


def _taken(got: Answer, notes: list[str]) -> tuple[FarEnd, list[str]] | None:
    if isinstance(got, str):
        return None
    far, said = got
    return far, [*notes, *said]


def choose(reach: Reach, choice: str = "auto") -> tuple[FarEnd, list[str]]:
    """The best far end that answers, in the registry's order; `choice` other than "auto"
    asks exactly that one. Why each one passed over did not answer goes in the notes."""
    notes: list[str] = []
    for e in REGISTRY:
        if e.named_by is not None and e.named_by(reach):
            return _asked(e, reach, notes) or _last_resort(reach, notes)
    for e in REGISTRY:
        if e.named_by is not None or (choice != "auto" and e.name != choice):
            continue
        taken = _asked(e, reach, notes)
        if taken is not None:
            return taken
    return _last_resort(reach, notes)


def _asked(e: Entry, reach: Reach, notes: list[str]) -> tuple[FarEnd, list[str]] | None:
    """`e` when it answers; else None, and why it did not goes in the notes."""
    got = e.answer(reach)
    taken = _taken(got, notes)
    if taken is None:
        notes.append(e.absent(reach, str(got)))
    return taken


def _last_resort(reach: Reach, notes: list[str]) -> tuple[FarEnd, list[str]]:
    got = LAST_RESORT.answer(reach)
    taken = _taken(got, notes)
    if taken is None:  # the last resort answers by construction (a port, or nothing)
        raise RuntimeError(f"the last resort did not answer: {got}")
    return taken


def fall_back(
    far: FarEnd, exc: FarEndError, reach: Reach, choice: str = "auto"
) -> tuple[FarEnd, str] | None:
    """What takes over from `far`, failed mid-run with `exc`, and the note that says why;
    None when nothing does: an explicit choice runs exactly that far end, and a far end
    that answered (busy, locked) is the finding itself."""
    e = entry(far.kind)
    if choice != "auto" or e.fallback is None or not exc.absent:
        return None
    got = entry(e.fallback).answer(reach)
    if isinstance(got, str):
        return None
    return got[0], e.absent(reach, str(exc))
