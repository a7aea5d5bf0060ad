"""One bucket, two ways: a policer one way's transfer shows explains the other way's losses
(read as congestion) or its thin share (read as cross traffic) when that way ran at the
same plateau.

A loss-based sender whose window is a few segments (a policed rate of a few Mbit/s over a
few ms is one or two segments per round trip) cannot show a bucket's burst of drops: it has
no burst to lose, so every drop is a loss event of its own and the Mathis bound of its loss
rate matches its rate, the congestion rule's signature. A sender that paces (BBR) shows the
bucket plainly on the same path, in the other way. Both ways settling on the same rate, far
below the line both probes saw, is one bucket's rate, not a coincidence of two causes.
(The scenario matrix, docs/bench-matrix-two-seeds.md: Reno one way and BBR the other,
policed at 2-34 Mbit/s over 2.2-6.5 ms; BBR's way read `policer` and Reno's `congestion`,
and the verdict went to Reno's way, on the hosts: three scenarios.)
"""

from __future__ import annotations

from collections.abc import Sequence

from tcpwizard.advice.evidence import Candidate, Direction, Evidence, probe_capacity, sender_cc
from tcpwizard.advice.rules.policer import POLICED_SHARE, pacing_fixes
from tcpwizard.advice.window_law import LOSS_BASED, backoff
from tcpwizard.measure.engine.loaded_rtt import plateau_mbps
from tcpwizard.units import format_mbps

# What a bucket's drops look like on a way whose sender cannot show the bucket: loss
# events a window takes (congestion), or probe streams that met drops and waits while
# the bucket was empty, read as others' traffic (cross-traffic: the available-bandwidth
# probe found 4 of 10 streams queued on a path policed at 1.9 of 12.6 Mbit/s, scenario
# matrix 20261201.45). Others' traffic that left exactly the bucket's rate the other way
# would be a coincidence; one bucket is the one cause.
SAME_BUCKET_READS = ("congestion", "cross-traffic")


def _sawtooth_floor(cc: str) -> float:
    """The least share of a bucket's rate a sender runs at under it: a loss-based one its
    backoff (window_law.backoff), a paced one the rate itself."""
    return backoff(cc) if cc in LOSS_BASED else 1.0


def same_bucket(
    ev: Evidence, best: Candidate, candidates: Sequence[Candidate], dirs: Sequence[Direction]
) -> Candidate:
    """The policer candidate of the other way when `best` is congestion or cross traffic
    on a way that ran at its policed rate; else `best`."""
    if best.factor not in SAME_BUCKET_READS:
        return best
    ways = {d.name: d for d in dirs}
    lossy = ways.get(best.direction)
    if lossy is None or lossy.current is None:
        return best
    rate, probe = plateau_mbps(lossy.current), probe_capacity(ev, lossy)
    if rate is None or probe is None or rate >= POLICED_SHARE * probe.mbps:
        return best  # this way ran at its line: no bucket held it
    for c in candidates:
        policed_way = ways.get(c.direction)
        if c.factor != "policer" or c.direction == best.direction or policed_way is None:
            continue
        policed = plateau_mbps(policed_way.current) if policed_way.current else None
        # Within a plateau's own spread either side (POLICED_SHARE, the rule's margin), and
        # below it a loss-based sender's sawtooth under the bucket's rate: cut to its
        # backoff at each overflow, it runs between that share of the rate and the rate
        # (CUBIC under a 56 Mbit/s bucket held 35, BBR the other way 56: read
        # `cross-traffic`, scenario matrix 20261209.35).
        floor = POLICED_SHARE * _sawtooth_floor(sender_cc(lossy))
        if policed and floor * policed <= rate <= policed / POLICED_SHARE:
            return Candidate(
                c.direction,
                c.factor,
                c.confidence,
                c.host,
                c.explanation,
                (
                    *c.evidence,
                    f"{best.direction}: settled at {format_mbps(rate)} (IP layer), the same "
                    f"plateau, with {best.evidence[0]}: the same bucket's drops, read there "
                    f"as {best.factor}",
                ),
                # Both senders pace below the bucket's rate: each way loses to it.
                fixes=c.fixes
                + pacing_fixes(policed, lossy.sender_role, lossy.sender, sender_cc(lossy)),
            )
    return best
