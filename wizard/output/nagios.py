"""`--format nagios`: one status line plus performance data, for Nagios/Icinga plugins.

Thresholds (`--warning/--critical`):
- a rate, e.g. `100mbit`: the status is raised when the measured throughput (the mode an
  ordinary application gets, kernel autotuning) is BELOW it;
- `gap:P%`, e.g. `gap:50%`: raised when the wizard gap — the share of the tuned throughput
  that is missing now, (tuned - current) / tuned — is AT OR ABOVE P.
The worst of the report's own exit code and the thresholds wins.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TextIO

from tcpwizard.exitcodes import ExitCode
from tcpwizard.outcome import Outcome, Threshold, Thresholds, exit_code
from tcpwizard.output import hostload_out
from tcpwizard.report import Report

__all__ = ["Threshold", "nagios_status", "render"]

STATUS = {0: "OK", 1: "WARNING", 2: "CRITICAL", 3: "UNKNOWN"}


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def _perf(label: str, value: float | None, uom: str = "", warn: str = "", crit: str = "") -> str:
    if value is None:
        return ""
    return f"'{label}'={value:.6g}{uom};{warn};{crit};0;"


def nagios_status(
    report: Mapping[str, Any], warning: str | None = None, critical: str | None = None
) -> tuple[ExitCode, str]:
    verdict = report.get("verdict") or {}
    gap = verdict.get("wizard_gap") or {}
    current, tuned = _num(gap.get("current_mbps")), _num(gap.get("tuned_mbps"))
    gap_share = (tuned - current) / tuned if current is not None and tuned else None
    code = report.get("exit_code")
    # The plugin range: a code outside it (a usage error's 64) shows as UNKNOWN.
    given = ExitCode(code) if code in (0, 1, 2, 3) else ExitCode.UNKNOWN
    thresholds = Thresholds.parse(warning, critical)
    warn_t, crit_t = thresholds.warning, thresholds.critical
    status = exit_code(Outcome(given=given, current_mbps=current, tuned_mbps=tuned), thresholds)

    target = report.get("target")
    host = target.get("host") if isinstance(target, Mapping) else None
    factor = verdict.get("limiting_factor", "unknown")
    unmeasured = [n for n in report.get("notes") or [] if str(n).startswith("not measured:")]
    if report.get("error"):
        summary = str(report["error"])
    elif report.get("measured") is False and unmeasured:
        # A prediction: say why nothing was measured, then what is predicted.
        summary = f"{str(unmeasured[0])[len('not measured: ') :]}; predicted {factor}"
    elif factor == "unknown" and current is None:
        summary = _findings_summary(report)
    else:
        summary = f"{factor}"
        if verdict.get("host_to_fix"):
            summary += f" (fix: {verdict['host_to_fix']})"
        if current is not None:
            summary += f", {current:.1f} Mbit/s"
            if tuned:
                summary += f" of {tuned:.1f} Mbit/s tuned"
    if host:
        summary = f"{host}: {summary}"

    path = report.get("path") or {}
    rtt = path.get("rtt_ms") or {}
    rate_w = f"{warn_t.value / 1e6:g}" if warn_t and warn_t.kind == "rate" else ""
    rate_c = f"{crit_t.value / 1e6:g}" if crit_t and crit_t.kind == "rate" else ""
    perf = [
        _perf("rtt_min", _num(rtt.get("min")), "ms"),
        _perf("rtt_p95", _num(rtt.get("p95")), "ms"),
        _perf("loss", _num(rtt.get("loss_pct")), "%"),
        _perf("capacity_mbps", _num(path.get("capacity_mbps"))),
        _perf("current_mbps", current, "", rate_w, rate_c),
        _perf("tuned_mbps", tuned),
        _perf("gap", gap_share * 100 if gap_share is not None else None, "%"),
    ]
    for m in (report.get("transfer") or {}).get("modes") or []:
        if isinstance(m, Mapping):
            perf.append(
                _perf(
                    f"throughput_{m.get('mode')}_{m.get('direction')}_mbps",
                    _num(m.get("throughput_mbps")),
                )
            )
            perf.extend(_latency_perf(m))
    modes = (report.get("transfer") or {}).get("modes") or []
    perf += [_perf(label, v, unit) for label, v, unit in hostload_out.nagios_perf(modes)]
    part = report.get("host") or {}
    findings = [f for f in part.get("findings") or [] if isinstance(f, Mapping)]
    for sev in ("crit", "warn"):
        perf.append(
            _perf(f"findings_{sev}", float(sum(f.get("severity") == sev for f in findings)))
        )
    perfdata = " ".join(p for p in perf if p)
    line = f"TCPWIZARD {STATUS[int(status)]} - {summary}"
    return status, f"{line} | {perfdata}" if perfdata else line


def _latency_perf(m: Mapping[str, Any]) -> list[str]:
    """RTT under load (median, p90), RPM and the rate plateau of one mode."""
    name = f"{m.get('mode')}_{m.get('direction')}"
    lat = m.get("latency_under_load")
    out = []
    if isinstance(lat, Mapping):
        out += [
            _perf(f"rtt_load_{name}", _num(lat.get("median_ms")), "ms"),
            _perf(f"rtt_load_p90_{name}", _num(lat.get("p90_ms")), "ms"),
            _perf(f"rpm_{name}", _num(lat.get("rpm"))),
        ]
    out.append(_perf(f"plateau_{name}_mbps", _num(m.get("rate_plateau_mbps"))))
    return out


def _findings_summary(report: Mapping[str, Any]) -> str:
    """Audit only: name the checks that failed, worst first."""
    part = report.get("host") or {}
    findings = [f for f in part.get("findings") or [] if isinstance(f, Mapping)]
    crit = [str(f.get("id")) for f in findings if f.get("severity") == "crit"]
    warn = [str(f.get("id")) for f in findings if f.get("severity") == "warn"]
    if not crit and not warn:
        return "TCP settings fit the target path"
    return f"{len(crit)} critical, {len(warn)} warning: {', '.join(crit + warn)}"


def render(
    report: Report, stream: TextIO, warning: str | None = None, critical: str | None = None
) -> None:
    from tcpwizard.output.json_format import report_json

    stream.write(nagios_status(report_json(report), warning, critical)[1] + "\n")
