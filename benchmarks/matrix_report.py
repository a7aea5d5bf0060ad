"""The scenario matrix's tables: confusion (truth x verdict, factor and host), accuracy per
cause and per rate and RTT band, calibration (accuracy per confidence decile, expected
calibration error) and every wrong case with its id. Pure arithmetic over the rows the bench
appends (one JSON object per scenario), so it is tested without a lab.

A row is right when both the limiting factor and the host to fix are the truth's. Rows whose
truth is `ambiguous` (the drawing gave up, matrix_draw.MAX_DRAWS) or whose check failed are
listed and left out of the accuracy (errors are counted and shown).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from benchmarks.matrix_draw import ALL_CAUSES, AMBIGUOUS

# The envelope's rate bands, up to the delay line's ceiling (matrix_draw.RATE_MAX_BPS): the
# gigabit-and-above draws have a band of their own, not the last one's label.
RATE_BANDS_MBPS = ((5, 20), (20, 100), (100, 400), (400, 1000), (1000, 5000))
RTT_BANDS_MS = ((2, 10), (10, 50), (50, 150), (150, 400))
DECILES = 10


def right(row: dict[str, Any]) -> bool:
    return bool(
        row["verdict"]["factor"] == row["truth"]["factor"]
        and row["verdict"]["host"] == row["truth"]["host"]
    )


def scored(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows with a truth and a verdict."""
    return [
        r for r in rows if r["truth"]["factor"] != AMBIGUOUS and r["verdict"]["factor"] != "error"
    ]


@dataclass(frozen=True)
class Bin:
    lo: float
    hi: float
    n: int
    mean_confidence: float
    accuracy: float


def calibration(rows: Sequence[dict[str, Any]], bins: int = DECILES) -> list[Bin]:
    """Rows by confidence decile [k/10, (k+1)/10) (1.0 in the last): mean confidence and the
    share right in each non-empty one."""
    groups: dict[int, list[dict[str, Any]]] = {}
    for r in rows:
        c = float(r["verdict"]["confidence"])
        groups.setdefault(min(bins - 1, max(0, int(c * bins))), []).append(r)
    out = []
    for k in sorted(groups):
        g = groups[k]
        conf = sum(float(r["verdict"]["confidence"]) for r in g) / len(g)
        acc = sum(right(r) for r in g) / len(g)
        out.append(Bin(k / bins, (k + 1) / bins, len(g), conf, acc))
    return out


def ece(bins: Sequence[Bin]) -> float | None:
    """Expected calibration error: sum over bins of n_b / N x |accuracy_b - confidence_b|."""
    total = sum(b.n for b in bins)
    if not total:
        return None
    return sum(b.n / total * abs(b.accuracy - b.mean_confidence) for b in bins)


def confusion(rows: Sequence[dict[str, Any]], key: str) -> dict[str, Counter[str]]:
    """truth[key] -> Counter of verdict[key] (key: 'factor' or 'host'; None shows as '-')."""
    out: dict[str, Counter[str]] = {}
    for r in rows:
        t = r["truth"][key] or "-"
        out.setdefault(t, Counter())[r["verdict"][key] or "-"] += 1
    return out


def accuracy_by(rows: Sequence[dict[str, Any]], label: Any) -> dict[str, tuple[int, int]]:
    """label(row) -> (right, total)."""
    out: dict[str, tuple[int, int]] = {}
    for r in rows:
        k = label(r)
        ok, n = out.get(k, (0, 0))
        out[k] = (ok + right(r), n + 1)
    return out


def band(value: float, bands: Sequence[tuple[float, float]], unit: str) -> str:
    for lo, hi in bands:
        if value < hi:
            return f"{lo:g}-{hi:g} {unit}"
    lo, hi = bands[-1]
    return f"{lo:g}-{hi:g} {unit}"


def rate_band(row: dict[str, Any]) -> str:
    return band(row["scenario"]["rate_bps"] / 1e6, RATE_BANDS_MBPS, "Mbit/s")


def rtt_band(row: dict[str, Any]) -> str:
    return band(row["scenario"]["rtt_s"] * 1e3, RTT_BANDS_MS, "ms")


def _pct(ok: int, n: int) -> str:
    return f"{ok}/{n} ({ok / n:.0%})" if n else "-"


