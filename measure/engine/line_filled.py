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

from collections.abc import Sequence
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
    `lines`: per direction, the capacity (IP layer) a sure probe measured that way (an
    asymmetric path's two ways differ); a direction without one leaves nothing out."""

    lines: Sequence[tuple[Direction, float]] = ()
    filled: dict[Direction, float] = field(default_factory=dict)
    left_out: list[str] = field(default_factory=list)

    def saw(self, result: ModeResult) -> None:
        line = dict(self.lines).get(result.direction)
        if line is None or result.mode != "autotune" or result.error is not None:
            return
        plateau = plateau_mbps(result)
        if plateau is not None and plateau * GAP_STEP >= line:
            self.filled[result.direction] = plateau

    def skip(self, mode: Mode, direction: Direction) -> bool:
        held, line = self.filled.get(direction), dict(self.lines).get(direction)
        if held is None or line is None or mode not in TUNED:
            return False
        self.left_out.append(
            f"{direction}: {mode} not run: autotuning held {held:.1f} Mbit/s of the "
            f"{line:.1f} Mbit/s the probe measured this way (IP layer), within "
            f"{GAP_STEP:g} x of it; a tuned buffer cannot show more"
        )
        return True
