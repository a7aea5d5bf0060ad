"""`python -m benchmarks rejudge DIR... [--list]`: every stored report of scenario-matrix runs
judged again by the rules as they are now, against each scenario's truth: how many were
right when measured, how many are right now, and which turned either way.

DIR is a matrix run's `--out` folder: its matrix.jsonl (the truth of each scenario) and
reports/ID.json (the check's report). A rule change is weighed here on every stored report
before a new matrix run measures it (benchmarks/report_evidence.py says what a report
cannot bring back). Needs no root and no lab.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.bench_confidence import load
from benchmarks.matrix_report import right
from benchmarks.report_evidence import ReportError, evidence
from tcpwizard.advice.diagnose import diagnose
from tcpwizard.context import Context
from tcpwizard.exitcodes import ExitCode, UsageError


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("dirs", nargs="+", type=Path, metavar="DIR", help="matrix --out folders")
    p.add_argument("--list", action="store_true", help="list every row wrong now")
    p.add_argument("--rows", type=Path, metavar="FILE",
                   help="write the rows as judged now (for `confidence FILE`)")  # fmt: skip


def rejudged(row: dict[str, Any], report: dict[str, Any]) -> dict[str, Any]:
    """The row with the verdict today's rules give its stored report."""
    v = diagnose(evidence(report)).verdict
    verdict = {
        "factor": v.limiting_factor,
        "host": v.host_to_fix,
        "explanation": v.explanation,
        "confidence": v.confidence,
        # What the rules alone gave, before the calibration table: what a table is built on.
        "rule_confidence": v.confidence if v.basis is None else v.basis.rule_confidence,
    }
    return {**row, "verdict": {**row["verdict"], **verdict}}


def _report(folder: Path, row_id: str) -> dict[str, Any] | None:
    try:
        doc: dict[str, Any] = json.loads((folder / "reports" / f"{row_id}.json").read_text())
    except (OSError, ValueError):
        return None
    return doc


def _line(row: dict[str, Any], mark: str) -> str:
    t, v = row["truth"], row["verdict"]
    return (
        f"{mark} {row['id']} {row['scenario']['cause']}: {row['describe']}; truth "
        f"{t['factor']} ({t['host']}), now {v['factor']} ({v['host']}) {v['confidence']:.2f}"
    )


def run(args: argparse.Namespace, ctx: Context) -> int:
    then: list[dict[str, Any]] = []
    now: list[dict[str, Any]] = []
    unread: list[str] = []
    for folder in args.dirs:
        if not (folder / "matrix.jsonl").is_file():
            raise UsageError(f"rejudge: {folder} holds no matrix.jsonl")
        for row in load([folder / "matrix.jsonl"]):
            report = _report(folder, str(row["id"]))
            if report is None:
                unread.append(str(row["id"]))
                continue
            try:
                again = rejudged(row, report)
            except ReportError:
                unread.append(str(row["id"]))
                continue
            then.append(row)
            now.append(again)
    print(table(then, now, unread), file=ctx.stdout)
    if args.rows is not None:
        try:
            args.rows.write_text("".join(json.dumps(r) + "\n" for r in now))
        except OSError as exc:
            raise UsageError(f"rejudge: cannot write {args.rows}: {exc.strerror}") from None
    lines = [_line(r, "wrong") for r in now if not right(r)] if args.list else []
    for was, is_ in zip(then, now, strict=True):
        if right(was) != right(is_):
            lines.append(_line(is_, "turned right" if right(is_) else "turned WRONG"))
    if lines:
        print("\n".join(lines), file=ctx.stdout)
    return int(ExitCode.OK)


def _named(row: dict[str, Any]) -> tuple[str, str | None]:
    return row["verdict"]["factor"], row["verdict"]["host"]


def table(then: Sequence[dict[str, Any]], now: Sequence[dict[str, Any]], unread: list[str]) -> str:
    pairs = list(zip(then, now, strict=True))
    turned_right = sum(not right(a) and right(b) for a, b in pairs)
    turned_wrong = sum(right(a) and not right(b) for a, b in pairs)
    changed = sum(_named(a) != _named(b) for a, b in pairs)
    n = len(pairs)
    return "\n".join(
        [
            "| reports | right when measured | right now | turned right | turned wrong "
            "| verdict changed | unreadable |",
            "|---:|---:|---:|---:|---:|---:|---:|",
            f"| {n} | {sum(right(a) for a in then)} | {sum(right(b) for b in now)} | "
            f"{turned_right} | {turned_wrong} | {changed} | {len(unread)} |",
        ]
    )
