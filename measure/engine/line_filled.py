"""When a tuned test transfer can show nothing autotuning has not shown.

The check runs a tuned mode (DRS, or a static 2 x BDP buffer) beside autotuning to show
what tuning gives: the wizard gap's tuned side. Once autotuning's settled rate, at the IP
layer, stood within GAP_STEP of the capacity a sure probe measured, a tuned buffer could
move at most GAP_STEP times as much, no gap the verdict would call one
(advice/diagnose.py reads a tuned rate as a gap only above GAP_STEP x the current), so the
tuned transfer is left out of that direction and its seconds are saved (1.5 s of DRS and
0.3 s around it at 100 ms x 100 Mbit/s, docs/bench-check-time.md). A transfer that stopped
short of the line still gets its tuned witness: that is where the gap, a policer or other
traffic shows.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tcpwizard.measure.engine.loaded_rtt import plateau_mbps
from tcpwizard.measure.model import Direction, Mode, ModeResult

# The wizard gap's smallest step: a tuned rate within 10 % of the current one is no gap
# (advice/diagnose.py). DRS and autotuning on one clean path settle within 2 % of each
# other (docs/bench-drs-targets.md, 48 runs: 0.98-1.01), five times inside the step.
GAP_STEP = 1.1
TUNED: tuple[Mode, ...] = ("drs", "static", "overprovisioned")


@dataclass
class TunedSkip:
    """Fed each finished mode in order; says which tuned modes are left out and why.
    `capacity_mbps` None: nothing is left out."""

    capacity_mbps: float | None
    filled: dict[Direction, float] = field(default_factory=dict)
    left_out: list[str] = field(default_factory=list)

    def saw(self, result: ModeResult) -> None:
        if self.capacity_mbps is None or result.mode != "autotune" or result.error is not None:
            return
        plateau = plateau_mbps(result)
        if plateau is not None and plateau * GAP_STEP >= self.capacity_mbps:
            self.filled[result.direction] = plateau

    def skip(self, mode: Mode, direction: Direction) -> bool:
        held = self.filled.get(direction)
        if held is None or mode not in TUNED or self.capacity_mbps is None:
            return False
        self.left_out.append(
            f"{direction}: {mode} not run: autotuning held {held:.1f} Mbit/s of the "
            f"{self.capacity_mbps:.1f} Mbit/s the probe measured (IP layer), within "
            f"{GAP_STEP:g} x of it; a tuned buffer cannot show more"
        )
        return True
