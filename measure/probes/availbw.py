"""Available bandwidth beside capacity: self-loading periodic streams (pathload's SLoPS).

Capacity C is what the narrow link carries; the *available* bandwidth A is what other
traffic leaves of it. A periodic UDP stream sent at rate R toward serve (which timestamps
every arrival with the kernel's clock) meets a queue that grows while R is above A: the
one-way delays of its packets trend upward; below A they do not (Jain and Dovrolis,
"End-to-end available bandwidth", SIGCOMM 2002). Pathload searches R by bisection, one
up/flat verdict per fleet; on a noisy host (a user-space delay line, a busy CPU: one-way
delays jump by milliseconds) that needs many fleets. Here the trend's *slope* is used as
well: with fluid cross traffic X through a FIFO bottleneck, a stream at R > A leaves at
R C / (R + X), so its one-way delay grows by s = (R + X) / C - 1 per unit of sending time,
and A = C - X = R - C s. Each stream above A thus estimates A by itself; a stream whose delay
does not grow says only A >= R.

The slope is robust: one-way delays (arrival - send; the clock offset cancels) are cut into
groups, and the Theil-Sen slope of the group medians is taken, so a few delayed packets do
not tilt it. Streams go at a ladder of rates up to the capacity, each ~STREAM_S long and
followed by as long an idle time (its queue drains); the whole run is bounded by a budget.
"""

from __future__ import annotations

import os
import socket
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

from tcpwizard.measure import stats
from tcpwizard.measure.model import Direction
from tcpwizard.measure.probes import capacity, dispersion
from tcpwizard.measure.wire import udp
from tcpwizard.measure.wire.control import ControlClient

STREAM_S = 0.06  # each stream lasts this long at its rate
MIN_PACKETS, MAX_PACKETS = 40, 2000
# Stream rates as shares of the capacity: half to 70 % first (above A when cross traffic
# takes more than 30 %); only when few of them loaded the path, faster ones: light cross
# traffic (30 % of the capacity) raises a stream at 90 % by s = 0.2 per second, twice the
# noise, where one at 80 % stays at the noise.
LADDER = (0.5, 0.6, 0.7, 0.5, 0.6, 0.7)
LADDER_HIGH = (0.8, 0.9, 0.8, 0.9)
MAX_LOSS = 0.05  # a stream losing more (a full queue, a busy sender) gives no slope
GROUPS = 12
SLOPE_NOISE = 0.1  # a delay growing slower than this (s per s) is no trend (busy hosts)
BURST = 4  # packets sent back to back, the groups paced to the rate (less sender jitter)
# The stream sent again is this long: a bucket left with its refill passes the rate R only
# while R x AGAIN_S stays under its rate P times (the pause + AGAIN_S), so three streams'
# length tells a bucket below 1.56 R (a pause of STREAM_S + the fetch, ~0.1 s) from a FIFO,
# which passes R however long it lasts.
AGAIN_S = 3 * STREAM_S
# The stream sent again must lose twice the share that makes an overflow: drops into a FIFO
# that TCP flows keep full come in bursts at their sawtooth's peaks, which a binomial test
# of independent drops overstates; the bucket it is for drops far more (derived: a fifth of
# the line policed, the lowest rung sent again, 38 %; measured: 43 % in a matrix policer,
# no bucket read in 7 matrix TCP cross-traffic replays nor the UDP cross-traffic lab test,
# docs/bench-causes.md).
BUCKET_LOSS = 2 * MAX_LOSS
BUCKET_NOTE = (
    "the streams' losses followed the volume sent, not their rate: one at {share:.0%} of the "
    "capacity that had passed whole lost {lost:.0%} when sent again, longer, after the faster "
    "ones (a token bucket they emptied, not others' traffic)"
)


@dataclass(frozen=True)
class AvailBandwidth:
    """What cross traffic leaves free of the capacity one way: from this host toward the
    far end (up) or back (down)."""

    estimate_bps: float
    low_bps: float
    high_bps: float
    capacity_bps: float
    elapsed_s: float
    streams: int
    loaded: int  # streams whose delay grew (each one an estimate)
    packets: int
    note: str = ""
    direction: Direction = "up"

    @property
    def mbps(self) -> float:
        return self.estimate_bps / 1e6

    @property
    def emptied_bucket(self) -> bool:
        """The streams read a token bucket they emptied (bucket_dropped), not a free path:
        the estimate is then the capacity by that reading alone (the note says so; a report
        read back keeps only the note)."""
        return self.note.startswith(BUCKET_NOTE[: BUCKET_NOTE.index("{")])

    @property
    def free_share(self) -> float:
        """Available over capacity (0-1)."""
        if not self.capacity_bps:
            return 0.0
        return max(0.0, min(1.0, self.estimate_bps / self.capacity_bps))


