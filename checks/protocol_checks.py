"""TCP options that must be on for long fat networks (Weigle & Feng §5: 'Ensure TCP window
scaling, timestamps, SACK options are enabled')."""

from __future__ import annotations

from tcpwizard.checks.base import SECTION5, AuditEnv, Check
from tcpwizard.checks.model import Finding, Severity
from tcpwizard.checks.window import MAX_UNSCALED_WINDOW, mbps
from tcpwizard.units import format_rate

GUIDE = f"{SECTION5}: ensure TCP window scaling, timestamps and SACK are enabled"


class _OnOffCheck(Check):
    guideline = GUIDE
    off_severity: Severity = "warn"

    def consequence(self, env: AuditEnv) -> str:
        raise NotImplementedError

    def evaluate(self, env: AuditEnv) -> Finding:
        key = self.keys[0]
        value = env.integer(key)
        if value != 0:
            return self.finding("ok", f"{value} (on)", "1 (on)", f"{self.title} is on.")
        return self.finding(
            self.off_severity,
            "0 (off)",
            "1 (on)",
            f"{self.title} is off: {self.consequence(env)}",
            (self.fix(key, "1"),),
        )


class WindowScaling(_OnOffCheck):
    id = "window_scaling"
    answers = ("window-scaling",)
    title = "TCP window scaling"
    keys = ("net.ipv4.tcp_window_scaling",)
    why = "Without the RFC 7323 window scale option no TCP window can exceed 64 KB."
    severity_rule = "crit when off"
    off_severity = "crit"

    def consequence(self, env: AuditEnv) -> str:
        rtt = env.target.rtt_s
        cap = mbps(MAX_UNSCALED_WINDOW, rtt)
        return (
            f"every connection of this host is limited to a 64 KB window, "
            f"{format_rate(cap * 1e6)} at {rtt * 1000:g} ms RTT, whatever the buffers."
        )


class Sack(_OnOffCheck):
    id = "sack"
    answers = ("congestion",)
    title = "Selective acknowledgements (SACK)"
    keys = ("net.ipv4.tcp_sack",)
    why = "With large windows several segments are lost at once; SACK repairs them in one RTT."
    severity_rule = "warn when off"

    def consequence(self, env: AuditEnv) -> str:
        return "a window with several losses takes one RTT per lost segment to repair."


class Timestamps(_OnOffCheck):
    id = "timestamps"
    title = "TCP timestamps"
    keys = ("net.ipv4.tcp_timestamps",)
    why = (
        "Timestamps give an RTT sample per ACK and protect against wrapped sequence "
        "numbers (PAWS), both needed at high rates with big windows."
    )
    severity_rule = "warn when off"

    def consequence(self, env: AuditEnv) -> str:
        return "RTT estimates get coarse and sequence numbers can wrap unprotected at high rates."


CHECKS: tuple[Check, ...] = (WindowScaling(), Sack(), Timestamps())
