"""The far-end contract: what the check pipeline may ask of whatever runs at the other end.

A far end is a source of evidence. `tcpwizard serve` gives all of it (its own settings, a
probe reflector, transfers both ways with the DRS channel); a stock `iperf3 -s` gives
measured transfers both ways and its TCP options from the handshake; a web server gives
downloads of a URL; a plain open TCP port gives the handshake and connect-time RTT only.
The pipeline (wizard/run.py) asks this contract and reads `abilities`; it never needs to
know which program answered. Which far end answers, and what takes over when one fails
mid-run, is the registry's business (measure/farends/registry.py).

The transfer types live here too: every far end's `transfer` takes `TransferOptions` and
reports through `TransferHooks`, whichever program sends the bytes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol, runtime_checkable

from tcpwizard.checks.facts import HostFacts
from tcpwizard.measure.engine import datapath
from tcpwizard.measure.model import (
    Direction,
    IdleLoss,
    Mode,
    ModeResult,
    PathEstimate,
    TransferResult,
)
from tcpwizard.measure.observe.handshake import HandshakeFacts
from tcpwizard.measure.probes.probe import Progress as ProbeProgress
from tcpwizard.measure.wire import spec
from tcpwizard.measure.wire.protocol import PeerUnavailable

if TYPE_CHECKING:  # measured by serve's far end only, which imports it when asked
    from tcpwizard.measure.probes.availbw import AvailBandwidth

# The name a far end goes by in the report (`far_end.kind` in the JSON) and in its registry
# entry; "none" is the report's word for a check that found nothing to ask.
FarEndKind = Literal["serve", "iperf3", "tcp-port", "url", "none"]
# What `check --far-end` may ask for: "auto" walks the registry in its order.
FarEndChoice = Literal["auto", "serve", "iperf3"]


class FarEndError(PeerUnavailable):
    """The root of the errors a far end names itself (a busy, locked, vanished or foreign
    server). A subclass of PeerUnavailable, so code that only knows the far end went away
    still catches it; the pipeline reads the two questions below and nothing else."""

    @property
    def absent(self) -> bool:
        """Nothing of this far end's kind answers at its port (closed, something else
        there, silent): the registry's fallback may take over. False when the answer
        itself is the finding (busy, locked, failing)."""
        return False

    def later(self) -> str:
        """Why a transfer after the first one failed, the first one having run."""
        return str(self)


@dataclass(frozen=True)
class Abilities:
    """What a far end can take part in. Anything it cannot do stays `missing` in the
    evidence, and the verdict's confidence says so."""

    facts: bool  # reports its own TCP settings (both hosts audited)
    reflector: bool  # UDP echo and packet trains for the probe, and the available bandwidth
    modes_up: tuple[Mode, ...]
    modes_down: tuple[Mode, ...]
    drs_channel: bool  # SBUF messages: the sender follows the receiver's buffer
    steady_end: bool = False  # a transfer can end once its rate is steady
    both_at_once: bool = False  # up and down can run at the same time (two sessions)
    # Downloads are tuned by our own receiver's DRS alone, never by a static buffer sized
    # from an estimate: the far end's sending cannot be told a window (a web server).
    down_sizes_itself: bool = False

    @property
    def transfers(self) -> bool:
        return bool(self.modes_up or self.modes_down)


@dataclass(frozen=True)
class TransferOptions:
    modes: tuple[Mode, ...] = spec.DEFAULT_MODES
    streams: int = 1
    direction: Literal["up", "down", "both"] = "up"
    # With direction "both": the modes for the way back (None: the same modes). `check` uses
    # autotune alone there, enough to find a limit that only shows in that direction.
    reverse_modes: tuple[Mode, ...] | None = None
    duration_s: float | None = spec.FIXED_DURATION_S
    nbytes: int | None = None
    static_request: int | None = None  # SO_*BUF argument for `static` (see static_request)
    force: bool = False  # root what-if: SO_RCVBUFFORCE/SO_SNDBUFFORCE
    sample_interval_s: float = datapath.DEFAULT_SAMPLE_INTERVAL
    stall_timeout_s: float = datapath.DEFAULT_STALL_TIMEOUT
    # End each transfer once its rate has stopped growing (measure/engine/steady.py), whichever
    # end sends; duration_s is then the cap. `check` uses it when no length was given.
    until_steady: bool = False
    # With direction "both": both ways at the same time (as iperf3 --bidir), on two control
    # connections; each way's ACKs then queue behind the other way's data. `check --quick`.
    at_once: bool = False
    # Per direction, the capacity (IP layer) a sure probe measured that way: a tuned mode is
    # left out of a direction whose autotune transfer already held within GAP_STEP of it
    # (measure/engine/line_filled.py). Empty: every mode asked for runs. Serve's transfers
    # honour it: only a probe through its reflector can be sure (wizard/run.py
    # sure_lines); other far ends run every mode.
    filled_lines: tuple[tuple[Direction, float], ...] = ()

    def directions(self) -> tuple[Direction, ...]:
        return ("up", "down") if self.direction == "both" else (self.direction,)

    def modes_for(self, direction: Direction) -> tuple[Mode, ...]:
        if self.direction == "both" and direction == "down" and self.reverse_modes:
            return self.reverse_modes
        return self.modes


