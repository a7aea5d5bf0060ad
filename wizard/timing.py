"""How long a check took, stage by stage, against the least its measurements need.

The floor is counted in round trips, from what the check measured (docs/check.md#time):

- reaching the far end and asking for its settings: 2 round trips (TCP's handshake, one
  request);
- the probe: 3 (the RTT echoes, a train each way);
- each transfer: 1 round trip to open it (the request and its connections travel together),
  slow start to the window it can reach (log2 of that window over the initial window of 10
  segments, RFC 6928, plus the round that finds the pipe full), 3 round trips of steady rate
  (BBR's full-pipe test, measure/engine/steady.py), and 1 for the far end's report. Transfers that
  ran both ways at once count once, the longer of the two;
- an available-bandwidth measurement: its own length (its streams are the measurement).

A loss-based sender's transfer is held to 3 s by the tool (a loss verdict needs several loss
events): that is a choice beyond the floor, and the report's figures show its cost.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tcpwizard.measure.engine.steady import SteadyStop, slow_start_rounds
from tcpwizard.measure.model import ModeResult, PathEstimate, TransferResult

REACH_ROUNDS = 2
PROBE_ROUNDS = 3
OPEN_ROUNDS = 1
REPORT_ROUNDS = 1


@dataclass(frozen=True)
class CheckTiming:
    seconds: float  # the whole check, from the audit to the verdict
    stages: tuple[tuple[str, float], ...]  # seconds per stage, in order
    floor_s: float | None  # the least the measurements made need (None: no RTT measured)
    floor: str  # how the floor was counted

    @property
    def over_floor(self) -> float | None:
        """The check's time over the floor (1.0: as short as the physics allows)."""
        if not self.floor_s:
            return None
        return self.seconds / self.floor_s


class StageClock:
    """Marks when each stage begins; `clock` is injectable for tests."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._start = clock()
        self._marks: list[tuple[str, float]] = []

    def mark(self, stage: str) -> None:
        if not self._marks or self._marks[-1][0] != stage:
            self._marks.append((stage, self._clock()))

    def stages(self) -> tuple[float, tuple[tuple[str, float], ...]]:
        """(total seconds, seconds per stage; a stage seen twice adds up)."""
        now = self._clock()
        spent: dict[str, float] = {}
        ends = [t for _, t in self._marks[1:]] + [now]
        for (name, began), ended in zip(self._marks, ends, strict=True):
            spent[name] = spent.get(name, 0.0) + ended - began
        return now - self._start, tuple((k, round(v, 3)) for k, v in spent.items())


def _transfer_rounds(m: ModeResult, bdp_bytes: float) -> int:
    # A fixed buffer's window stops below the BDP (about half the buffer is window).
    window = min(bdp_bytes, m.max_buffer_bytes / 2) if m.mode == "untuned" else bdp_bytes
    return OPEN_ROUNDS + slow_start_rounds(window) + SteadyStop().rounds + REPORT_ROUNDS


def floor_s(
    path: PathEstimate | None, transfer: TransferResult | None, at_once: bool
) -> tuple[float, str] | None:
    """The least time the check's measurements need, and how it was counted."""
    if path is None or path.rtt.min <= 0:
        return None
    rtt = path.rtt.min / 1e3
    cap = path.capacity.mbps * 1e6 if path.capacity else 0.0
    bdp = cap * rtt / 8 if cap else 64 * 1024
    rounds = REACH_ROUNDS + PROBE_ROUNDS
    parts = [f"{REACH_ROUNDS} round trips to reach the far end", f"{PROBE_ROUNDS} to probe"]
    modes: Sequence[ModeResult] = [m for m in transfer.modes if m.error is None] if transfer else []
    if modes:
        per_dir = {
            d: sum(_transfer_rounds(m, bdp) for m in modes if m.direction == d)
            for d in ("up", "down")
        }
        moved = max(per_dir.values()) if at_once else sum(per_dir.values())
        rounds += moved
        parts.append(f"{moved} for {len(modes)} transfers (open, slow start, 3 steady, report)")
    extra = sum(a.elapsed_s for a in path.availables())
    text = f"{' + '.join(parts)}, at {rtt * 1e3:.1f} ms"
    if extra:
        text += f", + {extra:.1f} s of available-bandwidth streams"
    return rounds * rtt + extra, text


def check_timing(
    clock: StageClock,
    path: PathEstimate | None,
    transfer: TransferResult | None,
    at_once: bool,
) -> CheckTiming:
    total, stages = clock.stages()
    floor = floor_s(path, transfer, at_once)
    return CheckTiming(
        seconds=round(total, 3),
        stages=stages,
        floor_s=None if floor is None else round(floor[0], 6),
        floor="" if floor is None else floor[1],
    )
