"""`conns`: the host's own CPU and drops over the observation interval (measure/observe/hostload.py)
name a live connection's limit where they explain it, as they do for `check`'s transfers
(advice/rules/host_cpu.py, advice/rules/host_drops.py).

Only this host is seen, and only machine-wide: per-core CPU and the drops of its
interfaces, qdiscs and input backlog, shared by every connection it carries. So a sending
connection is named `interface` when the host's transmit-side drops are at least half its
own retransmissions, a receiving one when the receive-side drops are at least half the
segments it got out of order (its losses upstream), and either `host-cpu` when a core was
saturated, mostly in softirq, while the connection was not at a window or buffer limit.
"""

from __future__ import annotations

import dataclasses

from tcpwizard.advice.conns import ConnDiagnosis
from tcpwizard.advice.model import Verdict, WizardGap
from tcpwizard.advice.rules.host_cpu import SATURATED, SOFTIRQ_SHARE, cpu_fixes
from tcpwizard.advice.rules.host_drops import HOST_SHARE, drop_fixes, lost_by
from tcpwizard.measure.observe.conns import ConnObservation
from tcpwizard.measure.observe.hostload import HostLoad

# Verdicts the host's own evidence may replace: the ones that blame the path or nothing. A
# policer is inferred from bursty losses; drops counted inside this host explain them directly.
REPLACEABLE = ("congestion", "path-capacity", "policer", "unknown")


def host_conn_verdict(
    diag: ConnDiagnosis, obs: ConnObservation, load: HostLoad | None
) -> ConnDiagnosis:
    v = diag.verdict
    if load is None or v is None or v.limiting_factor not in REPLACEABLE:
        return diag
    side = "sender" if obs.sending else "receiver"
    if load.drops is not None:
        lost = lost_by(load.drops, side)
        losses = obs.retransmits if obs.sending else obs.ooo_packets
        if lost > 0 and lost >= HOST_SHARE * losses:
            where = f" on {load.drops.interface}" if load.drops.interface else ""
            return dataclasses.replace(
                diag,
                verdict=Verdict(
                    "interface",
                    0.7,
                    "local",
                    f"this host dropped {lost} packets inside itself{where} while the "
                    f"connection ran ({losses} "
                    + ("retransmitted" if obs.sending else "received out of order")
                    + "): its rings or queues, not the path, lose the segments.",
                    (*v.evidence, f"host drops during the interval: {lost}"),
                    WizardGap(obs.rate_mbps, None, False),
                ),
                fixes=drop_fixes("local", load.drops, side),
            )
    core = load.busiest_core
    if core is not None and core.busy >= SATURATED and core.softirq >= SOFTIRQ_SHARE * core.busy:
        return dataclasses.replace(
            diag,
            verdict=Verdict(
                "host-cpu",
                0.6,
                "local",
                f"core {core.cpu} of this host was busy {core.busy:.0%} ({core.softirq:.0%} "
                "softirq) while the connection ran: the kernel's packet work on one core "
                "holds it.",
                (*v.evidence, f"core {core.cpu} busy {core.busy:.0%}, softirq {core.softirq:.0%}"),
                WizardGap(obs.rate_mbps, None, False),
            ),
            fixes=cpu_fixes("local", load),
        )
    return diag
