"""A mesh that never measures itself: every exporter of a site reads the same mesh file and
derives, without talking to the others, when it checks each of its peers.

The schedule is a round robin (the circle method of a tournament): the hosts, sorted, are
paired off so that in each round every host takes part in at most one check, and over
2 x (N - 1) rounds (N rounded up to even) every ordered pair (near end -> far end) comes once.
An interval is cut into that many slots, aligned on the wall clock (a multiple of the
interval since the epoch), so exporters whose clocks agree (NTP) never start two checks
through the same host at once. When a check overruns its slot anyway, the far end's serve
(`serve --lock`) says "busy, come back in N s" and the exporter waits and asks again.
"""

from __future__ import annotations

from dataclasses import dataclass

from tcpwizard.exitcodes import UsageError
from tcpwizard.exporter import Target, load_targets


@dataclass(frozen=True)
class Slot:
    near: str
    far: str
    round: int
    offset_s: float  # seconds after the start of each interval


def rounds(hosts: list[str]) -> list[list[tuple[str, str]]]:
    """Rounds of (near, far) checks; no host appears twice in a round, every ordered pair
    of distinct hosts appears exactly once overall."""
    names = sorted(set(hosts))
    if len(names) != len(hosts):
        raise UsageError("mesh: a host is listed twice")
    if len(names) < 2:
        raise UsageError("mesh: a mesh needs at least two hosts")
    ring: list[str | None] = [*names, None] if len(names) % 2 else list(names)
    n = len(ring)
    one_way: list[list[tuple[str, str]]] = []
    for r in range(n - 1):
        pairs = []
        for i in range(n // 2):
            a, b = ring[i], ring[n - 1 - i]
            if a is None or b is None:
                continue  # the odd one out sits this round out
            # Alternate who checks first, so each host is near end about as often as far.
            pairs.append((a, b) if (r + i) % 2 == 0 else (b, a))
        one_way.append(pairs)
        ring = [ring[0], ring[-1], *ring[1:-1]]  # rotate all but the first
    back = [[(b, a) for a, b in pairs] for pairs in one_way]
    return one_way + back


def schedule(hosts: list[str], interval_s: float) -> list[Slot]:
    plan = rounds(hosts)
    step = interval_s / len(plan)
    return [Slot(near, far, r, r * step) for r, pairs in enumerate(plan) for near, far in pairs]


def slot_length(hosts: list[str], interval_s: float) -> float:
    return interval_s / len(rounds(hosts))


@dataclass(frozen=True)
class MeshPlan:
    me: Target
    targets: list[Target]  # every other host of the mesh
    offsets: dict[str, float]  # target name -> seconds after each interval's start
    slot_s: float


def plan_for(mesh: list[Target], me: str, interval_s: float) -> MeshPlan:
    """This exporter's share of the mesh: `me` names its own line (as written there)."""
    names = [t.name for t in mesh]
    mine = [t for t in mesh if t.name == me or t.host == me]
    if len(mine) != 1:
        raise UsageError(f"--self {me}: not a host of the mesh file ({', '.join(names)})")
    self_t = mine[0]
    offsets = {s.far: s.offset_s for s in schedule(names, interval_s) if s.near == self_t.name}
    targets = [t for t in mesh if t.name != self_t.name]
    return MeshPlan(self_t, targets, offsets, slot_length(names, interval_s))


def load_plan(path: str, me: str, interval_s: float) -> MeshPlan:
    return plan_for(load_targets(path), me, interval_s)
