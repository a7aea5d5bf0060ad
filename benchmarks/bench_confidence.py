"""`python -m benchmarks confidence ROWS.jsonl... [--write]`: the calibration table of the
verdicts' confidence (advice/calibration.py) from scenario-matrix rows, with what it is
worth: the expected calibration error of the rules' own confidence against that of the
calibrated one, each row calibrated by a table built without it (leave-one-out: a table is
never judged on the rows it was fitted to), at several prior weights.

Rows are what `python -m benchmarks matrix` appends (OUT/matrix.jsonl,
docs/bench-matrix-runs.jsonl); the latest row per id counts. Only rows measured with the
rules as they are now belong in the table: pass the files of runs made since the last
change to a rule.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.matrix_report import Bin, calibration, ece, right, scored
from tcpwizard.advice import calibration as cal
from tcpwizard.context import Context
from tcpwizard.exitcodes import ExitCode, UsageError

PRIORS = (2.0, cal.PRIOR_RUNS, 8.0)
# The checkout's table (the package's own path may be an installed or linked copy).
REPO_TABLE = Path(__file__).resolve().parents[1] / "advice" / cal.TABLE.name


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("rows", nargs="+", type=Path, metavar="ROWS", help="matrix.jsonl files")
    p.add_argument("--write", action="store_true", help=f"write the table to {cal.TABLE.name}")
    p.add_argument("--table", type=Path, default=REPO_TABLE, help="where --write writes it")


def load(paths: Sequence[Path]) -> list[dict[str, Any]]:
    rows: dict[str, dict[str, Any]] = {}
    for path in paths:
        try:
            text = path.read_text()
        except OSError as exc:
            raise UsageError(f"confidence: cannot read {path}: {exc.strerror}") from None
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                rows[str(row["id"])] = row
            except (ValueError, KeyError, TypeError):
                raise UsageError(f"confidence: {path} line {n} is not a matrix row") from None
    return scored(list(rows.values()))


def rule_confidence(row: dict[str, Any]) -> float:
    v = row["verdict"]
    return float(v.get("rule_confidence", v["confidence"]))


def triples(rows: Sequence[dict[str, Any]]) -> list[tuple[str, float, bool]]:
    return [(r["verdict"]["factor"], rule_confidence(r), right(r)) for r in rows]


def _with_confidence(row: dict[str, Any], c: float) -> dict[str, Any]:
    return {**row, "verdict": {**row["verdict"], "confidence": c}}


def leave_one_out(rows: Sequence[dict[str, Any]], prior: float) -> list[dict[str, Any]]:
    """Each row with the confidence a table built from the other rows gives it."""
    all_t = triples(rows)
    out = []
    for i, row in enumerate(rows):
        table = cal.build(all_t[:i] + all_t[i + 1 :])
        c = table.confidence(row["verdict"]["factor"], rule_confidence(row), prior)
        out.append(_with_confidence(row, round(c, 2)))  # as a report gives it
    return out


def _ece(rows: Sequence[dict[str, Any]]) -> str:
    e = ece(calibration(rows))
    return "-" if e is None else f"{e:.3f}"


def _bins(title: str, bins: Sequence[Bin]) -> list[str]:
    out = [
        f"{title}:",
        "",
        "| confidence | runs | mean confidence | right |",
        "|---|---:|---:|---:|",
    ]
    out += [f"| {b.lo:.1f}-{b.hi:.1f} | {b.n} | {b.mean_confidence:.2f} | {b.accuracy:.0%} |"
            for b in bins]  # fmt: skip
    return [*out, ""]


def report(rows: Sequence[dict[str, Any]], table: cal.Calibration) -> str:
    raw = [_with_confidence(r, rule_confidence(r)) for r in rows]
    lines = [
        f"{len(rows)} scored runs. Per factor named: runs, right (factor and host), the rules' "
        f"mean confidence, the measured accuracy (Beta posterior, the rule's mean as "
        f"{cal.PRIOR_RUNS:g} runs) and the shift it applies in log-odds.",
        "",
        "| factor named | runs | right | rules' mean confidence | accuracy | shift |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for f, r in sorted(table.records.items()):
        acc = r.accuracy()
        lines.append(
            f"| {f} | {r.runs} | {r.right} | {r.mean_confidence:.2f} | {acc:.2f} | "
            f"{cal.shift(acc, r.mean_confidence):+.2f} |"
        )
    lines += ["", "Expected calibration error (confidence deciles, docs/bench-matrix.md):", ""]
    lines += [f"- the rules' own confidence: **{_ece(raw)}**"]
    for prior in PRIORS:
        lines.append(
            f"- calibrated, leave-one-out, prior {prior:g} runs: "
            f"**{_ece(leave_one_out(rows, prior))}**"
        )
    lines.append("")
    lines += _bins("The rules' own confidence", calibration(raw))
    lines += _bins(
        f"Calibrated (leave-one-out, prior {cal.PRIOR_RUNS:g})",
        calibration(leave_one_out(rows, cal.PRIOR_RUNS)),
    )
    return "\n".join(lines)


def run(args: argparse.Namespace, ctx: Context) -> int:
    rows = load(args.rows)
    if not rows:
        raise UsageError("confidence: no scored rows in those files")
    seeds = sorted({int(r["seed"]) for r in rows})
    when = sorted(str(r.get("when", "")) for r in rows)
    seed_list = ", ".join(map(str, seeds))
    measured = f"{len(rows)} matrix runs, seeds {seed_list}, {when[0]} - {when[-1]}"
    table = cal.build(triples(rows), measured)
    print(report(rows, table), file=ctx.stdout)
    if args.write:
        args.table.write_text(json.dumps(table.to_json(), indent=2) + "\n")
        ctx.progress(f"wrote {args.table}")
    return int(ExitCode.OK)
