"""Prometheus metric families from a JSON report (the versioned contract, so the exporter, the
textfile format and the history all read the same fields)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from tcpwizard.output import hostload_out

PREFIX = "tcpwizard"
SEVERITIES = ("ok", "info", "warn", "crit")


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _gauge(name: str, doc: str, labels: list[str], unit: str = "") -> GaugeMetricFamily:
    return GaugeMetricFamily(f"{PREFIX}_{name}", doc, labels=labels, unit=unit)


def report_families(
    report: Mapping[str, Any], base: Mapping[str, str], up: bool, duration_s: float | None = None
) -> list[Metric]:
    """Every family for one target. `base` labels (target=...) go on every series."""
    keys = list(base)
    vals = list(base.values())
    fams: list[Metric] = []

    def scalar(name: str, doc: str, value: float | None) -> None:
        """A family of one series, left out when the report lacks its value."""
        if value is not None:
            g = _gauge(name, doc, keys)
            g.add_metric(vals, value)
            fams.append(g)

    scalar("up", "1 if the last check of this target completed", 1.0 if up else 0.0)
    scalar(
        "exit_code",
        "Nagios-style result of the last check (0 ok .. 3 unknown)",
        _num(report.get("exit_code")),
    )
    scalar("check_duration_seconds", "how long the last check took", duration_s)

    path = report.get("path") or {}
    rtt = path.get("rtt_ms") or {}
    g = _gauge("rtt_seconds", "round-trip time statistics of the path", [*keys, "stat"])
    for stat in ("min", "p50", "p95", "mean", "mdev", "max"):
        v = _num(rtt.get(stat))
        if v is not None:
            g.add_metric([*vals, stat], v / 1e3)
    if g.samples:
        fams.append(g)
    loss = _num(rtt.get("loss_pct"))
    scalar("probe_loss_ratio", "share of probes lost", None if loss is None else loss / 100)
    capacity = _num(path.get("capacity_mbps"))
    scalar(
        "capacity_bits_per_second",
        "estimated bottleneck capacity",
        None if capacity is None else capacity * 1e6,
    )
    scalar(
        "bdp_bytes",
        "bandwidth-delay product (capacity x min RTT)",
        _num(path.get("bdp_bytes")),
    )

    modes = (report.get("transfer") or {}).get("modes") or []
    tput = _gauge(
        "throughput_bits_per_second", "test transfer goodput", [*keys, "mode", "direction"]
    )
    buf = _gauge("max_buffer_bytes", "largest socket buffer used", [*keys, "mode", "direction"])
    rtx = _gauge("retransmits", "segments retransmitted in the test", [*keys, "mode", "direction"])
    for m in modes:
        if not isinstance(m, Mapping):
            continue
        lab = [*vals, str(m.get("mode", "")), str(m.get("direction", ""))]
        for fam, field, scale in (
            (tput, "throughput_mbps", 1e6),
            (buf, "max_buffer_bytes", 1.0),
            (rtx, "retransmits", 1.0),
        ):
            v = _num(m.get(field))
            if v is not None:
                fam.add_metric(lab, v * scale)
    fams.extend(f for f in (tput, buf, rtx) if f.samples)
    fams.extend(_latency_families(modes, keys, vals))
    fams.extend(hostload_out.metric_families(modes, PREFIX, keys, vals))

    verdict = report.get("verdict") or {}
    factor = verdict.get("limiting_factor")
    if isinstance(factor, str):
        g = _gauge(
            "verdict",
            "the limiting factor of the last check (value 1)",
            [*keys, "limiting_factor", "host_to_fix"],
        )
        g.add_metric([*vals, factor, str(verdict.get("host_to_fix") or "")], 1.0)
        fams.append(g)
        scalar(
            "verdict_confidence",
            "confidence of the verdict, 0..1",
            _num(verdict.get("confidence")),
        )
    gap = verdict.get("wizard_gap") or {}
    g = _gauge("wizard_gap_bits_per_second", "throughput now vs tuned", [*keys, "kind"])
    for kind in ("current", "tuned"):
        v = _num(gap.get(f"{kind}_mbps"))
        if v is not None:
            g.add_metric([*vals, kind], v * 1e6)
    if g.samples:
        fams.append(g)

    fams.extend(tampering_families(report, keys, vals))
    for side in ("host", "peer"):
        part = report.get(side)
        if isinstance(part, Mapping):
            fams.extend(_audit_families(part, side, keys, vals))
    return fams


def _latency_families(modes: list[Any], keys: list[str], vals: list[str]) -> list[Metric]:
    """RTT under load (median, p90), responsiveness (RPM) and the rate plateau per mode."""
    labels = [*keys, "mode", "direction"]
    rtt = _gauge("rtt_under_load_seconds", "sender's RTT during the transfer", [*labels, "stat"])
    rpm = _gauge("responsiveness_rpm", "round trips per minute under load (60 / RTT)", labels)
    plateau = _gauge(
        "rate_plateau_bits_per_second", "IP rate held once up to speed (a policer's)", labels
    )
    for m in modes:
        if not isinstance(m, Mapping):
            continue
        lab = [*vals, str(m.get("mode", "")), str(m.get("direction", ""))]
        lat = m.get("latency_under_load")
        if isinstance(lat, Mapping):
            for stat, field in (("median", "median_ms"), ("p90", "p90_ms"), ("idle", "idle_ms")):
                v = _num(lat.get(field))
                if v is not None:
                    rtt.add_metric([*lab, stat], v / 1e3)
            v = _num(lat.get("rpm"))
            if v is not None:
                rpm.add_metric(lab, v)
        v = _num(m.get("rate_plateau_mbps"))
        if v is not None:
            plateau.add_metric(lab, v * 1e6)
    return [f for f in (rtt, rpm, plateau) if f.samples]


def tampering_families(report: Mapping[str, Any], keys: list[str], vals: list[str]) -> list[Metric]:
    """TCP options a device on the path rewrote in the handshake (docs/middlebox.md)."""
    hs = report.get("peer_handshake") or {}
    rows = hs.get("tampering") if isinstance(hs, Mapping) else None
    if not isinstance(hs, Mapping) or not isinstance(hs.get("received_syn"), Mapping):
        return []
    g = _gauge(
        "syn_option_rewritten",
        "1 if a device on the path stripped or clamped this TCP option of the handshake",
        [*keys, "option", "direction"],
    )
    seen = {
        (str(t.get("option")), str(t.get("direction")))
        for t in rows or ()
        if isinstance(t, Mapping)
    }
    for option in ("window scaling", "SACK", "timestamps", "MSS"):
        for direction in ("local->peer", "peer->local"):
            g.add_metric([*vals, option, direction], 1.0 if (option, direction) in seen else 0.0)
    return [g]


def _audit_families(
    part: Mapping[str, Any], side: str, keys: list[str], vals: list[str]
) -> list[Metric]:
    findings = [f for f in part.get("findings") or [] if isinstance(f, Mapping)]
    count = _gauge("findings", "audit findings by severity", [*keys, "side", "severity"])
    for sev in SEVERITIES:
        n = sum(1 for f in findings if f.get("severity") == sev)
        count.add_metric([*vals, side, sev], float(n))
    each = _gauge(
        "finding_severity",
        "severity of each audit check (0 ok, 1 info, 2 warn, 3 crit)",
        [*keys, "side", "check"],
    )
    for f in findings:
        if f.get("severity") in SEVERITIES:
            each.add_metric([*vals, side, str(f.get("id"))], SEVERITIES.index(f["severity"]))
    ceil = _gauge(
        "ceiling_bits_per_second",
        "largest throughput one autotuned connection of this host reaches at a given RTT",
        [*keys, "side", "direction", "rtt_ms"],
    )
    for c in part.get("ceilings") or []:
        if not isinstance(c, Mapping):
            continue
        for direction in ("receive", "send"):
            v = _num(c.get(f"{direction}_mbps"))
            rtt = _num(c.get("rtt_ms"))
            if v is not None and rtt is not None:
                ceil.add_metric([*vals, side, direction, f"{rtt:g}"], v * 1e6)
    return [f for f in (count, each, ceil) if f.samples]


class ReportCollector(Collector):
    """Yields the families of a fixed set of reports (one registry per rendering)."""

    def __init__(self, families: list[Metric]) -> None:
        self._families = families

    def collect(self) -> Iterator[Metric]:
        # One family per name: merge the same family across targets.
        merged: dict[str, Metric] = {}
        for fam in self._families:
            if fam.name in merged:
                merged[fam.name].samples.extend(fam.samples)
            else:
                merged[fam.name] = fam
        yield from merged.values()
