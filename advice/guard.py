"""The physical bounds every rate a report shows obeys (docs/transfer.md, "Bounds").

* goodput <= capacity x the payload share of a packet: (MTU - 52) / MTU with IPv4, TCP and
  timestamps, since capacities are IP-layer rates (what the probes and a link's line rate
  count) and goodput counts payload;
* a capacity <= the line rate where one is configured (an emulated lab knows its own rate:
  it passes it in the environment, TCPWIZARD_LINE_RATE_MBPS; nothing here knows of a lab);
* a capacity <= the egress interface's speed, unless bytes were delivered faster than that
  speed (a virtual device's nominal speed, which a measurement of delivered bytes refutes).

A figure above its bound is a measurement artefact (a probe's packets bunched by a
scheduler, a burst counted over too short an interval): it is shown at the bound, with a
note saying what was measured. Pure functions over the report's measurement objects.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass

from tcpwizard.advice.model import Verdict
from tcpwizard.measure.engine.rates import IP_TCP_HEADERS, mode_steady_mbps
from tcpwizard.measure.model import (
    CapacityEstimate,
    ModeResult,
    PathEstimate,
    TransferResult,
    TransferSample,
)
from tcpwizard.measure.probes.availbw import AvailBandwidth
from tcpwizard.measure.probes.dispersion import SENDER_SLACK
from tcpwizard.units import format_mbps

LINE_RATE_ENV = "TCPWIZARD_LINE_RATE_MBPS"


@dataclass(frozen=True)
class Bounds:
    """What is known of the path's physics: each None when unknown."""

    line_mbps: float | None = None  # the configured line rate, IP layer
    interface_mbps: float | None = None  # the egress interface's speed, as its driver says
    mtu: int = 1500

    @property
    def payload_share(self) -> float:
        return payload_share(self.mtu)

    def capacity_max(self, delivered_mbps: float = 0.0) -> float | None:
        """The most any capacity (IP layer) can be. `delivered_mbps`: the fastest IP-layer
        rate delivered bytes showed, which refutes an interface speed below it."""
        known = [self.line_mbps] if self.line_mbps else []
        if self.interface_mbps and self.interface_mbps >= delivered_mbps:
            known.append(self.interface_mbps)
        return min(known) if known else None

    def goodput_max(self, delivered_mbps: float = 0.0) -> float | None:
        """The most any goodput (payload) can be."""
        cap = self.capacity_max(delivered_mbps)
        return None if cap is None else cap * self.payload_share


def payload_share(mtu: int) -> float:
    """Payload bytes per IP-layer byte of a full-sized segment."""
    return max(0.0, mtu - IP_TCP_HEADERS) / mtu if mtu > IP_TCP_HEADERS else 0.0


def line_rate_from_env(environ: Mapping[str, str] = os.environ) -> float | None:
    """The line rate a harness that knows it configured (Mbit/s, IP layer); None when unset
    or not a positive finite number."""
    text = environ.get(LINE_RATE_ENV, "").strip()
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) and value > 0 else None


def bounds_for(
    interface_mbps: float | None, mtu: int | None, environ: Mapping[str, str] = os.environ
) -> Bounds:
    return Bounds(line_rate_from_env(environ), interface_mbps, mtu or 1500)


def clamp(value: float, limit: float | None) -> float:
    return value if limit is None or value <= limit else limit


def _fastest_delivered_ip_mbps(t: TransferResult | None, share: float) -> float:
    """The fastest average rate any transfer delivered, at the IP layer."""
    if t is None or share <= 0:
        return 0.0
    return max((m.throughput_mbps / share for m in t.modes if m.error is None), default=0.0)


def guard_capacity(c: CapacityEstimate, limit: float | None) -> CapacityEstimate:
    """The estimate at most `limit`. Within the probe's own timestamp noise of it
    (SENDER_SLACK) the probe measured the line: shown at the bound as it is. Further above,
    the probe was fooled (bunched packets): shown at the bound with its confidence lowered.
    A method's reading above the line that the probe itself did not take (pairs bunched,
    the train's rate kept: 32 of 279 matrix reports) is shown at the bound and costs the
    estimate nothing: the probe's combination already weighed it (measure/probes/)."""
    top = max([c.mbps, c.pairs_mbps or 0.0, c.train_mbps or 0.0])
    if limit is None or top <= limit:
        return c
    fooled = c.mbps > limit * SENDER_SLACK
    note = (
        f"measured {format_mbps(c.mbps)}, above the {format_mbps(limit)} the line allows: "
        "shown at the bound, confidence lowered"
        if fooled
        else ""
    )
    return dataclasses.replace(
        c,
        mbps=clamp(c.mbps, limit),
        pairs_mbps=None if c.pairs_mbps is None else clamp(c.pairs_mbps, limit),
        train_mbps=None if c.train_mbps is None else clamp(c.train_mbps, limit),
        confidence=min(c.confidence, 0.5) if fooled else c.confidence,
        note="; ".join(n for n in (c.note, note) if n),
    )