@dataclass(frozen=True)
class StreamResult:
    rate_bps: float  # as really sent (first to last send time)
    slope: float  # growth of the one-way delay, seconds per second of sending
    loss: float
    out_bps: float = 0.0  # as it arrived (first to last arrival of what arrived)
    packets: int = 0  # sent (0: unknown, its loss share is taken as it is)

    def overflowed(self, random_loss: float) -> bool:
        """It lost more than MAX_LOSS, and more than random loss at `random_loss` (the
        idle probes' share lost) drops of its packets bar odds under stats.SIGNIFICANCE: a
        queue overflowed. A lossy link drops a stream's packets at its own rate, whatever
        the queue (5 % random loss each way: half the streams past MAX_LOSS, the path read
        as shared)."""
        if self.loss <= MAX_LOSS:
            return False
        if random_loss <= 0.0 or self.packets <= 0:
            return True
        lost = round(self.loss * self.packets)
        return stats.binomial_at_least(self.packets, lost, random_loss) < stats.SIGNIFICANCE

    def rose(self) -> bool:
        """Its one-way delay grew past the noise, as a queue's does."""
        return self.slope > SLOPE_NOISE and self.queue_grew()

    def queue_grew(self) -> bool:
        """Its delay rose as a queue's does: steadily while it was sent. A queue that grows
        through the stream stretches its arrivals by as much as its delays rise, so the
        fitted slope equals R / out - 1, the stream's own stretch (kinematics, whatever
        the cross traffic). Jumps instead (a forwarder or a host stalling, batched
        delivery) tilt the fitted slope without that stretch: on the lab's delay line at
        1.5-2.3 Gbit/s of 1500-byte packets, slopes of 0.4-0.7 beside stretches of
        0.1-0.3, read as half the path taken on an idle path (17 of 23 idle paths of 2
        Gbit/s or more in the twelfth matrix seed). Within SLOPE_NOISE, the noise a
        slope is judged by; shared paths measured at 200 Mbit/s agreed within 0.02."""
        if self.out_bps <= 0:
            return False
        return abs(self.slope - (self.rate_bps / self.out_bps - 1.0)) <= SLOPE_NOISE


def theil_sen(points: list[tuple[float, float]]) -> float:
    """Median of the pairwise slopes."""
    slopes = [
        (y2 - y1) / (x2 - x1)
        for i, (x1, y1) in enumerate(points)
        for x2, y2 in points[i + 1 :]
        if x2 != x1
    ]
    return statistics.median(slopes) if slopes else 0.0


