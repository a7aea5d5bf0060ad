"""A fix's plan (the dry run) and its result (applied, skipped, the backup), as text and
as JSON."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import TextIO

from tcpwizard.advice.apply import render_diff
from tcpwizard.documents import FixPlanDocument, FixResultDocument
from tcpwizard.output.document import RenderOptions


def render_plan(doc: FixPlanDocument, stream: TextIO, opts: RenderOptions) -> None:
    if doc.nothing_to_do:
        print("nothing to fix: every value is already set", file=stream)
    else:
        print(render_diff(doc.plan), file=stream)


def render_plan_json(doc: FixPlanDocument, stream: TextIO, opts: RenderOptions) -> None:
    if doc.nothing_to_do:
        print(json.dumps({"dry_run": doc.dry_run, "applied": [], "skipped": []}), file=stream)
        return
    plan = doc.plan
    payload = {
        "dry_run": True,
        "sysctls": [asdict(c) | {"needed": c.needed} for c in plan.sysctls],
        "routes": [
            {"fix_id": r.fix_id, "command": r.command, "was": r.old_route} for r in plan.routes
        ],
        "manual": [{"fix_id": m.id, "kind": m.kind, "command": m.command} for m in plan.manual],
        "file": plan.conf_path,
        "diff": render_diff(plan),
    }
    print(json.dumps(payload, indent=2), file=stream)


def render_result(doc: FixResultDocument, stream: TextIO, opts: RenderOptions) -> None:
    report = doc.report
    for a in report.applied:
        print(f"applied  {a.target}: {a.old} -> {a.new}", file=stream)
    for s in report.skipped:
        print(f"skipped  {s.target}: {s.reason}", file=stream)
    if report.backup_path:
        print(f"backup   {report.backup_path} (undo: tcpwizard fix --rollback)", file=stream)


def render_result_json(doc: FixResultDocument, stream: TextIO, opts: RenderOptions) -> None:
    report = doc.report
    payload = {
        "dry_run": False,
        "applied": [asdict(a) for a in report.applied],
        "skipped": [asdict(s) for s in report.skipped],
        "backup": report.backup_path,
    }
    print(json.dumps(payload, indent=2), file=stream)
