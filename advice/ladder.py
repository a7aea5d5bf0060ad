"""The one factor that limited one direction of a transfer, from an Observation
(advice/observation.py): the steps the live-connection judge (`conns`) and the capture judge
(`check --pcap`) share, in the order they are tried.

1. the receiving application not reading, seen in the window it offers;
2. (the capture's device that overwrote options, a hook);
3. the receiving application not reading, seen in its ACKs;
4. the offered window held the sender: `window-scaling` when scaling was not agreed and the
   window stops at 64 KB, else `receiver-window`;
5. the send buffer held the sender (where the view can tell);
6. (a policer, a hook: each view has its own test);
7. losses with no queue standing, at a loss-based sender's bound: `congestion`, on the host
   that turned SACK off where the handshake agreed none (each loss then costs a round trip);
8. a queue standing at the bottleneck: `path-capacity`;
9. the sender idle: its `application`;
10. a queue at times: `path-capacity`;
11. the reader falling behind, its window not yet closed: its `application`;
12. what is left: the congestion window at the path's rate (the sender's kernel), the send
    buffer (a capture: flat in flight, no queue, no loss) or the path unseen (the receiver).

The ladder decides the factor, the host and the confidence; the view words the verdict
(`word`: the explanation, the evidence and the fixes of the step found).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from tcpwizard.advice.application import FALLING_BEHIND
from tcpwizard.advice.model import LimitingFactor, Verdict
from tcpwizard.advice.observation import LossSign, Observation, ReaderSign, Vantage
from tcpwizard.advice.window_law import UNSCALED_WINDOW
from tcpwizard.checks.model import Fix, HostRole

Judged = tuple[Verdict, tuple[Fix, ...]]
Hook = Callable[[], Judged | None]
Step = Literal[
    "reader",
    "window-scaling",
    "receiver-window",
    "sender-buffer",
    "congestion",
    "no-sack",
    "queue",
    "idle-sender",
    "queue-at-times",
    "reader-behind",
    "rest",
]


@dataclass(frozen=True)
class Finding:
    step: Step
    factor: LimitingFactor
    host: HostRole | None
    confidence: float


# The view's words for a finding: the explanation, the evidence and the fixes.
Words = tuple[str, Sequence[str], tuple[Fix, ...]]
Word = Callable[[Finding], Words]

# The confidences below are the two judges' own, as they were before they shared this ladder:
# each step's weight of evidence, not a measured accuracy (the scenario matrix calibrates
# `check`'s verdicts, advice/calibration.py; `conns` and captures have no such bench yet).
# The signs of a reader seen in the window it offers come before a device's verdict; those
# seen in its ACKs after it.
WINDOW_SIGNS: tuple[ReaderSign, ...] = ("zero-window", "window-closing", "unread-queue")
READER_CONFIDENCE: dict[ReaderSign, float] = {
    "zero-window": 0.75,
    "window-closing": 0.6,
    "unread-queue": 0.7,
    "acks-held": 0.7,
    "edge-still": 0.7,
}
# A sender at the bound, one above it, one unseen (only segments out of order at the
# receiver: the far end's congestion control sets the rate, by how much it alone tells).
LOSS_CONFIDENCE: dict[LossSign, float] = {"at-bound": 0.65, "above-bound": 0.45, "upstream": 0.4}
# The same losses with no SACK agreed: the setting that makes each of them cost a round trip
# is the fixable part, a step above what the losses alone say (check's rule: 0.9 against
# its 0.85 for losses at their bound, advice/rules/no_sack.py).
NO_SACK_LIFT = 0.05


def judge(
    o: Observation, word: Word, middlebox: Hook | None = None, policer: Hook | None = None
) -> Judged:
    """The verdict on `o` and its fixes, worded by the view; the hooks are the steps only
    one view has (each returns None where it does not hold)."""
    found = find(o, middlebox, policer)
    if not isinstance(found, Finding):
        return found
    explanation, evidence, fixes = word(found)
    verdict = Verdict.observed(
        found.factor, found.confidence, found.host, explanation, list(evidence), o.rate_mbps
    )
    return verdict, fixes


def find(
    o: Observation, middlebox: Hook | None = None, policer: Hook | None = None
) -> Finding | Judged:
    """The first step of the ladder that holds for `o` (a hook's own verdict where one
    holds first)."""
    if o.reader_stall in WINDOW_SIGNS:
        return _reader(o)
    if middlebox is not None and (judged := middlebox()) is not None:
        return judged
    if o.reader_stall is not None:
        return _reader(o)
    if o.window_held:
        if o.scaling_agreed is False and o.window_max <= UNSCALED_WINDOW:
            return Finding("window-scaling", "window-scaling", o.scaling_missing, 0.9)
        return Finding("receiver-window", "receiver-window", o.receiver, _rwnd(o))
    if o.sndbuf_held:
        return Finding("sender-buffer", "sender-buffer", o.sender, 0.8)
    if policer is not None and (judged := policer()) is not None:
        return judged
    if o.losses is not None:
        if o.sack_agreed is False and o.sack_missing is not None:
            lifted = LOSS_CONFIDENCE[o.losses] + NO_SACK_LIFT
            return Finding("no-sack", "congestion", o.sack_missing, lifted)
        return Finding("congestion", "congestion", o.sender, LOSS_CONFIDENCE[o.losses])
    if o.queue == "standing":
        return Finding("queue", "path-capacity", None, 0.75)
    if o.sender_idle:
        # The kernel's busy time is measured; a capture's idle share is read from its gaps.
        confidence = 0.7 if o.vantage == "sender" else 0.65
        return Finding("idle-sender", "application", o.sender, confidence)
    if o.queue == "at-times":
        return Finding("queue-at-times", "path-capacity", None, 0.6)
    if o.reader_behind:
        return Finding("reader-behind", "application", o.receiver, FALLING_BEHIND)
    return REST[o.vantage](o)


def _reader(o: Observation) -> Finding:
    assert o.reader_stall is not None
    return Finding("reader", "application", o.receiver, READER_CONFIDENCE[o.reader_stall])


def _rwnd(o: Observation) -> float:
    """The receiver's own kernel sees the window it offers filled, not the sender's stalls."""
    if o.vantage == "receiver":
        return 0.75
    return 0.8 if o.window_filled else 0.65


# What is left when no step holds: the sender's kernel counted no buffer and no window, so
# its congestion window at the path's rate; on the wire a flat amount in flight with no queue
# and no loss is the send buffer; the receiver cannot see the sender, the path or which.
REST: dict[Vantage, Callable[[Observation], Finding]] = {
    "sender": lambda o: Finding("rest", "path-capacity", None, 0.7),
    "wire": lambda o: Finding("rest", "sender-buffer", o.sender, 0.65),
    "receiver": lambda o: Finding("rest", "path-capacity", None, 0.45),
}
