"""Limits a serve instance enforces (shared by serve and the transfer engine)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ServeLimits:
    max_clients: int = 4  # concurrent control connections
    max_duration_s: float = 30.0  # longest single test (transfer, train request)
    max_bytes: int = 2_000_000_000  # most bytes one test may move
    idle_timeout_s: float = 30.0  # a control connection silent this long is closed
    # A peer that stalls mid-message or does not drain our writes for this long is dropped.
    slow_client_timeout_s: float = 10.0
    max_message: int = 64 * 1024
    # Connections that have not yet sent their whole first message (hello or attach) have a
    # limit of their own, and the oldest is dropped for a newcomer: slow or stalled clients
    # can never fill the client slots a real check needs.
    max_half_open: int = 16
    # A control session that has had a message pending this long gives up its slot when all
    # are taken and a new client says hello (a real client sends a line in one write).
    stalled_evict_s: float = 1.0
    # The longest a control connection may stay open, whatever it does: several checks'
    # worth of tests at max_duration_s each.
    max_session_s: float = 900.0

    def clamp_duration(self, requested: float) -> float:
        return max(0.0, min(requested, self.max_duration_s))

    def clamp_bytes(self, requested: int) -> int:
        return max(0, min(requested, self.max_bytes))
