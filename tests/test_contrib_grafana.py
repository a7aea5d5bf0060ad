"""contrib/grafana/tcpwizard.json: a dashboard Grafana can import, whose every query reads
series the exporter really exposes or recording rules contrib/prometheus defines. (The lab
test tests/test_fleet_lab.py runs every query against a real Prometheus as well.)"""

from __future__ import annotations

import re

import yaml

from tests.exporter_names import (
    METRIC_RE,
    RULES,
    dashboard,
    dashboard_queries,
    exported_series,
)

RECORDED_RE = re.compile(r"\btcpwizard:[a-z0-9_:]+")
MATCHER_RE = re.compile(r"([a-z_]+)\s*(?:=~|!=|!~|=)\s*\"")
LEGEND_RE = re.compile(r"\{\{\s*([a-z_]+)\s*\}\}")


def _recorded() -> dict[str, str]:
    doc = yaml.safe_load(RULES.read_text())
    return {r["record"]: r["expr"] for g in doc["groups"] for r in g["rules"] if "record" in r}


def _bases(recorded_name: str, recorded: dict[str, str]) -> set[str]:
    """The exported series a recording rule reads, through other recording rules."""
    expr = recorded[recorded_name]
    out = set(METRIC_RE.findall(expr))
    for inner in set(RECORDED_RE.findall(expr)) - {recorded_name}:
        out |= _bases(inner, recorded)
    return out


def test_dashboard_is_importable() -> None:
    d = dashboard()
    assert d["uid"] and d["title"] and isinstance(d["schemaVersion"], int)
    ids = [p["id"] for p in d["panels"]]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    for p in d["panels"]:
        assert {"x", "y", "w", "h"} <= set(p["gridPos"]), p["title"]
        assert p["targets"], f"panel {p['title']!r} has no query"
        refs = [t["refId"] for t in p["targets"]]
        assert len(refs) == len(set(refs))
    names = {v["name"] for v in d["templating"]["list"]}
    assert names == {"datasource", "instance", "target"}
    used = set(re.findall(r"\$([a-z]+)", str(d["panels"])))
    assert used - {"__range", "__rate_interval"} <= names


def test_every_query_reads_exported_or_recorded_series() -> None:
    exposed = exported_series()
    recorded = _recorded()
    queries = dashboard_queries()
    assert len(queries) >= 10
    titles = " ".join(t for t, _ in queries).lower()
    for topic in ("throughput now vs tuned", "verdict over time", "rtt", "capacity"):
        assert topic in titles, topic
    for title, expr in queries:
        names = set(METRIC_RE.findall(expr)) | set(RECORDED_RE.findall(expr))
        assert names or "up{" in expr, f"{title}: {expr} reads no tcpwizard series"
        for name in METRIC_RE.findall(expr):
            assert name in exposed, f"{title}: {name} is not exposed by the exporter"
        for name in RECORDED_RE.findall(expr):
            assert name in recorded, f"{title}: {name} is not a recording rule"
        # Labels a query filters on must exist on the series it reads.
        labels: set[str] = {"instance", "job"}
        for name in METRIC_RE.findall(expr):
            labels |= exposed[name]
        for name in RECORDED_RE.findall(expr):
            for base in _bases(name, recorded):
                labels |= exposed[base]
        for label in MATCHER_RE.findall(expr):
            assert label in labels, f"{title}: no label {label!r} on {names}"


def test_legends_name_labels_the_series_carry() -> None:
    exposed = exported_series()
    all_labels = set().union(*exposed.values()) | {"instance", "job"}
    for p in dashboard()["panels"]:
        for t in p["targets"]:
            for label in LEGEND_RE.findall(t.get("legendFormat", "")):
                assert label in all_labels, f"{p['title']}: legend uses {label!r}"
