"""The verdict rules, one module per limiting factor.

Each module exposes `rule(ev, d) -> Candidate | None`, reading advice.evidence's types and
the shared helpers beside it (advice/capacity_view.py, advice/window_evidence.py,
advice/others_queue.py), never the engine (advice/diagnose.py). `CAUSE_RULES` holds the
rules for causes outside the hosts' TCP settings, in order; advice/rules/registry.py puts
the rules about the hosts' settings before them into `RULES`, the order advice/diagnose.py
walks. A new cause is one new module here plus its line below.
"""

from __future__ import annotations

from collections.abc import Callable

from tcpwizard.advice.evidence import Candidate, Direction, Evidence
from tcpwizard.advice.rules import (
    bufferbloat,
    egress_shaper,
    host_cpu,
    host_drops,
    middlebox,
    policer,
)

Rule = Callable[[Evidence, Direction], Candidate | None]

CAUSE_RULES: tuple[Rule, ...] = (
    egress_shaper.rule,
    policer.rule,
    bufferbloat.rule,
    middlebox.rule,
    host_cpu.rule,
    host_drops.rule,
)
