"""The ordered registry of every verdict rule advice/diagnose.py walks.

The order decides ties: of candidates with equal confidence the engine takes the first. The
rules about the hosts' settings come first (a healthy path, then sharing, then the windows,
loss and the rest, then the predictions), the causes outside those settings (`CAUSE_RULES`)
after them. A new rule is one module in advice/rules/ and its line here (a cause outside the
hosts' settings: in `CAUSE_RULES`).
"""

from __future__ import annotations

from tcpwizard.advice.rules import (
    CAUSE_RULES,
    Rule,
    application,
    cached_metrics,
    congestion,
    cross_traffic,
    hosts_allow,
    interface,
    no_sack,
    path_capacity,
    predicted,
    receiver_window,
    seen_from_receiver,
    sender_buffer,
    window_scaling,
)

HOST_RULES: tuple[Rule, ...] = (
    path_capacity.rule,
    cross_traffic.rule,
    window_scaling.rule,
    no_sack.rule,
    receiver_window.rule,
    sender_buffer.rule,
    cached_metrics.rule,
    congestion.rule,
    interface.rule,
    application.rule,
    predicted.rule,
    hosts_allow.rule,
    seen_from_receiver.rule,
)

RULES: tuple[Rule, ...] = (*HOST_RULES, *CAUSE_RULES)
