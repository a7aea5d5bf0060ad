"""Each test transfer's time-sequence graph: the transfers run under tcpdump (as `--plot`
captures them, here only the far end's address and port), and every captured flow is given
to the transfer whose run it overlaps most in time and matches in direction. The transfers
of one direction run one after another, so the flows of one mode never overlap another's of
its direction (`--quick` runs the two directions at once); the control and
DRS channels carry too little to count as flows (tsg.MIN_FLOW_BYTES)."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from types import TracebackType

from tcpwizard.exitcodes import TcpWizardError
from tcpwizard.measure.farends.interface import Progress
from tcpwizard.measure.model import Direction, Mode
from tcpwizard.measure.observe.tsg import TcpdumpCapture, TsgSeries, series_from_capture

TransferKey = tuple[Mode, Direction]
# (first, last) wall-clock time (s since the epoch, as the capture's) a transfer reported.
Span = tuple[float, float]


@dataclass(frozen=True)
class TransferFlows:
    mode: Mode
    direction: Direction
    flows: tuple[TsgSeries, ...]  # largest first: one per stream


@dataclass(frozen=True)
class TransferCapture:
    transfers: tuple[TransferFlows, ...]
    error: str | None = None  # nothing was captured: why

    def flows_of(self, mode: Mode, direction: Direction) -> tuple[TsgSeries, ...]:
        found = (t.flows for t in self.transfers if (t.mode, t.direction) == (mode, direction))
        return next(found, ())


def _overlap(a: Span, b: Span) -> float:
    return min(a[1], b[1]) - max(a[0], b[0])


def _direction(s: TsgSeries, remote: str, port: int | None) -> Direction | None:
    """up when the data went to the far end, down when it came from it: by address, or
    where both ends have one address (loopback) by the far end's port. None: unknown."""
    if s.src != s.dst:
        return "up" if s.dst == remote else "down"
    if port is None:
        return None
    src_port, dst_port = (end.rsplit(":", 1)[-1] for end in s.flow.split(" > ", 1))
    if dst_port == str(port):
        return "up"
    return "down" if src_port == str(port) else None


def assign_flows(
    series: list[TsgSeries], spans: dict[TransferKey, Span], remote: str, port: int | None
) -> tuple[TransferFlows, ...]:
    """The flows of each transfer, uploads first, each way in the order it ran. A flow
    whose data went to `remote` (its `port`) belongs to an upload, one from it to a
    download (over loopback both ends have that address: the port tells, and without it,
    time alone); a flow that overlaps no transfer of its direction (a probe, another
    program) is left out. Both ways may run at once (`check --quick`): the direction keeps
    their flows apart."""
    got: dict[TransferKey, list[TsgSeries]] = {key: [] for key in spans}
    for s in series:
        direction = _direction(s, remote, port)
        flow_span = (s.t0, s.t0 + s.duration_s)
        best = max(
            (k for k in spans if direction is None or k[1] == direction),
            key=lambda k: _overlap(flow_span, spans[k]),
            default=None,
        )
        if best is not None and _overlap(flow_span, spans[best]) > 0:
            got[best].append(s)
    # The uploads first, then the downloads, each in the order they ran: as a check runs
    # them one after another, and as its report lists them when they ran at once.
    ordered = sorted(spans, key=lambda k: (k[1] != "up", spans[k][0]))
    return tuple(
        TransferFlows(m, d, tuple(sorted(got[(m, d)], key=lambda s: -s.bytes))) for m, d in ordered
    )


class TransferRecorder:
    """tcpdump of the TCP packets to and from `remote` (its `port`) while the block runs;
    `note` every transfer progress update in it. A capture that cannot start (no root, no
    tcpdump) leaves the transfers alone and says why in the result."""

    def __init__(self, remote: str, port: int | None, flag: str) -> None:
        self.remote = remote
        self.port = port
        self.flag = flag  # the option that asked for it, for the error message
        self.spans: dict[TransferKey, Span] = {}
        self.error: str | None = None
        self.series: list[TsgSeries] = []
        self._dir = self._pcap = ""
        self._dump: TcpdumpCapture | None = None

    def note(self, p: Progress) -> None:
        now = time.time()
        first, _last = self.spans.get((p.mode, p.direction), (now, now))
        self.spans[(p.mode, p.direction)] = (first, now)

    def __enter__(self) -> TransferRecorder:
        self._dir = tempfile.mkdtemp(prefix="tcpwizard-tsg-")
        self._pcap = os.path.join(self._dir, "transfers.pcap")
        dump = TcpdumpCapture(self._pcap, self.remote, self.port, flag=self.flag)
        try:
            self._dump = dump.__enter__()
        except TcpWizardError as exc:
            self.error = str(exc)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            if self._dump is None:
                return
            self._dump.__exit__(kind, exc, tb)
            if kind is None:
                try:
                    self.series = series_from_capture(self._pcap)
                except (OSError, ValueError) as err:
                    self.error = f"the capture could not be read: {err}"
        finally:
            shutil.rmtree(self._dir, ignore_errors=True)

    def result(self) -> TransferCapture:
        if self.error is not None:
            return TransferCapture((), self.error)
        return TransferCapture(assign_flows(self.series, self.spans, self.remote, self.port))
