"""Rules for causes outside the hosts' TCP settings, one module per limiting factor.

Each module exposes `rule(ev, d) -> Candidate | None`, reading only advice.evidence's types.
`CAUSE_RULES` is the ordered registry advice/diagnose.py walks beside its own rules; a new
cause is one new module here plus its line below.
"""

from __future__ import annotations

from collections.abc import Callable

from tcpwizard.advice.evidence import Candidate, Direction, Evidence
from tcpwizard.advice.rules import bufferbloat, host_cpu, host_drops, middlebox, policer

Rule = Callable[[Evidence, Direction], Candidate | None]

CAUSE_RULES: tuple[Rule, ...] = (
    policer.rule,
    bufferbloat.rule,
    middlebox.rule,
    host_cpu.rule,
    host_drops.rule,
)
