"""`interface`: a host's network interface limits the transfer (its audit's critical
interface findings).
"""

from __future__ import annotations

from tcpwizard.advice.evidence import Candidate as _Candidate
from tcpwizard.advice.evidence import Direction as _Direction
from tcpwizard.advice.evidence import Evidence


def rule(ev: Evidence, d: _Direction) -> _Candidate | None:
    for role, audit in ((d.sender_role, d.sender), (d.receiver_role, d.receiver)):
        if audit is None:
            continue
        bad = [
            f
            for f in audit.findings
            if f.id.startswith(("interface", "nic", "link")) and f.severity == "crit"
        ]
        if bad:
            return _Candidate(
                d.name,
                "interface",
                0.65,
                role,
                f"{d.name}: the {role} host's network interface limits the transfer.",
                tuple(f.message for f in bad),
            )
    return None
