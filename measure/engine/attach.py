"""Opening a transfer's connections: all at once, while the request is on its way.

Each connection costs a round trip (SYN, SYN-ACK) before it can say which session it
belongs to. Opened one after another once serve has named the session, a transfer spent a
round trip per connection before its first byte (two for DRS's data and SBUF pair, 2N for N
streams); opened in parallel while the transfer request travels, the handshakes share the
request's round trip.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import socket
from collections.abc import Sequence
from dataclasses import dataclass

from tcpwizard.measure.engine import datapath
from tcpwizard.measure.serve.limits import ServeLimits
from tcpwizard.measure.wire.control import ControlClient, Presetup
from tcpwizard.measure.wire.protocol import PeerUnavailable
from tcpwizard.measure.wire.transfer_msgs import AttachRole

# Half of serve's default limit on connections that have not yet said their first line
# (the oldest is dropped beyond it): another client's handshakes still fit beside ours.
# Connections past it open once the first batch has attached.
BATCH = ServeLimits().max_half_open // 2


@dataclass(frozen=True)
class Want:
    role: AttachRole
    stream: int
    presetup: Presetup | None


def wanted(plan: datapath.BufferPlan, streams: int) -> tuple[Want, ...]:
    """Every connection a transfer of `plan` with `streams` streams needs, data first."""
    data = tuple(Want("data", i, plan.presetup) for i in range(streams))
    drs = tuple(Want("drs", i, None) for i in range(streams)) if plan.drs else ()
    return data + drs


class Opening:
    """The connections of one transfer, the first batch connecting from construction on."""

    def __init__(self, ctrl: ControlClient, wants: Sequence[Want]) -> None:
        self._ctrl = ctrl
        self._wants = tuple(wants)
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=max(1, BATCH))
        self._futures = [self._submit(w) for w in self._wants[:BATCH]]

    def _submit(self, w: Want) -> concurrent.futures.Future[socket.socket]:
        return self._pool.submit(self._ctrl.connect_new, w.role, w.presetup)

    def attach(self, session: str) -> tuple[list[socket.socket], list[socket.socket]]:
        """Announce every connection as part of `session`: (data, drs) by stream. Raises
        PeerUnavailable (every socket closed) when one cannot be opened."""
        try:
            for i, w in enumerate(self._wants):
                if i == len(self._futures):  # the next batch, now the last one has attached
                    self._futures += [self._submit(x) for x in self._wants[i : i + BATCH]]
                self._ctrl.attach(self._futures[i].result(), session, w.role, w.stream)
        except PeerUnavailable:
            self.close()
            raise
        self._pool.shutdown(wait=False)
        socks = [f.result() for f in self._futures]
        data = [s for w, s in zip(self._wants, socks, strict=True) if w.role == "data"]
        drs = [s for w, s in zip(self._wants, socks, strict=True) if w.role == "drs"]
        return data, drs

    def close(self) -> None:
        """Close every connection opened or still opening (the request failed)."""
        self._pool.shutdown(wait=True, cancel_futures=True)
        for fut in self._futures:
            if fut.done() and not fut.cancelled() and fut.exception() is None:
                with contextlib.suppress(OSError):
                    fut.result().close()