def stream_result(
    tx: dict[int, int], rx: dict[int, int], count: int, wire: int
) -> StreamResult | None:
    """One stream's sent rate, delay slope and loss from send and arrival times (ns), keyed
    by packet index. The rate is read between the first and last index sent: a stream sent
    back has send times only for what arrived (serve stamps them in the packets), and its
    lost packets must not pass for a slower sending."""
    idx = [i for i in sorted(rx) if i in tx]
    if len(idx) < max(10, count // 4) or len(tx) < 2:
        return None
    first, last = min(tx), max(tx)
    span = (tx[last] - tx[first]) / 1e9
    if span <= 0:
        return None
    rate = (last - first) * wire * 8 / span
    size = max(2, len(idx) // GROUPS)
    points = []
    for g in range(0, len(idx) - size + 1, size):
        grp = idx[g : g + size]
        points.append(
            (
                statistics.median(tx[i] for i in grp) / 1e9,
                statistics.median(rx[i] - tx[i] for i in grp) / 1e9,
            )
        )
    rx_span = (rx[idx[-1]] - rx[idx[0]]) / 1e9
    out = (len(idx) - 1) * wire * 8 / rx_span if rx_span > 0 else 0.0
    return StreamResult(rate, theil_sen(points), 1 - len(idx) / count, out, count)


def _estimate(r: StreamResult, capacity_bps: float, random_loss: float) -> float:
    """A from one loaded stream: R - C s from the delay slope; from a lossy one the rate
    response, R + C - R C / R_out (FIFO drops share out like the queue does)."""
    if r.overflowed(random_loss) and r.out_bps > 0:
        return r.rate_bps + capacity_bps - r.rate_bps * capacity_bps / r.out_bps
    return r.rate_bps - capacity_bps * r.slope


def estimate(
    results: list[StreamResult], capacity_bps: float, random_loss: float = 0.0
) -> tuple[float, float, float, int]:
    """(estimate, low, high, loaded streams) from the streams' rates and slopes;
    `random_loss`: the share the path drops at random (StreamResult.overflowed)."""
    # A stream that lost many packets overflowed the queue: it rose, whatever its slope
    # says (a full queue stops growing); its estimate comes from how fast it arrived.
    good = [r for r in results if r.loss <= MAX_LOSS or r.out_bps > 0]
    rising = [r for r in good if r.rose() or r.overflowed(random_loss)]
    # A queue that builds at rate R builds at every faster rate: a rising stream counts only
    # when more than half of the streams at its rate or faster rose too (else a busy host
    # delayed it).
    loaded = [
        r for r in rising
        if 2 * sum(1 for x in rising if x.rate_bps >= r.rate_bps)
        > sum(1 for x in good if x.rate_bps >= r.rate_bps)
    ]  # fmt: skip
    free = [r.rate_bps for r in good if r not in loaded]
    floor = max(free, default=0.0)
    if len(loaded) < 2:
        # No stream (or a single one) built a queue, up to the fastest one sent: nothing
        # takes the capacity.
        return capacity_bps, min(floor, capacity_bps), capacity_bps, 0
    values = sorted(
        min(capacity_bps, max(0.0, _estimate(r, capacity_bps, random_loss))) for r in loaded
    )
    mid = statistics.median(values)
    q = max(1, len(values) // 4)
    low, high = (
        values[q - 1] if len(values) > 3 else values[0],
        values[-q] if len(values) > 3 else values[-1],
    )
    return mid, min(low, mid), max(high, mid), len(loaded)


def again_share(results: list[StreamResult], shares: list[float]) -> float | None:
    """The share of the capacity to send once more after the ladder: the lowest rung a stream
    passed whole at, once some stream passed whole before a later one overflowed (None: no
    such pair, nothing to ask). `shares[i]` is `results[i]`'s rung."""
    for i, r in enumerate(results):
        if r.loss > MAX_LOSS or r.rose():
            continue
        if any(x.loss > MAX_LOSS for x in results[i + 1 :]):
            return min(
                shares[j] for j, x in enumerate(results) if x.loss <= MAX_LOSS and not x.rose()
            )
    return None


def bucket_dropped(
    before: list[StreamResult], again: StreamResult, random_loss: float = 0.0
) -> bool:
    """The streams' losses followed the volume sent, not their rate: `again`, sent AGAIN_S
    long after the faster streams at the rung the streams `before` had passed whole at,
    overflowed. A FIFO that others' traffic fills passes a rate below what they leave for as
    long as it is sent, and drops a faster one by its rate (R + X - C over R + X) whenever it
    is sent; a token bucket passes its tokens and its rate times the time, and the ladder's
    earlier streams spent the tokens (a policer at a fifth of a 100 Mbit/s line with a second
    of its rate as bucket, just emptied by the transfer: the first six streams passed, the
    faster four lost, read as 40 % of the path taken by others). Its delay must not have
    risen either: a queue that grew in the meantime is others' load arriving."""
    if again.loss < BUCKET_LOSS or not again.overflowed(random_loss) or again.rose():
        return False
    if again.packets <= 0:
        return False
    lost = round(again.loss * again.packets)
    # Against the share the same rate lost before (or the path's random share, or one
    # packet's share where it lost none: a share of 0 would make any loss impossible): a
    # FIFO near its edge loses a few per cent either time, which chance alone may part.
    return any(
        r.loss <= MAX_LOSS
        and not r.rose()
        and stats.binomial_at_least(
            again.packets, lost, max(r.loss, random_loss, 1 / again.packets)
        )
        < stats.SIGNIFICANCE
        for r in before
    )


def _arrivals(client: ControlClient, train: int, count: int, wait_s: float) -> dict[int, int]:
    """serve's arrival times of a stream sent as segments of dispersion.SEGMENT packets
    (train ids train, train + 1, ...), keyed by packet index."""
    sizes = dispersion.segments(count)
    out: dict[int, int] = {}
    for first in range(0, len(sizes), dispersion.REPORT_SEGMENTS):
        ids = [train + k for k in range(first, min(len(sizes), first + dispersion.REPORT_SEGMENTS))]
        expect = sum(sizes[first : first + dispersion.REPORT_SEGMENTS])
        rx = capacity.fetch_arrivals(
            client, ids, expect, wait_s if first == 0 else min(wait_s, 0.2)
        )
        for tid in ids:
            for seq, t in rx.get(tid, {}).items():
                out[(tid - train) * dispersion.SEGMENT + seq] = t
    return out


# One stream of the ladder: (share of the capacity, seconds long) -> its result (None: too
# little of it arrived) and the packets it sent.
StreamFn = Callable[[float, float], tuple[StreamResult | None, int]]


def measure_available(
    client: ControlClient,
    sock: socket.socket,
    capacity_bps: float,
    rtt_s: float,
    budget_s: float = 2.0,
    mtu: int = 1500,
    random_loss: float = 0.0,
) -> AvailBandwidth:
    """Streams at a ladder of rates up to capacity_bps toward serve, within about
    budget_s: the available bandwidth, its range and how many streams loaded the path
    (`random_loss`: the share of idle probes lost, estimate's)."""
    start = time.monotonic()
    size = udp.udp_payload_size(client.family, mtu)
    wire = udp.wire_bytes(client.family, size)
    sender = capacity.TrainSender(sock, client.udp_token, size)
    base = int.from_bytes(os.urandom(3), "big") << 8
    n = 0

    def stream(share: float, length_s: float) -> tuple[StreamResult | None, int]:
        nonlocal n
        count = stream_packets(share * capacity_bps, length_s, wire)
        train = base + n * 64  # a stream's segments take consecutive train ids
        n += 1
        tx = sender.train(train, count, share * capacity_bps, wire, BURST)
        time.sleep(max(STREAM_S, rtt_s))  # the queue it built drains
        return stream_result(tx, _arrivals(client, train, count, 0.5), count, wire), count

    return run_ladder(stream, capacity_bps, budget_s, random_loss, start)


def stream_packets(rate_bps: float, length_s: float, wire: int) -> int:
    """Packets of a stream `length_s` long at rate_bps, within [MIN_PACKETS, MAX_PACKETS]."""
    return max(MIN_PACKETS, min(MAX_PACKETS, round(rate_bps * length_s / (wire * 8))))


def run_ladder(
    stream: StreamFn,
    capacity_bps: float,
    budget_s: float,
    random_loss: float,
    start: float,
    direction: Direction = "up",
) -> AvailBandwidth:
    """The ladder of streams (sent by `stream`, either way) from `start` within about
    budget_s, the stream sent again when losses followed the volume, and the estimate."""
    results: list[StreamResult] = []
    shares: list[float] = []
    packets = 0
    note = ""
    ladder = list(LADDER)
    n = 0
    while n < len(ladder):
        share = ladder[n]
        if time.monotonic() - start > budget_s:
            note = "time budget ended the streams early"
            break
        rising = sum(1 for r in results if r.rose())
        if n == len(LADDER) - 1 and 2 * rising < len(results):
            ladder += LADDER_HIGH  # few loaded the path yet: try closer to the capacity
        r, sent = stream(share, STREAM_S)
        packets += sent
        if r is not None:
            results.append(r)
            shares.append(share)
        n += 1
    if not results:
        return AvailBandwidth(0.0, 0.0, capacity_bps, capacity_bps, time.monotonic() - start,
                              0, 0, packets, "no stream arrived (UDP blocked?)",
                              direction)  # fmt: skip
    # Overflows after streams that passed: once more at a rate that passed, to tell a
    # bucket the ladder emptied from a queue others fill (bucket_dropped). One stream more,
    # past the budget if need be: without it the policer reads as others' traffic.
    lowest = again_share(results, shares)
    again: StreamResult | None = None
    if lowest is not None:
        again, sent = stream(lowest, AGAIN_S)
        packets += sent
    before = [r for r, share in zip(results, shares, strict=True) if share == lowest]
    if again is not None and bucket_dropped(before, again, random_loss):
        est = low = high = capacity_bps
        loaded, streams = 0, len(results) + 1
        note = BUCKET_NOTE.format(share=lowest, lost=again.loss)
    else:
        est, low, high, loaded = estimate(results, capacity_bps, random_loss)
        streams = len(results)
    return AvailBandwidth(
        estimate_bps=est,
        low_bps=low,
        high_bps=high,
        capacity_bps=capacity_bps,
        elapsed_s=time.monotonic() - start,
        streams=streams,
        loaded=loaded,
        packets=packets,
        note=note,
        direction=direction,
    )
