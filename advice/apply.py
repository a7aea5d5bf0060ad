"""Applying fixes safely: plan -> dry-run diff -> apply (root) -> Applied/Skipped, with a
backup that `rollback` restores exactly.

What is touched: the live sysctls under the sysctl root, ONE file in the sysctl.d directory
(`FILE_NAME`), and routes named by `route` fixes. Nothing else. The backup records the state
before the first apply, so applying twice and rolling back once still restores the original.
"""

from __future__ import annotations

import difflib
import json
import os
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from tcpwizard.advice.plan_guard import (
    FixError,
    check_sysctl,
    metrics_command,
    route_command,
)
from tcpwizard.checks.model import Fix, HostRole

__all__ = ["FixError", "apply_plan", "fixes_from_report", "make_plan", "render_diff", "rollback"]

FILE_NAME = "60-tcpwizard.conf"
BACKUP_NAME = "fix-backup.json"
_HEADER = (
    "# Written by `tcpwizard fix`; `tcpwizard fix --rollback` restores what was here before.\n"
)


@dataclass(frozen=True)
class SysctlChange:
    fix_id: str
    key: str
    old: str | None  # None: the key does not exist under this sysctl root
    new: str

    @property
    def needed(self) -> bool:
        return self.old is None or _normalize(self.old) != _normalize(self.new)


@dataclass(frozen=True)
class RouteChange:
    """An `ip route change` (family + prefix set) or an `ip tcp_metrics` flush (prefix "")."""

    fix_id: str
    family: str
    prefix: str
    old_route: str | None  # `ip route show exact PREFIX` before the change
    argv: tuple[str, ...]

    @property
    def command(self) -> str:
        return " ".join(self.argv)


@dataclass(frozen=True)
class Plan:
    sysctls: tuple[SysctlChange, ...]
    routes: tuple[RouteChange, ...]
    manual: tuple[Fix, ...]  # fixes a human applies (setsockopt in an application, ...)
    conf_path: str
    conf_old: str | None
    conf_new: str

    @property
    def has_changes(self) -> bool:
        return any(c.needed for c in self.sysctls) or bool(self.routes)


@dataclass(frozen=True)
class Applied:
    fix_id: str
    target: str
    old: str | None
    new: str


@dataclass(frozen=True)
class Skipped:
    fix_id: str
    target: str
    reason: str


@dataclass(frozen=True)
class ApplyReport:
    applied: tuple[Applied, ...]
    skipped: tuple[Skipped, ...]
    backup_path: str | None

    @property
    def complete(self) -> bool:
        return not self.skipped


def _normalize(value: str) -> str:
    return " ".join(value.split())


# Limits a fix may raise but never lower: a host tuned for a longer path than the one measured
# must keep its larger buffers (each field of a vector separately).
NEVER_LOWER = frozenset(
    {
        "net.core.rmem_max",
        "net.core.wmem_max",
        "net.core.rmem_default",
        "net.core.wmem_default",
        "net.ipv4.tcp_rmem",
        "net.ipv4.tcp_wmem",
        "net.ipv4.tcp_mem",
        "net.core.netdev_max_backlog",
    }
)


def never_lower(key: str, old: str | None, new: str) -> str:
    """`new`, raised field by field to `old` where `old` is larger, for NEVER_LOWER keys. A
    value of another shape than the live one is refused: the kernel would take part of it."""
    if key not in NEVER_LOWER or old is None:
        return new
    try:
        olds = [int(x) for x in old.split()]
        news = [int(x) for x in new.split()]
    except ValueError:
        raise FixError(f"{key} = {new!r}: expected integers like {old!r}") from None
    if len(olds) != len(news):
        raise FixError(f"{key} = {new!r}: expected {len(olds)} numbers like {old!r}")
    return " ".join(str(max(a, b)) for a, b in zip(olds, news, strict=True))


def key_path(sysctl_root: str, key: str) -> Path:
    if not key or "/" in key or ".." in key.split("."):
        raise FixError(f"not a sysctl key: {key!r}")
    return Path(sysctl_root, *key.split("."))


def read_live(sysctl_root: str, key: str) -> str | None:
    try:
        return _normalize(key_path(sysctl_root, key).read_text())
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise FixError(f"cannot read {key}: {exc.strerror or exc}") from None