@dataclass(frozen=True)
class Progress:
    """One update for a progress display (local samples only; the far end's come later)."""

    mode: Mode
    direction: Direction
    phase: Literal["start", "sample", "done"]
    t_s: float
    bytes: int
    goodput_mbps: float
    total_s: float | None  # duration-limited transfer: its length
    total_bytes: int | None  # byte-limited transfer: its size
    result: ModeResult | None = None

    @classmethod
    def done(cls, result: ModeResult, total_s: float | None, total_bytes: int | None) -> Progress:
        """The last update of a mode: its merged result."""
        return cls(
            result.mode,
            result.direction,
            "done",
            result.seconds,
            result.bytes,
            result.throughput_mbps,
            total_s,
            total_bytes,
            result,
        )


ProgressFn = Callable[[Progress], None]


@dataclass(frozen=True)
class TransferHooks:
    """What a far end's transfers report their progress to, stop on, and read this host's
    buffer limits from."""

    progress: ProgressFn | None = None
    sysctl_root: str = "/proc/sys"
    cancel: threading.Event | None = None


NO_HOOKS = TransferHooks()


@runtime_checkable
class FarEnd(Protocol):
    @property
    def kind(self) -> FarEndKind:
        """Its name in the report; never a reason for the pipeline to branch."""
        ...

    @property
    def address(self) -> str: ...

    @property
    def port(self) -> int | None: ...

    @property
    def abilities(self) -> Abilities: ...

    def describe(self) -> str:
        """One line for the report: which program answered where."""
        ...

    def facts(self) -> tuple[HostFacts | None, str | None]:
        """The far end's own settings, or why there are none."""
        ...

    def handshake(self) -> HandshakeFacts | None:
        """The TCP options it agreed to (after any completed handshake)."""
        ...

    def probe(self, budget_s: float, progress: ProbeProgress | None = None) -> PathEstimate:
        """RTT and capacity toward it; raises PeerUnavailable when nothing answers."""
        ...

    def transfer(self, options: TransferOptions, hooks: TransferHooks = NO_HOOKS) -> TransferResult:
        """Test transfers; modes it cannot run come back with `error` set (`hooks`: where
        their progress goes, what cancels them, this host's sysctls). A FarEndError says
        the far end itself failed (see its `absent`)."""
        ...

    def available(
        self,
        capacity_bps: float,
        rtt_s: float,
        random_loss: float = 0.0,
        direction: Direction = "up",
    ) -> AvailBandwidth:
        """What cross traffic leaves free of `capacity_bps` toward the far end (up) or back
        (down) (needs `abilities.reflector`), its streams' losses judged against
        `random_loss` (the idle probes' share lost); raises PeerUnavailable (or OSError)
        when it cannot be measured."""
        ...

    def idle_echo(self, count: int) -> IdleLoss:
        """`count` more round-trip probes with the path idle, paced as the RTT probe's
        (needs `abilities.reflector`); raises PeerUnavailable (or OSError) when it cannot."""
        ...

    def missing(self) -> tuple[str, ...]:
        """Evidence this far end cannot give, in plain words."""
        ...

    def silent(self) -> str | None:
        """Why the far end's own process looks held off the CPU (it took requests and
        answered none in time after answering before), or None."""
        ...

    def close(self) -> None:
        """Let go of anything held open between the stages (serve's control connection)."""
        ...
