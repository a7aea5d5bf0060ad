"""`application`: the sender kept TCP busy only part of the time; the application, CPU
or disk did not supply data.
"""

from __future__ import annotations

from tcpwizard.advice.evidence import Candidate as _Candidate
from tcpwizard.advice.evidence import Direction as _Direction
from tcpwizard.advice.evidence import Evidence
from tcpwizard.advice.evidence import chrono as _chrono
from tcpwizard.advice.evidence import window_held as _window_held


def rule(ev: Evidence, d: _Direction) -> _Candidate | None:
    _, _, busy = _chrono(d.current)
    # A transfer that moved data was busy for some of its time on every kernel that counts
    # busy time (4.10+); 0 is a kernel without the chrono fields, not an idle application.
    if busy is None or busy <= 0 or busy >= 0.6 or d.current is None:
        return None
    if _window_held(d.current):
        return None
    return _Candidate(
        d.name,
        "application",
        0.6,
        d.sender_role,
        f"{d.name}: the sender had data in flight only {busy:.0%} of the time: the application,"
        " CPU or disk did not keep TCP busy.",
        (f"tcpi_busy_time share {busy:.0%}",),
    )
