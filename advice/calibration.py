"""A verdict's confidence as the scenario matrix measured it.

Each rule states a confidence from its own evidence (advice/rules/): how sure the evidence
makes it, relative to the rule's other cases. What that number is worth is
measured: the scenario matrix (`python -m benchmarks matrix`, docs/bench-matrix.md) runs
checks on lab paths whose cause is known, and `python -m benchmarks calibrate` turns its
rows into the table this module reads (advice/calibration.json): per limiting factor named,
how many verdicts named it and how many of those were right (factor and host), apart for
a rule's weak claims, those on one line of evidence and those on two (key()). The matrix
runs `check` against serve with transfers: a verdict made without them (no peer audit, no
transfer) is not weighed.

The confidence a report gives is the rule's own, shifted in log-odds by the difference
between the factor's measured accuracy and the rules' mean stated confidence on those runs:
the rule keeps its ordering of situations, the factor's verdicts on average say what they
are worth, and a shift never pushes a confidence past 0 or 1 (a multiplicative scale
would). The measured accuracy is a Beta posterior mean: the rule's own mean confidence
counts as PRIOR_RUNS runs, so a factor seen in few runs keeps most of its rule's value, and
one seen in many takes the matrix's. Factors the table does not hold, and `unknown`, keep
their rule's value.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

TABLE = Path(__file__).with_name("calibration.json")
# Three evidence situations per factor, each weighed by its own runs: below the engine's
# WEAK (advice/diagnose.py) a rule names its factor only when nothing else explains the
# rate; below TWO_LINES it rests on one line of evidence (a window law, a loss bound: the
# rules say 0.45-0.6); at or above it, on two that agree (the law and the rate at its bound,
# the bound and losses that go on, a counter and the law: 0.7 and more).
WEAK = 0.4  # the engine's (advice/diagnose.py reads it from here)
TWO_LINES = 0.7  # the rules' two-line confidences start here (above)


def key(factor: str, rule: float) -> str:
    """The table's row for a verdict naming `factor` with its rule's confidence `rule`."""
    if rule < WEAK:
        return f"{factor} (weak)"
    return f"{factor} (one line)" if rule < TWO_LINES else factor


# The rule's own stated confidence weighs as this many matrix runs. Four: one miss in a
# factor's first run moves a 0.9 rule to 0.72, not to 0; the bench prints the leave-one-out
# calibration error at 2, 4 and 8 beside the table (docs/bench-matrix.md).
PRIOR_RUNS = 4.0
FLOOR, CEILING = 0.05, 0.99  # a named factor is never certain either way


def _logit(p: float) -> float:
    p = min(CEILING, max(FLOOR, p))
    return math.log(p / (1.0 - p))


def shift(accuracy: float, mean_confidence: float) -> float:
    """The log-odds a factor's verdicts move by."""
    return _logit(accuracy) - _logit(mean_confidence)


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


@dataclass(frozen=True)
class FactorRecord:
    """The matrix's verdicts naming one factor."""

    factor: str
    runs: int
    right: int
    mean_confidence: float  # the rules' own confidence, averaged over those runs

    def accuracy(self, prior_runs: float = PRIOR_RUNS) -> float:
        m = self.mean_confidence
        return (self.right + prior_runs * m) / (self.runs + prior_runs)

    def to_json(self) -> dict[str, Any]:
        return {
            "runs": self.runs,
            "right": self.right,
            "mean_confidence": round(self.mean_confidence, 4),
        }


@dataclass(frozen=True)
class Calibration:
    records: Mapping[str, FactorRecord]
    measured: str = ""  # where the rows came from (seeds, when)

    def record(self, factor: str, rule: float) -> FactorRecord | None:
        return self.records.get(key(factor, rule))

    def confidence(self, factor: str, rule: float, prior_runs: float = PRIOR_RUNS) -> float:
        """The reported confidence of a verdict naming `factor` whose rule said `rule`."""
        r = self.record(factor, rule)
        if r is None or rule <= 0 or r.mean_confidence <= 0:
            return rule
        moved = _logit(rule) + shift(r.accuracy(prior_runs), r.mean_confidence)
        return min(CEILING, max(FLOOR, _sigmoid(moved)))

    def to_json(self) -> dict[str, Any]:
        return {
            "measured": self.measured,
            "prior_runs": PRIOR_RUNS,
            "factors": {f: r.to_json() for f, r in sorted(self.records.items())},
        }


def build(rows: Iterable[tuple[str, float, bool]], measured: str = "") -> Calibration:
    """The table from (factor named, the rule's confidence, right) per matrix run."""
    groups: dict[str, list[tuple[float, bool]]] = {}
    for factor, conf, ok in rows:
        if factor == "unknown":
            continue
        groups.setdefault(key(factor, conf), []).append((conf, ok))
    records = {
        f: FactorRecord(f, len(g), sum(ok for _, ok in g), sum(c for c, _ in g) / len(g))
        for f, g in groups.items()
    }
    return Calibration(records, measured)


class CalibrationError(ValueError):
    """The table is not what `python -m benchmarks calibrate` writes."""


def parse(doc: object) -> Calibration:
    if not isinstance(doc, dict) or not isinstance(doc.get("factors"), dict):
        raise CalibrationError("a calibration table has a 'factors' object")
    records = {}
    for f, r in doc["factors"].items():
        try:
            records[f] = FactorRecord(
                str(f), int(r["runs"]), int(r["right"]), float(r["mean_confidence"])
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise CalibrationError(f"calibration table: factor {f!r}: {exc}") from None
    return Calibration(records, str(doc.get("measured", "")))


@cache
def table(path: Path = TABLE) -> Calibration:
    """The table the package ships; an absent one calibrates nothing (rules speak alone)."""
    try:
        return parse(json.loads(path.read_text()))
    except FileNotFoundError:
        return Calibration({})