def fixes_from_report(data: object) -> list[Fix]:
    """The `fixes` of a `check --json` report, validated: a bad file is a one-line error."""
    if not isinstance(data, dict) or not isinstance(data.get("fixes"), list):
        raise FixError("plan file is not a tcpwizard JSON report (no 'fixes' list)")
    fixes: list[Fix] = []
    for i, item in enumerate(data["fixes"]):
        if not isinstance(item, dict):
            raise FixError(f"fixes[{i}] is not an object")
        try:
            fields = {k: item[k] for k in ("id", "kind", "host", "key", "value", "command")}
        except KeyError as exc:
            raise FixError(f"fixes[{i}] lacks {exc.args[0]!r}") from None
        if not all(isinstance(v, str) for v in fields.values()):
            raise FixError(f"fixes[{i}] has a non-string field")
        if fields["kind"] not in ("sysctl", "setsockopt", "route", "other"):
            raise FixError(f"fixes[{i}] has unknown kind {fields['kind']!r}")
        if fields["host"] not in ("local", "peer", "both"):
            raise FixError(f"fixes[{i}] has unknown host {fields['host']!r}")
        fixes.append(
            Fix(
                why=str(item.get("why", "")),
                guideline=str(item.get("guideline", "")),
                **fields,  # type: ignore[arg-type]
            )
        )
    return fixes


def make_plan(
    fixes: Sequence[Fix], sysctl_root: str, conf_dir: str, role: HostRole = "local"
) -> Plan:
    """The changes for the host running this: `role` says which end of the report it is
    (a report made on the near end names the far end's fixes `peer`)."""
    sysctls: list[SysctlChange] = []
    routes: list[RouteChange] = []
    manual: list[Fix] = []
    for fix in fixes:
        if fix.host not in (role, "both"):
            continue
        if fix.kind == "sysctl":
            check_sysctl(fix.key, _normalize(fix.value))
            old = read_live(sysctl_root, fix.key)
            new = never_lower(fix.key, old, _normalize(fix.value))
            sysctls.append(SysctlChange(fix.id, fix.key, old, new))
        elif fix.kind == "route":
            cmd, current = route_command(fix)
            routes.append(RouteChange(fix.id, cmd.family, cmd.prefix, current[""], tuple(cmd.argv)))
        elif fix.kind == "other" and fix.command.startswith("ip "):
            routes.append(RouteChange(fix.id, "", "", None, tuple(metrics_command(fix))))
        else:
            manual.append(fix)
    conf_path = str(Path(conf_dir, FILE_NAME))
    try:
        conf_old: str | None = Path(conf_path).read_text()
    except FileNotFoundError:
        conf_old = None
    return Plan(
        tuple(sysctls),
        tuple(routes),
        tuple(manual),
        conf_path,
        conf_old,
        _render_conf(conf_old, sysctls),
    )


def _render_conf(old: str | None, changes: Sequence[SysctlChange]) -> str:
    """Merge into our own file: keys we set before keep their place, new ones are appended."""
    values: dict[str, str] = {}
    if old:
        for line in old.splitlines():
            if "=" in line and not line.lstrip().startswith(("#", ";")):
                k, v = line.split("=", 1)
                values[k.strip()] = v.strip()
    for c in changes:
        values[c.key] = _normalize(c.new)
    return _HEADER + "".join(f"{k} = {v}\n" for k, v in values.items())


def render_diff(plan: Plan) -> str:
    """The dry run: live values that change, the file diff, routes, and manual steps."""
    lines: list[str] = []
    for c in plan.sysctls:
        state = "" if c.needed else "  (already set)"
        lines.append(
            f"sysctl {c.key}: {c.old if c.old is not None else '(absent)'} -> {c.new}{state}"
        )
    for r in plan.routes:
        before = f"  (was: {r.old_route})" if r.old_route else ""
        lines.append(f"run: {r.command}{before}")
    if plan.sysctls:
        diff = difflib.unified_diff(
            (plan.conf_old or "").splitlines(keepends=True),
            plan.conf_new.splitlines(keepends=True),
            fromfile=plan.conf_path if plan.conf_old is not None else "/dev/null",
            tofile=plan.conf_path,
        )
        lines.extend(line.rstrip("\n") for line in diff)
    for m in plan.manual:
        lines.append(f"manual ({m.kind}, not applied): {m.command}")
    return "\n".join(lines)


def _atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _write_live(sysctl_root: str, key: str, value: str) -> str | None:
    """None on success, else the reason it could not be set."""
    path = key_path(sysctl_root, key)
    if not path.is_file():
        return f"{key} does not exist on this kernel"
    try:
        path.write_text(value + "\n")
    except FileNotFoundError:
        return f"{key} does not exist on this kernel"
    except PermissionError:
        return (
            f"{key} is read-only here (needs root; global keys are read-only in a child namespace)"
        )
    except OSError as exc:
        return f"kernel refused {key} = {value!r}: {exc.strerror}"
    got = read_live(sysctl_root, key)
    if got is not None and got != _normalize(value):
        return f"kernel kept {key} = {got!r} instead of {value!r}"
    return None


