"""The estimation maths of the capacity probe: arrival times in, a capacity out, no sockets.

Why both pairs and trains: a pair measures the narrow link's serialization time of one
packet, but a single pair is easily disturbed, so CapProbe keeps the pair whose two packets
saw the least delay (minimum delay sum: neither packet queued behind cross traffic). A train
measures what the path sustains; scoring only its second half skips the part where a token
bucket still has credit or a queue is still filling. Their disagreement is itself evidence:
pairs >> train means a shaper (or competing traffic) limits the sustained rate; arrival
times in tight clusters mean interrupt coalescing/GRO blurred the spacing; a receive rate
as fast as we could send means the sender, not the path, set the pace.

At high rates (hundreds of Mbit/s and up) arrivals come in bursts: interrupt coalescing, GRO,
a software bottleneck that releases packets in batches. A gap inside a burst is the receive
path's per-packet cost, not the bottleneck's service time, so neither a median gap nor a short
train means anything there. Trains are then sized to last tens of milliseconds (several
back-to-back segments, each within serve's per-train limit), the rate comes from the lower
envelope of arrival time against packet index (a batch is released late, never early, so the
least-delayed arrivals lie on the bottleneck's own line), and no estimate may exceed the
rate the sender emitted the same packets at, or the egress interface's speed.

The packet I/O that gathers the arrival times is measure/probes/capacity.py.

Why one module of this size: the train score, the pair filter and their combination balance
one set of thresholds (the sender's slack, clustering, idle share, pauses) against each
other; apart, a threshold would be read away from the ones it is weighed against.
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from tcpwizard.measure.model import CapacityEstimate
from tcpwizard.measure.wire.probe_msgs import MAX_TRAIN_PACKETS

TRAIN_LEN = 200  # long enough to empty a token bucket of ~100 packets
PROBE_TRAIN_LEN = 48
PAIRS = 16
MIN_TRAIN_LEN = 64
TRAIN_TIME_S = 0.15  # main trains are shortened to about this long at the expected rate
HEAD = 8  # arrivals that show a token bucket's burst
AGREE = 0.10  # pairs and train within 10% agree
DISAGREE = 1.3  # pairs or the head of a train this much faster: shaper or cross traffic
SENDER_RATIO = 0.92  # received at >= 92% of our own sending rate: we were the bottleneck
LOSSY = 0.5  # an unpaced train lost this much: a small bottleneck queue (see mini-trains)
MINI = 6  # packets per mini-train: fits the smallest queues (the lab floors at 10 packets)
MINI_LOAD = 0.4  # mini-trains keep the bottleneck this busy on average: the queue drains
MINI_TRAINS = 24
MIN_MINI = 5  # complete mini-trains needed for an estimate
# This share of arrival gaps under half the mean gap: coalescing / GRO / batching. Half, not
# "near zero": a software bottleneck that writes a batch spaces its packets by its own
# per-packet cost (a third of the service time at 1 Gbit/s), and that must count as a burst.
CLUSTERED = 0.5
SPEEDUP = 1.3  # second half this much faster than the first: a catch-up burst
# Two arrivals closer than this were timed by the receive path (a software bottleneck's
# write loop, an interrupt's batch), not by the bottleneck: about 1.2 Gbit/s at 1500 B.
# Pairs and median gaps cannot see faster links with software timestamps.
MIN_GAP_NS = 10_000
# A bursty main train whose scored half spans less than this is too short to average its
# batches out: one more train, sized from its own estimate, if the budget allows.
MIN_SPAN_S = 0.01
HEAD_S = 0.002  # the head of a train covers at least this long at the train's rate
IDLE = 0.2  # this share of the scored packets met an empty queue: a sender-limited train
IDLE_SLACK_NS = 200_000  # one-way delay this close to its minimum counts as no queue
# A train longer than serve takes goes out as back-to-back segments of this size.
SEGMENT = MAX_TRAIN_PACKETS
MAX_SEGMENTS = 4
# A main train lasts about this long at the rough rate: batches of a few hundred microseconds
# (a busy receiver, a software bottleneck) then cost a few percent at most.
TRAIN_SPAN_S = 0.04
REPORT_SEGMENTS = 2  # segments per probe_report: ~17 KB of JSON each, replies stay < 64 KB
# A gap this many times the median, with our next packet queued all through it: a pause.
PAUSE = 4.0
PAUSE_SHARE = 0.08  # more pauses than this share of the gaps: not rare, leave the rate
MIN_PAUSE_GAPS = 16
SENDER_SLACK = 1.03  # timestamp noise allowed before a rate counts as faster than its sender


@dataclass(frozen=True)
class TrainScore:
    sent: int
    received: int
    rate_bps: float | None  # second half of the arrivals
    first_half_bps: float | None
    send_rate_bps: float | None  # our sending pace over the same packets
    clustered: float  # share of arrival gaps < half the mean gap
    # Our pace over the first packets, before a full local queue could push back: what
    # this host can send at all.
    send_peak_bps: float | None = None
    head_bps: float | None = None  # the first HEAD arrivals: a token bucket's burst
    # From the median gap between adjacent packets in the second half: the bottleneck's
    # own speed even when competing traffic stretches some gaps.
    median_gap_bps: float | None = None
    mini_trains: int = 0  # >0: rate_bps is the median over this many mini-trains
    span_s: float = 0.0  # arrival span of the scored (second) half
    # The arrival rate came out faster than the packets were sent (or than the interface):
    # impossible for a bottleneck, so rate_bps was lowered to that bound.
    capped_from_bps: float | None = None
    capped_by: str | None = None  # "sender" or "interface"
    # Share of the scored arrivals that met an empty bottleneck queue (one-way delay at its
    # minimum): the sender did not keep the bottleneck busy, so the rate is a lower bound.
    idle: float = 0.0
    # The bottleneck stood still this often (this long in all) with our packets waiting:
    # left out of rate_bps (see _without_pauses).
    pauses: int = 0
    paused_s: float = 0.0

    @property
    def sender_bps(self) -> float:
        return max(self.send_rate_bps or 0.0, self.send_peak_bps or 0.0)

    @property
    def loss(self) -> float:
        return 1.0 - self.received / self.sent if self.sent else 0.0

    @property
    def bursty(self) -> bool:
        return self.clustered >= CLUSTERED


def _span_rate(times: list[int], wire: int) -> float | None:
    if len(times) < 2 or times[-1] <= times[0]:
        return None
    return (len(times) - 1) * wire * 8 * 1e9 / (times[-1] - times[0])


def _half_rate(half: list[tuple[int, int]], wire: int) -> float | None:
    """Rate over one half of a train: survivors over the span they took. A packet dropped
    at the bottleneck queue never occupied the link, so the survivors left it back to
    back; a late timestamp followed by a catch-up (coalescing, a busy receiver) cancels
    out over the span. Only loss *after* the bottleneck biases it (by the loss rate)."""
    return _span_rate([t for _, t in half], wire)


def envelope_rate(times: list[int], wire: int) -> float | None:
    """Rate from the lower convex hull of (arrival index, arrival time), over the middle half
    of the window. Bursty delivery only ever makes a packet late: the first packets of a
    batch waited for the batch, its last ones were released about when they were due. The
    lower hull runs through those least-delayed arrivals, so its slope is the bottleneck's
    service time whatever the batch sizes; the endpoints of the span, each of which may sit
    anywhere in a batch, do not decide it. The chord from a quarter to three quarters of the
    window, not one hull edge, so a single catch-up burst cannot set the rate."""
    n = len(times)
    if n < 8 or times[-1] <= times[0]:
        return None
    hull: list[tuple[int, int]] = []
    for p in enumerate(times):
        while len(hull) >= 2:
            (x0, y0), (x1, y1) = hull[-2], hull[-1]
            if (x1 - x0) * (p[1] - y0) - (y1 - y0) * (p[0] - x0) > 0:
                break
            hull.pop()
        hull.append(p)

    def at(x: float) -> float:
        for (x0, y0), (x1, y1) in itertools.pairwise(hull):
            if x0 <= x <= x1:
                return y0 + (y1 - y0) * (x - x0) / (x1 - x0)
        return float(hull[-1][1])

    lo, hi = (n - 1) / 4, 3 * (n - 1) / 4
    dt = at(hi) - at(lo)
    return (hi - lo) * wire * 8 * 1e9 / dt if dt > 0 else None


def score_train(
    tx_ns: Mapping[int, int] | None,
    arrivals: Iterable[tuple[int, int]],
    sent: int,
    wire: int,
    link_bps: float | None = None,
) -> TrainScore:
    """Rate from the second half of the arrivals (by arrival order), in bit/s at the IP
    layer; the first half and the head are scored too, to spot a token bucket. Bursty
    arrivals are scored by their lower envelope; no rate exceeds what the sender emitted
    the same packets at, nor link_bps (the egress interface's speed)."""
    arr = sorted(arrivals, key=lambda a: a[1])
    n = len(arr)
    if n < 4:
        return TrainScore(sent, n, None, None, None, 0.0)
    half = n // 2
    second = arr[half - 1 :]  # include the boundary packet: its departure starts the span
    first = arr[: half + 1]
    gaps = [b[1] - a[1] for a, b in itertools.pairwise(second)]
    mean_gap = (second[-1][1] - second[0][1]) / len(gaps) if gaps else 0
    clustered = sum(1 for g in gaps if g < 0.5 * mean_gap) / len(gaps) if gaps else 0.0
    bursty = clustered >= CLUSTERED
    rate = _half_rate(second, wire)
    first_rate = _half_rate(first, wire)
    if bursty:
        # The envelope reads a busy receiver's batches right, but a window dominated by one
        # stall and its catch-up burst fools it (and the span) in opposite directions; the
        # median of both, over the second half and the whole train, is what survives.
        times = [t for _, t in arr]
        tail = [t for _, t in second]
        rates = [
            r
            for r in (
                envelope_rate(tail, wire),
                envelope_rate(times, wire),
                rate,
                _span_rate(times, wire),
            )
            if r
        ]
        rate = statistics.median(rates) if rates else rate
        first_rate = envelope_rate([t for _, t in first], wire) or first_rate
    elif rate and first_rate and rate > SPEEDUP * first_rate:
        # A bottleneck never speeds up halfway through a train (a shaper only slows it
        # down): a fast second half is a catch-up burst after a stall, so the train's
        # whole span is the rate.
        rate = _span_rate([t for _, t in arr], wire) or rate
    pauses: tuple[int, float] = (0, 0.0)
    # One-way delays (clock offset included, the same for every packet): what queued.
    owd = {s: t - tx_ns[s] for s, t in arr if s in tx_ns} if tx_ns is not None else {}
    if not bursty and owd:
        rate, pauses = _without_pauses(owd, second, wire, rate)
    # A burst's first packets say nothing about a token bucket when every burst is fast,
    # and at high rates HEAD packets pass within one batch: the head covers HEAD_S.
    head_n = max(HEAD, round(HEAD_S * (rate or 0.0) / (wire * 8)))
    head = (
        _span_rate([t for _, t in arr[:head_n]], wire) if n >= 3 * head_n and not bursty else None
    )
    send_rate = send_peak = None
    idle = 0.0
    if tx_ns is not None:
        tx = sorted(tx_ns[s] for s, _ in second if s in tx_ns)
        send_rate = _span_rate(tx, wire)
        if pauses[0] and len(tx) > 1 and tx[-1] - tx[0] > pauses[1] * 1e9:
            # A sender held back by its own full queue (the bottleneck is its qdisc) waited
            # out the same pauses: they are not its pace either.
            span = tx[-1] - tx[0] - pauses[1] * 1e9
            send_rate = max(send_rate or 0.0, (len(tx) - 1) * wire * 8 * 1e9 / span)
        early = sorted(tx_ns.values())[: max(4, min(16, len(tx_ns) // 4))]
        send_peak = _span_rate(early, wire)
        idle = _idle_share(owd, second, wire, rate)
    median_rate = None
    if len(gaps) >= 8 and statistics.median(gaps) >= MIN_GAP_NS and not bursty:
        median_rate = wire * 8 * 1e9 / statistics.median(gaps)
    bounds = [(b, why) for b, why in ((send_rate, "sender"), (link_bps, "interface")) if b]
    bound, capped_by = min(bounds, default=(None, None))
    capped_from = None
    if bound is not None:
        if capped_by == "sender":
            bound *= SENDER_SLACK
        if rate is not None and rate > bound:
            capped_from, rate = rate, bound
        else:
            capped_by = None
        first_rate = min(first_rate, bound) if first_rate else first_rate
        head = min(head, bound) if head else head
        median_rate = min(median_rate, bound) if median_rate else median_rate
    return TrainScore(
        sent,
        n,
        rate,
        first_rate,
        send_rate,
        clustered,
        send_peak,
        head,
        median_rate,
        span_s=(second[-1][1] - second[0][1]) / 1e9,
        capped_from_bps=capped_from,
        capped_by=capped_by,
        idle=idle,
        pauses=pauses[0],
        paused_s=pauses[1],
    )


def _without_pauses(
    owd: Mapping[int, int],
    scored: list[tuple[int, int]],
    wire: int,
    rate: float | None,
) -> tuple[float | None, tuple[int, float]]:
    """The rate without the bottleneck's pauses: a gap of several service times after which
    our next packet had been waiting longer than the gap itself, so the link stood still
    with a queue. A shaper whose timer fired late (a busy or virtual host) does that, and
    its bucket refunds only a burst of it, so the span rate would charge the path for the
    host's scheduling. Rare by definition: competing traffic stretches many gaps a little,
    and a train whose pauses are common is left as it is. Returns (rate, (pauses, seconds))."""
    gaps = [(b[1] - a[1], b[0]) for a, b in itertools.pairwise(scored)]
    if len(gaps) < MIN_PAUSE_GAPS:
        return rate, (0, 0.0)
    med = statistics.median(g for g, _ in gaps)
    if med < MIN_GAP_NS:
        return rate, (0, 0.0)
    if len(owd) < MIN_PAUSE_GAPS:
        return rate, (0, 0.0)
    base = min(owd.values())
    paused: list[int] = []
    kept: list[int] = []
    catching_up = False
    for g, s in gaps:
        if g > PAUSE * med and s in owd and owd[s] - base >= g:
            paused.append(g)
            catching_up = True
        elif catching_up and g < 0.5 * med:
            # The burst a shaper's bucket refunds after a pause: back on its schedule, so
            # it goes out with the pause (a pause the bucket refunds in full costs nothing).
            continue
        else:
            catching_up = False
            kept.append(g)
    if not paused or len(paused) > PAUSE_SHARE * len(gaps) or not sum(kept):
        return rate, (0, 0.0)
    return len(kept) * wire * 8 * 1e9 / sum(kept), (len(paused), sum(paused) / 1e9)


def _idle_share(
    owd: Mapping[int, int],
    scored: list[tuple[int, int]],
    wire: int,
    rate: float | None,
) -> float:
    """Share of the scored arrivals whose one-way delay sat at the train's minimum: they met
    no queue. (Clock offset between the hosts is the same for every packet.)"""
    if len(owd) < 8 or not rate:
        return 0.0
    slack = max(IDLE_SLACK_NS, 5 * wire * 8 * 1e9 / rate)
    base = min(owd.values())
    near = [s for s, _ in scored if s in owd and owd[s] - base < slack]
    return len(near) / len(scored)


def score_mini_trains(
    tx_ns: Mapping[int, int] | None,
    arrivals: Iterable[tuple[int, int]],
    sent: int,
    wire: int,
    size: int = MINI,
) -> TrainScore:
    """For bottleneck queues of a few packets, where a long train loses most of itself:
    short back-to-back trains (seq // size) that fit the queue, spaced so it drains
    between them. Each complete one gives (size-1) service times; the median of them is
    the rate (robust to the odd disturbed one)."""
    groups: dict[int, list[int]] = {}
    got = 0
    for seq, t in arrivals:
        groups.setdefault(seq // size, []).append(t)
        got += 1
    rates = []
    for k, times in groups.items():
        if len(times) == size:
            times.sort()
            r = _span_rate(times, wire)
            sent_span = None
            if tx_ns is not None:
                left = [tx_ns[k * size + i] for i in range(size) if k * size + i in tx_ns]
                sent_span = max(left) - min(left) if len(left) == size else None
            # Squeezed after the bottleneck (arrived closer than it left): not its speed.
            if r and not (sent_span and times[-1] - times[0] < 0.9 * sent_span):
                rates.append(r)
    peak = None
    if tx_ns is not None:
        first = sorted(t for s, t in tx_ns.items() if s < size)
        peak = _span_rate(first, wire)
    if len(rates) < MIN_MINI:
        return TrainScore(sent, got, None, None, None, 0.0, peak)
    rate = statistics.median(rates)
    return TrainScore(sent, got, rate, None, None, 0.0, peak, mini_trains=len(rates))


def capprobe(
    tx_ns: Mapping[int, int], rx_ns: Mapping[int, int], npairs: int, wire: int
) -> tuple[float, float] | None:
    """(rate in bit/s, share of pairs that were sender-limited) from the pair with the
    minimum delay sum. Pair i is seq 2i and 2i+1. Clock offset between the hosts adds the
    same constant to every sum, so it does not change which pair wins."""
    best: tuple[int, int] | None = None  # (delay sum, dispersion)
    sender_limited = 0
    valid = 0
    for i in range(npairs):
        a, b = 2 * i, 2 * i + 1
        if not all(k in tx_ns and k in rx_ns for k in (a, b)):
            continue
        disp = rx_ns[b] - rx_ns[a]
        sent_gap = tx_ns[b] - tx_ns[a]
        # A bottleneck only spreads a pair; one that arrived closer than it left was
        # squeezed after it (delivered in one batch) and says nothing about the path.
        if disp < MIN_GAP_NS or disp < 0.9 * sent_gap:
            continue
        valid += 1
        if disp <= 1.1 * sent_gap:
            sender_limited += 1
        total = (rx_ns[a] - tx_ns[a]) + (rx_ns[b] - tx_ns[b])
        if best is None or total < best[0]:
            best = (total, disp)
    if best is None:
        return None
    return wire * 8 * 1e9 / best[1], sender_limited / valid


def combine(
    pairs: tuple[float, float] | None,
    train: TrainScore | None,
    direction: str = "up",
    link_bps: float | None = None,
    unpaced_loss: float | None = None,
) -> CapacityEstimate | None:
    """One estimate from pairs and train, saying what limited it and how sure we are.
    unpaced_loss: the largest share an unpaced train lost, when mini-trains replaced it.

    The train is the primary estimate (many packets, robust to timing noise); the pairs
    corroborate it. When they disagree, the train's own shape says why: a fast head then
    a slower tail is a token bucket; irregular gaps whose median is much shorter than
    their mean are competing traffic (the median gap is then the bottleneck's speed).
    Whatever the reason, a disagreement lowers the confidence and is reported."""
    notes: list[str] = []
    if pairs and link_bps and pairs[0] > link_bps * SENDER_SLACK:
        # Faster than the interface can send: two packets delivered in one batch.
        notes.append(
            f"packet pairs claimed {pairs[0] / 1e6:.0f} Mbit/s, more than the interface's "
            f"{link_bps / 1e6:.0f} Mbit/s: delivered in one batch, not used"
        )
        pairs = None
    pm = pairs[0] / 1e6 if pairs else None
    tm = train.rate_bps / 1e6 if train and train.rate_bps else None
    if tm is None and pm is None:
        return None
    limited: str | None = None
    if train is None or tm is None:
        assert pm is not None
        return CapacityEstimate(pm, _m("capprobe-pairs", direction), 0.5, pm, None, None, "")
    mbps = tm
    agree = pm is not None and abs(pm - tm) <= AGREE * tm
    confidence = 0.9 if agree else (0.5 if pm is not None else 0.6)
    method = "capprobe-pairs+train" if agree else "train"
    if train.mini_trains:
        method = "mini-trains+pairs" if agree else "mini-trains"
        notes.append(
            f"small bottleneck queue (a long train lost {train.loss:.0%}): median of "
            f"{train.mini_trains} short trains"
        )
    head = train.head_bps / 1e6 if train.head_bps else None
    med = train.median_gap_bps / 1e6 if train.median_gap_bps else None
    if train.capped_from_bps:
        notes.append(
            f"arrivals came faster ({train.capped_from_bps / 1e6:.0f} Mbit/s) than the "
            f"packets could have left (sent at {tm:.0f} Mbit/s or the interface's speed): "
            "capped there"
        )
    if train.capped_by == "sender" or (
        train.sender_bps and train.rate_bps and train.rate_bps >= SENDER_RATIO * train.sender_bps
    ):
        limited, confidence = "sender", min(confidence, 0.4)
        notes.append(
            f"received as fast as the sender sent ({tm:.0f} Mbit/s): the path is at least this fast"
        )
    elif train.idle >= IDLE:
        limited, confidence = "sender", min(confidence, 0.4)
        notes.append(
            f"{train.idle:.0%} of the packets met an empty bottleneck queue: the sender did "
            f"not keep the path busy, so it is at least {tm:.0f} Mbit/s"
        )
    elif train.bursty:
        limited, confidence = "coalescing", min(confidence, 0.6 if train.span_s < 0.01 else 0.7)
        notes.append(
            f"{train.clustered:.0%} of arrivals came in bursts (interrupt coalescing/GRO, "
            f"batching): the rate is the lower envelope of {train.span_s * 1e3:.0f} ms of "
            "arrivals, not a gap inside a burst"
        )
    elif head is not None and head > DISAGREE * tm:
        limited, confidence = "shaper", 0.8
        notes.append(
            f"the first packets passed at {head:.1f} Mbit/s, then {tm:.1f}: a token-bucket "
            "shaper; a long transfer gets the lower rate"
        )
    elif pm is not None and pm > DISAGREE * tm and med is not None and med > DISAGREE * tm:
        limited, confidence, mbps = "cross-traffic", 0.6, med
        method = "train-median-gap"
        notes.append(
            f"back-to-back packets see {med:.1f} Mbit/s but the train averaged {tm:.1f}: "
            "competing traffic shares the bottleneck (about "
            f"{max(0.0, med - tm):.0f} Mbit/s of it now)"
        )
    if train.pauses:
        notes.append(
            f"the bottleneck stood still {train.pauses} time(s), {train.paused_s * 1e3:.1f} ms "
            "in all, with our packets queued (a shaper's late timer, a host not scheduled): "
            "the rate leaves the pauses out"
        )
    if pm is not None and not agree and limited not in ("shaper", "cross-traffic"):
        notes.append(f"packet pairs disagree ({pm:.1f} Mbit/s vs the train's {tm:.1f}); train used")
    if (
        limited is None
        and train.send_rate_bps
        and train.rate_bps
        and train.rate_bps >= SENDER_RATIO * train.send_rate_bps
    ):
        notes.append(
            "the sender was slowed to the bottleneck rate by its own full queue: the "
            "bottleneck is this host's interface or qdisc"
        )
    if train.loss > LOSSY and not train.mini_trains:
        notes.append(f"{train.loss:.0%} of a train was lost (small bottleneck queue)")
    return CapacityEstimate(
        mbps=mbps,
        method=_m(method, direction),
        confidence=confidence,
        pairs_mbps=pm,
        train_mbps=tm,
        limited_by=limited,
        note="; ".join(notes),
        train_loss=round(max(train.loss, unpaced_loss or 0.0), 3),
    )


def _m(method: str, direction: str) -> str:
    return method if direction == "up" else f"{method} ({direction})"


def train_len(rate_bps: float | None, wire: int) -> int:
    """Packets in a main train: TRAIN_LEN, but no longer than about TRAIN_TIME_S at the
    expected rate, so slow paths stay within the time budget; on fast paths long enough to
    last about TRAIN_SPAN_S (up to MAX_SEGMENTS segments)."""
    if not rate_bps:
        return TRAIN_LEN
    fit = round(TRAIN_TIME_S * rate_bps / (wire * 8))
    span = round(TRAIN_SPAN_S * rate_bps / (wire * 8))
    return max(MIN_TRAIN_LEN, min(TRAIN_LEN, fit), min(SEGMENT * MAX_SEGMENTS, span))


def main_train_bytes(rate_bps: float, wire: int = 1500) -> int:
    """About how many bytes a main train sent toward a path of `rate_bps` carries."""
    return train_len(rate_bps, wire) * wire


def segments(count: int) -> list[int]:
    """Sizes of the back-to-back segments a train of `count` packets is sent as."""
    return [min(SEGMENT, count - i) for i in range(0, count, SEGMENT)]


def too_short(score: TrainScore, count: int, wire: int) -> bool:
    """A bursty train whose own estimate asks for a longer train than was sent."""
    return bool(
        score.bursty
        and score.rate_bps
        and score.span_s < MIN_SPAN_S
        and train_len(score.rate_bps, wire) > 1.5 * count
    )
