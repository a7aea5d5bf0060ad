"""`tcpwizard fix`: apply a report's fixes (dry run unless --yes) or roll them back."""

from __future__ import annotations

import argparse
from typing import TextIO

from tcpwizard.advice.apply import apply_plan, fixes_from_report, make_plan, rollback
from tcpwizard.checks.model import Fix, HostRole
from tcpwizard.context import Context
from tcpwizard.documents import FixPlanDocument, FixResultDocument
from tcpwizard.exitcodes import PermissionRequired, UsageError
from tcpwizard.inputs import read_json
from tcpwizard.output import registry


def _load_plan_fixes(path: str) -> list[Fix]:
    return fixes_from_report(read_json(path, "plan"))


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
    planned = FixPlanDocument.of(plan, dry_run=not yes)
    if planned.nothing_to_do or not yes:
        code = int(registry.emit(planned, fmt, out))
        if not planned.nothing_to_do:
            print("dry run: nothing changed; add --yes (as root) to apply", file=ctx.stderr)
        return code
    if not ctx.is_root:
        raise PermissionRequired("applying fixes needs root (try: sudo tcpwizard fix ... --yes)")
    done = FixResultDocument.of(apply_plan(plan, ctx.sysctl_root, ctx.state_dir))
    return int(registry.emit(done, fmt, out))


def run(args: argparse.Namespace, ctx: Context) -> int:
    if args.rollback:
        if not ctx.is_root:
            raise PermissionRequired("rolling back needs root (try: sudo tcpwizard fix --rollback)")
        report = rollback(ctx.state_dir, ctx.sysctl_root, ctx.sysctl_conf_dir)
        return int(registry.emit(FixResultDocument.of(report), args.format, ctx.stdout))
    if not args.plan:
        raise UsageError("fix needs --plan REPORT.json (from `check --json`) or --rollback")
    return apply_fixes(_load_plan_fixes(args.plan), ctx, args.yes, args.format, args.role)