@dataclass
class _Backup:
    created: float
    sysctl_root: str
    conf_path: str
    conf_old: str | None
    sysctls: dict[str, str | None]
    routes: dict[str, str | None]


def _load_backup(path: Path) -> _Backup | None:
    try:
        raw = json.loads(path.read_text())
        return _Backup(**raw)
    except FileNotFoundError:
        return None
    except (ValueError, TypeError) as exc:
        raise FixError(f"backup {path} is unreadable ({exc}); it was left untouched") from exc


def apply_plan(plan: Plan, sysctl_root: str, state_dir: str) -> ApplyReport:
    backup_path = Path(state_dir, BACKUP_NAME)
    backup = _load_backup(backup_path) or _Backup(
        time.time(), sysctl_root, plan.conf_path, plan.conf_old, {}, {}
    )
    applied: list[Applied] = []
    skipped: list[Skipped] = []
    # Record the original state before changing anything, so a crash mid-way can be undone.
    for c in plan.sysctls:
        backup.sysctls.setdefault(c.key, c.old)
    for r in plan.routes:
        if r.prefix:
            backup.routes.setdefault(f"{r.family} {r.prefix}", r.old_route)
    _atomic_write(backup_path, json.dumps(asdict(backup), indent=2))

    written: list[SysctlChange] = []
    for c in plan.sysctls:
        if not c.needed:
            skipped.append(Skipped(c.fix_id, c.key, "already set"))
            continue
        reason = _write_live(sysctl_root, c.key, c.new)
        if reason:
            skipped.append(Skipped(c.fix_id, c.key, reason))
        else:
            applied.append(Applied(c.fix_id, c.key, c.old, c.new))
            written.append(c)
    if written:
        conf_new = _render_conf(plan.conf_old, written)
        if conf_new != plan.conf_old:
            _atomic_write(Path(plan.conf_path), conf_new)
    for r in plan.routes:
        out = _run(list(r.argv))
        if out.returncode == 0:
            applied.append(Applied(r.fix_id, r.prefix or r.command, r.old_route, r.command))
        else:
            msg = (out.stderr.strip().splitlines() or ["failed"])[0]
            skipped.append(Skipped(r.fix_id, r.prefix or r.command, msg))
    for m in plan.manual:
        skipped.append(Skipped(m.id, m.key, f"not applied automatically ({m.kind}): {m.command}"))
    return ApplyReport(tuple(applied), tuple(skipped), str(backup_path))


def _run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(argv, capture_output=True, text=True, check=False, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return subprocess.CompletedProcess(argv, 1, "", str(exc))


def rollback(state_dir: str) -> ApplyReport:
    backup_path = Path(state_dir, BACKUP_NAME)
    backup = _load_backup(backup_path)
    if backup is None:
        raise FixError(f"nothing to roll back: no backup at {backup_path}")
    applied: list[Applied] = []
    skipped: list[Skipped] = []
    for key, old in backup.sysctls.items():
        if old is None:
            continue
        current = read_live(backup.sysctl_root, key)
        if current == _normalize(old):
            applied.append(Applied("rollback", key, current, old))
            continue
        reason = _write_live(backup.sysctl_root, key, old)
        if reason:
            skipped.append(Skipped("rollback", key, reason))
        else:
            applied.append(Applied("rollback", key, current, old))
    for where, old_route in backup.routes.items():
        family, _, prefix = where.partition(" ")
        cmd = (
            ["ip", family, "route", "replace", *old_route.split()]
            if old_route
            else ["ip", family, "route", "del", prefix]
        )
        out = _run(cmd)
        if out.returncode == 0:
            applied.append(Applied("rollback", prefix, None, old_route or "(removed)"))
        else:
            skipped.append(Skipped("rollback", prefix, out.stderr.strip() or "ip route failed"))
    conf = Path(backup.conf_path)
    if backup.conf_old is None:
        conf.unlink(missing_ok=True)
    else:
        _atomic_write(conf, backup.conf_old)
    applied.append(Applied("rollback", str(conf), None, "restored"))
    if not skipped:
        backup_path.unlink()
    return ApplyReport(tuple(applied), tuple(skipped), str(backup_path) if skipped else None)