def _guard_available(a: AvailBandwidth, limit: float | None) -> AvailBandwidth:
    if limit is None:
        return a
    bps = limit * 1e6
    return dataclasses.replace(
        a,
        estimate_bps=min(a.estimate_bps, bps),
        low_bps=min(a.low_bps, bps),
        high_bps=min(a.high_bps, bps),
        capacity_bps=min(a.capacity_bps, bps),
    )


def guard_path(
    p: PathEstimate | None, b: Bounds, transfer: TransferResult | None = None
) -> PathEstimate | None:
    """The path estimate with every capacity within the bounds."""
    if p is None:
        return None
    limit = b.capacity_max(_fastest_delivered_ip_mbps(transfer, b.payload_share))
    if limit is None:
        return p
    cap = None if p.capacity is None else guard_capacity(p.capacity, limit)
    down = None if p.capacity_down is None else guard_capacity(p.capacity_down, limit)
    av = None if p.available is None else _guard_available(p.available, limit)
    av_down = None if p.available_down is None else _guard_available(p.available_down, limit)
    bdp = p.bdp_bytes
    if cap is not None and p.capacity is not None and cap.mbps < p.capacity.mbps and bdp:
        bdp = round(bdp * cap.mbps / p.capacity.mbps)
    was = (p.capacity, p.capacity_down, p.available, p.available_down, p.bdp_bytes)
    if (cap, down, av, av_down, bdp) == was:
        return p
    return dataclasses.replace(
        p, capacity=cap, capacity_down=down, available=av, available_down=av_down, bdp_bytes=bdp
    )


def _guard_sample(s: TransferSample, limit: float) -> TransferSample:
    bw = s.drs_bandwidth_mbps
    if s.goodput_mbps <= limit and (bw is None or bw <= limit):
        return s
    return dataclasses.replace(
        s,
        goodput_mbps=clamp(s.goodput_mbps, limit),
        drs_bandwidth_mbps=None if bw is None else clamp(bw, limit),
    )


def guard_mode(m: ModeResult, limit: float | None) -> ModeResult:
    """One mode's rates within the goodput bound; a note when one was above it. The bound
    goes with the mode (rate_bound_mbps): the settled rate every rule reads is computed from
    its delivered-byte counts later (measure/engine/rates.py mode_steady_mbps) and is held to it."""
    if limit is None:
        return m
    samples = tuple(_guard_sample(s, limit) for s in m.samples)
    notes = m.notes
    # The settled rate as every rule reads it, before the bound is set on the mode.
    settled = mode_steady_mbps(dataclasses.replace(m, rate_bound_mbps=None))
    for what, value in (("measured", m.throughput_mbps), ("settled", settled)):
        if value is not None and value > limit:
            notes = (
                *notes,
                f"{what} {format_mbps(value)}, above the {format_mbps(limit)} of payload the "
                "line allows: shown at the bound",
            )
    return dataclasses.replace(
        m,
        throughput_mbps=clamp(m.throughput_mbps, limit),
        samples=samples,
        notes=notes,
        rate_bound_mbps=limit,
    )


def guard_transfer(t: TransferResult | None, b: Bounds) -> TransferResult | None:
    """Every mode's goodput within capacity x payload share. Only the configured line rate
    bounds goodput here: an interface speed is refuted by what was delivered."""
    if t is None:
        return None
    limit = None if b.line_mbps is None else b.line_mbps * b.payload_share
    modes = tuple(guard_mode(m, limit) for m in t.modes)
    return t if modes == t.modes else dataclasses.replace(t, modes=modes)


def guard_verdict(v: Verdict, b: Bounds) -> Verdict:
    """The wizard gap's rates within the goodput bound."""
    limit = None if b.line_mbps is None else b.line_mbps * b.payload_share
    g = v.wizard_gap
    if limit is None or all(x is None or x <= limit for x in (g.current_mbps, g.tuned_mbps)):
        return v
    gap = dataclasses.replace(
        g,
        current_mbps=None if g.current_mbps is None else clamp(g.current_mbps, limit),
        tuned_mbps=None if g.tuned_mbps is None else clamp(g.tuned_mbps, limit),
    )
    return dataclasses.replace(v, wizard_gap=gap)
