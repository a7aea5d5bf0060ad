"""A token bucket the available-bandwidth streams emptied, told from a FIFO others fill
(measure/probes/availbw.py again_share, bucket_dropped): the lowest rung that passed whole is
sent once more after the faster ones; a bucket drops it now, a FIFO passes it again."""

from __future__ import annotations

import dataclasses

from tcpwizard.measure.probes.availbw import (
    AGAIN_S,
    LADDER,
    LADDER_HIGH,
    MAX_LOSS,
    STREAM_S,
    StreamResult,
    again_share,
    bucket_dropped,
)

CAP = 100e6
WIRE = 1500


def sent(share: float, loss: float, length_s: float = STREAM_S) -> StreamResult:
    """A stream at `share` of the capacity for `length_s` that lost `loss` of its packets,
    arriving at the rate that passed."""
    rate = share * CAP
    packets = round(rate * length_s / (WIRE * 8))
    out = rate * (1 - loss)
    return StreamResult(rate, 0.0, loss, out, packets)


def bucket_ladder(
    policed: float, bucket_bits: float, start_bits: float, gap_s: float = 0.1
) -> list[StreamResult]:
    """The ladder through a token bucket of `policed` bit/s holding `bucket_bits`, with
    `start_bits` in it at the start (a transfer just emptied it), refilled while the streams
    go and between them: what it drops, stream by stream."""
    tokens, out = start_bits, []
    for share in (*LADDER, *LADDER_HIGH):
        want = share * CAP * STREAM_S
        tokens = min(bucket_bits, tokens + policed * STREAM_S)
        passed = min(want, tokens)
        tokens -= passed
        out.append(sent(share, 1 - passed / want))
        tokens = min(bucket_bits, tokens + policed * gap_s)
    return out


def rung(ladder: list[StreamResult], share: float) -> list[StreamResult]:
    """The ladder's streams sent at `share` of the capacity."""
    return [r for r in ladder if abs(r.rate_bps - share * CAP) < 1.0]


def fifo(share: float, cross: float) -> StreamResult:
    """A stream into a full FIFO of capacity CAP shared with `cross` (fluid): it loses what
    exceeds its share, R + X - C over R + X, whenever it is sent."""
    r, x = share * CAP, cross * CAP
    return sent(share, max(0.0, (r + x - CAP) / (r + x)))


def test_an_emptied_bucket_drops_the_rate_it_passed_before() -> None:
    # A policer at a fifth of the line with a second of its rate as bucket (the lab's),
    # refilled for a quarter second since the transfer emptied it.
    ladder = bucket_ladder(20e6, 20e6, 5e6)
    shares = [*LADDER, *LADDER_HIGH]
    assert ladder[0].loss == 0.0 and ladder[-1].loss > MAX_LOSS
    lowest = again_share(ladder, shares)
    assert lowest == min(LADDER)
    # Sent again, three streams long, with the bucket spent: the refill of the pause and
    # of the stream covers a part (sent() gives it AGAIN_S's packets).
    tokens = 20e6 * (0.1 + AGAIN_S)
    want = lowest * CAP * AGAIN_S
    again = sent(lowest, 1 - tokens / want, length_s=AGAIN_S)
    assert bucket_dropped(rung(ladder, lowest), again)


def test_a_fifo_others_fill_drops_by_rate_whenever_it_is_sent() -> None:
    # Others take 35 %: the rungs above 0.65 overflow, the lower ones pass, and pass again.
    shares = [*LADDER, *LADDER_HIGH]
    ladder = [fifo(s, 0.35) for s in shares]
    assert any(r.loss > MAX_LOSS for r in ladder)
    lowest = again_share(ladder, shares)
    assert lowest is not None
    again = fifo(lowest, 0.35)
    longer = dataclasses.replace(again, packets=3 * again.packets)
    assert not bucket_dropped(rung(ladder, lowest), longer)


def test_a_fifo_at_its_edge_losing_a_few_per_cent_either_time_is_no_bucket() -> None:
    ladder = [sent(0.5, 0.04), sent(0.6, 0.3)]
    assert again_share(ladder, [0.5, 0.6]) == 0.5
    assert not bucket_dropped(rung(ladder, 0.5), sent(0.5, 0.06))
    # Three times as long into a FIFO TCP flows keep full: its drops come in bursts, a few
    # more caught than by the shorter one; under twice an overflow's share is no bucket.
    assert not bucket_dropped(rung(ladder, 0.5), sent(0.5, 0.09, length_s=AGAIN_S))


def test_a_queue_that_grew_meanwhile_is_others_load_arriving() -> None:
    ladder = [sent(0.5, 0.0), sent(0.9, 0.4)]
    grew = StreamResult(50e6, 0.3, 0.3, 50e6 / 1.3, 250)  # stretched as its queue grew
    assert grew.rose()
    assert not bucket_dropped(rung(ladder, 0.5), grew)
    assert bucket_dropped(rung(ladder, 0.5), sent(0.5, 0.3))


def test_nothing_to_send_again_without_a_pass_before_an_overflow() -> None:
    shares = [0.5, 0.6, 0.7]
    assert again_share([sent(s, 0.0) for s in shares], shares) is None  # all passed
    assert again_share([sent(s, 0.3) for s in shares], shares) is None  # none passed
    # Overflows only before the passes: a queue that emptied, not one the ladder filled.
    assert again_share([sent(0.5, 0.3), sent(0.6, 0.0)], [0.5, 0.6]) is None
