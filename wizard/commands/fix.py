"""`tcpwizard fix`: apply a report's fixes (dry run unless --yes) or roll them back."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from pathlib import Path

from tcpwizard.advice.apply import (
    ApplyReport,
    FixError,
    apply_plan,
    fixes_from_report,
    make_plan,
    render_diff,
    rollback,
)
from tcpwizard.checks.model import Fix, HostRole
from tcpwizard.context import Context
from tcpwizard.exitcodes import ExitCode, PermissionRequired, UsageError


def _load_plan_fixes(path: str) -> list[Fix]:
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise UsageError(f"cannot read plan {path}: {exc.strerror}") from None
    try:
        data = json.loads(text)
    except ValueError:
        raise FixError(f"plan {path} is not JSON (make it with `tcpwizard check --json`)") from None
    return fixes_from_report(data)


def print_report(report: ApplyReport, ctx: Context, fmt: str) -> int:
    if fmt == "json":
        payload = {
            "applied": [asdict(a) for a in report.applied],
            "skipped": [asdict(s) for s in report.skipped],
            "backup": report.backup_path,
        }
        print(json.dumps(payload, indent=2), file=ctx.stdout)
    else:
        for a in report.applied:
            print(f"applied  {a.target}: {a.old} -> {a.new}", file=ctx.stdout)
        for s in report.skipped:
            print(f"skipped  {s.target}: {s.reason}", file=ctx.stdout)
        if report.backup_path:
            print(
                f"backup   {report.backup_path} (undo: tcpwizard fix --rollback)", file=ctx.stdout
            )
    return int(ExitCode.OK if report.complete else ExitCode.WARNING)


def apply_fixes(
    fixes: list[Fix], ctx: Context, yes: bool, fmt: str, role: HostRole = "local"
) -> int:
    """Shared by `fix --plan` and `check --fix`: dry-run diff first, apply only with --yes."""
    plan = make_plan(fixes, ctx.sysctl_root, ctx.sysctl_conf_dir, role)
    if not plan.has_changes and not plan.manual:
        print("nothing to fix: every value is already set", file=ctx.stdout)
        return int(ExitCode.OK)
    if not yes:
        print(render_diff(plan), file=ctx.stdout)
        print("dry run: nothing changed; add --yes (as root) to apply", file=ctx.stderr)
        return int(ExitCode.WARNING)
    if not ctx.is_root:
        raise PermissionRequired("applying fixes needs root (try: sudo tcpwizard fix ... --yes)")
    return print_report(apply_plan(plan, ctx.sysctl_root, ctx.state_dir), ctx, fmt)


def run(args: argparse.Namespace, ctx: Context) -> int:
    if args.rollback:
        if not ctx.is_root:
            raise PermissionRequired("rolling back needs root (try: sudo tcpwizard fix --rollback)")
        return print_report(rollback(ctx.state_dir), ctx, args.format)
    if not args.plan:
        raise UsageError("fix needs --plan REPORT.json (from `check --json`) or --rollback")
    return apply_fixes(_load_plan_fixes(args.plan), ctx, args.yes, args.format, args.role)