def _matrix_table(conf: dict[str, Counter[str]]) -> list[str]:
    cols = sorted({c for row in conf.values() for c in row})
    lines = [
        "| truth \\ verdict | " + " | ".join(cols) + " |",
        "|---|" + "---|" * len(cols),
    ]
    for t in sorted(conf):
        lines.append(f"| {t} | " + " | ".join(str(conf[t].get(c, "")) for c in cols) + " |")
    return lines


def _accuracy_table(title: str, acc: dict[str, tuple[int, int]], order: Sequence[str]) -> list[str]:
    lines = [f"| {title} | right |", "|---|---|"]
    for k in [*[o for o in order if o in acc], *sorted(set(acc) - set(order))]:
        lines.append(f"| {k} | {_pct(*acc[k])} |")
    return lines


def _band_names(bands: Sequence[tuple[float, float]], unit: str) -> list[str]:
    return [f"{lo:g}-{hi:g} {unit}" for lo, hi in bands]


def summary(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    ok = scored(rows)
    bins = calibration(ok)
    return {
        "scenarios": len(rows),
        "scored": len(ok),
        "right": sum(right(r) for r in ok),
        "errors": [r["id"] for r in rows if r["verdict"]["factor"] == "error"],
        "ambiguous": [r["id"] for r in rows if r["truth"]["factor"] == AMBIGUOUS],
        "seeds": sorted({r["seed"] for r in rows}),
        "by_cause": accuracy_by(ok, lambda r: r["scenario"]["cause"]),
        "by_rate": accuracy_by(ok, rate_band),
        "by_rtt": accuracy_by(ok, rtt_band),
        "by_family": accuracy_by(ok, lambda r: "IPv6" if r["scenario"].get("ipv6") else "IPv4"),
        "factor_confusion": {k: dict(v) for k, v in confusion(ok, "factor").items()},
        "host_confusion": {k: dict(v) for k, v in confusion(ok, "host").items()},
        "calibration": [b.__dict__ for b in bins],
        "ece": ece(bins),
        "healthy_host_fixes": [
            r["id"]
            for r in ok
            if r["truth"]["factor"] == "path-capacity"
            and r["verdict"]["host"] in ("local", "peer", "both")
        ],
        "wrong": [r["id"] for r in ok if not right(r)],
    }


def markdown(rows: Sequence[dict[str, Any]]) -> str:
    s = summary(rows)
    ok = scored(rows)
    n = s["scored"]
    lines = [
        f"Scored {n} of {s['scenarios']} scenarios (seeds {', '.join(map(str, s['seeds']))}): "
        f"factor and host right in **{_pct(s['right'], n)}**; expected calibration error "
        + ("-" if s["ece"] is None else f"**{s['ece']:.3f}**")
        + f"; check errors {len(s['errors'])}; ambiguous truths {len(s['ambiguous'])}; "
        f"a host fix advised on a path-capacity truth: {len(s['healthy_host_fixes'])}.",
        "",
        "### Limiting factor: truth x verdict",
        "",
        *_matrix_table(confusion(ok, "factor")),
        "",
        "### Host to fix: truth x verdict",
        "",
        *_matrix_table(confusion(ok, "host")),
        "",
        "### Accuracy (factor and host) per cause, rate band, RTT band and address family",
        "",
        *_accuracy_table("cause", s["by_cause"], ALL_CAUSES),
        "",
        *_accuracy_table("rate", s["by_rate"], _band_names(RATE_BANDS_MBPS, "Mbit/s")),
        "",
        *_accuracy_table("RTT", s["by_rtt"], _band_names(RTT_BANDS_MS, "ms")),
        "",
        *_accuracy_table("family", s["by_family"], ("IPv4", "IPv6")),
        "",
        "### Calibration: accuracy per confidence decile",
        "",
        "| confidence | scenarios | mean confidence | right |",
        "|---|---|---|---|",
        *[
            f"| {b.lo:.1f}-{b.hi:.1f} | {b.n} | {b.mean_confidence:.2f} | {b.accuracy:.0%} |"
            for b in calibration(ok)
        ],
        "",
        "### Every wrong case (`python -m benchmarks matrix --replay ID`)",
        "",
        "| id | scenario | truth | verdict | confidence | s |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        if r in ok and right(r):
            continue
        v, t = r["verdict"], r["truth"]
        lines.append(
            f"| {r['id']} | {r['scenario']['cause']}: {r['describe']} | "
            f"{t['factor']} ({t['host'] or '-'}) | {v['factor']} ({v['host'] or '-'}) | "
            f"{v.get('confidence', 0):.2f} | {r.get('seconds', '-')} |"
        )
    return "\n".join(lines)
