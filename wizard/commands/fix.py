"""`tcpwizard fix`: apply a report's fixes (dry run unless --yes) or roll them back."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from typing import TextIO

from tcpwizard.advice.apply import (
    ApplyReport,
    Plan,
    apply_plan,
    fixes_from_report,
    make_plan,
    render_diff,
    rollback,
)
from tcpwizard.checks.model import Fix, HostRole
from tcpwizard.context import Context
from tcpwizard.exitcodes import ExitCode, PermissionRequired, UsageError
from tcpwizard.inputs import read_json


def _load_plan_fixes(path: str) -> list[Fix]:
    return fixes_from_report(read_json(path, "plan"))


def print_report(report: ApplyReport, out: TextIO, fmt: str) -> int:
    if fmt == "json":
        payload = {
            "dry_run": False,
            "applied": [asdict(a) for a in report.applied],
            "skipped": [asdict(s) for s in report.skipped],
            "backup": report.backup_path,
        }
        print(json.dumps(payload, indent=2), file=out)
    else:
        for a in report.applied:
            print(f"applied  {a.target}: {a.old} -> {a.new}", file=out)
        for s in report.skipped:
            print(f"skipped  {s.target}: {s.reason}", file=out)
        if report.backup_path:
            print(f"backup   {report.backup_path} (undo: tcpwizard fix --rollback)", file=out)
    return int(ExitCode.OK if report.complete else ExitCode.WARNING)


def _print_plan(plan: Plan, out: TextIO, fmt: str) -> None:
    if fmt == "json":
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
        print(json.dumps(payload, indent=2), file=out)
    else:
        print(render_diff(plan), file=out)


def apply_fixes(
    fixes: list[Fix],
    ctx: Context,
    yes: bool,
    fmt: str,
    role: HostRole = "local",
    out: TextIO | None = None,
) -> int:
    """Shared by `fix --plan` and `check --fix`: dry-run diff first, apply only with --yes.
    `out` is where the plan or the result goes (stderr when stdout carries a report)."""
    out = out or ctx.stdout
    plan = make_plan(fixes, ctx.sysctl_root, ctx.sysctl_conf_dir, role)
    if not plan.has_changes and not plan.manual:
        if fmt == "json":
            print(json.dumps({"dry_run": not yes, "applied": [], "skipped": []}), file=out)
        else:
            print("nothing to fix: every value is already set", file=out)
        return int(ExitCode.OK)
    if not yes:
        _print_plan(plan, out, fmt)
        print("dry run: nothing changed; add --yes (as root) to apply", file=ctx.stderr)
        return int(ExitCode.WARNING)
    if not ctx.is_root:
        raise PermissionRequired("applying fixes needs root (try: sudo tcpwizard fix ... --yes)")
    return print_report(apply_plan(plan, ctx.sysctl_root, ctx.state_dir), out, fmt)


def run(args: argparse.Namespace, ctx: Context) -> int:
    if args.rollback:
        if not ctx.is_root:
            raise PermissionRequired("rolling back needs root (try: sudo tcpwizard fix --rollback)")
        report = rollback(ctx.state_dir, ctx.sysctl_root, ctx.sysctl_conf_dir)
        return print_report(report, ctx.stdout, args.format)
    if not args.plan:
        raise UsageError("fix needs --plan REPORT.json (from `check --json`) or --rollback")
    return apply_fixes(_load_plan_fixes(args.plan), ctx, args.yes, args.format, args.role)
