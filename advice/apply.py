"""Applying fixes safely: plan -> dry-run diff -> apply (root) -> Applied/Skipped, with a
backup that `rollback` restores exactly.

What is touched: the live sysctls under the sysctl root, ONE file in the sysctl.d directory
(`FILE_NAME`), and routes named by `route` fixes. Nothing else. The backup records the state
before the first apply, so applying twice and rolling back once still restores the original.

Why one module of this size: plan, dry run, apply and rollback share the backup's format;
apart, the promise that rollback restores exactly would span modules.
"""

from __future__ import annotations

import contextlib
import difflib
import ipaddress
import json
import os
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tcpwizard.advice.plan_guard import (
    FixError,
    check_sysctl,
    metrics_command,
    route_command,
    split_command,
)
from tcpwizard.checks.model import Fix, HostRole
from tcpwizard.exitcodes import ExitCode
from tcpwizard.inputs import InputError, parse_json, read_text_if_exists

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
        if fields["host"] not in ("local", "peer", "both", "path"):
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
        elif fix.kind == "other" and "tcp_metrics" in fix.command.split()[1:3]:
            # Only `ip tcp_metrics` runs here; link, ethtool and tc steps stay manual.
            routes.append(RouteChange(fix.id, "", "", None, tuple(metrics_command(fix))))
        else:
            manual.append(fix)
    conf_path = str(Path(conf_dir, FILE_NAME))
    conf_old = read_text_if_exists(conf_path, "sysctl.d file")
    return Plan(
        tuple(sysctls),
        tuple(routes),
        tuple(manual),
        conf_path,
        conf_old,
        _render_conf(conf_old, sysctls),
    )


def _render_conf(old: str | None, changes: Sequence[SysctlChange]) -> str:
    """Merge into the file: every line that is there stays (an admin's comments, keys we do
    not know), a key we set changes where it stands, new keys are appended."""
    values = {c.key: _normalize(c.new) for c in changes}
    lines = old.splitlines() if old else [_HEADER.rstrip("\n")]
    out: list[str] = []
    seen: set[str] = set()
    for line in lines:
        if "=" in line and not line.lstrip().startswith(("#", ";")):
            key = line.split("=", 1)[0].strip().lstrip("-")
            if key in values:
                # Every occurrence: in sysctl.d a later line of the same key wins.
                out.append(f"{key} = {values[key]}")
                seen.add(key)
                continue
        out.append(line)
    out.extend(f"{k} = {v}" for k, v in values.items() if k not in seen)
    return "\n".join(out) + "\n"


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


def _unwritable(sysctl_root: str, key: str) -> str | None:
    """Why `key` cannot be set here, known before anything changes; None if it can be."""
    path = key_path(sysctl_root, key)
    try:
        st = path.stat()
    except OSError:
        return f"{key} does not exist on this kernel"
    if not path.is_file():
        return f"{key} does not exist on this kernel"
    if not st.st_mode & 0o222:
        return f"{key} is read-only here (global keys are read-only in a child namespace)"
    return None


def _write_live(sysctl_root: str, key: str, value: str) -> str | None:
    """None on success, else the reason it could not be set."""
    path = key_path(sysctl_root, key)
    if not path.is_file():
        return f"{key} does not exist on this kernel"
    try:
        path.write_text(value + "\n")
    except FileNotFoundError:
        # The key exists (checked above): ENOENT is the kernel's word for an unknown value,
        # e.g. a congestion control whose module is not loaded.
        return f"kernel refused {key} = {value!r}: no such value on this kernel"
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


_BACKUP_FIELDS = frozenset({"created", "sysctl_root", "conf_path", "conf_old", "sysctls", "routes"})


def _backup_problem(raw: object, sysctl_root: str, conf_path: str) -> str | None:
    """What makes `raw` something other than a backup this host's `fix` wrote: rollback
    runs as root, so it may only touch what `fix` itself may touch."""
    if not isinstance(raw, dict) or set(raw) != _BACKUP_FIELDS:
        return f"expected exactly the fields {', '.join(sorted(_BACKUP_FIELDS))}"
    created = raw["created"]
    if not isinstance(created, int | float) or isinstance(created, bool):
        return "'created' is not a number"
    if raw["sysctl_root"] != sysctl_root:
        return f"it is for sysctl root {str(raw['sysctl_root'])[:80]!r}, not {sysctl_root!r}"
    if raw["conf_path"] != conf_path:
        return f"its file is {str(raw['conf_path'])[:120]!r}, not {conf_path!r}"
    if raw["conf_old"] is not None and not isinstance(raw["conf_old"], str):
        return "'conf_old' is not text"
    sysctls, routes = raw["sysctls"], raw["routes"]
    if not isinstance(sysctls, dict) or not isinstance(routes, dict):
        return "'sysctls' and 'routes' must be objects"
    for key, value in sysctls.items():
        if value is not None and not isinstance(value, str):
            return f"the value of {key[:80]!r} is not text"
        try:
            check_sysctl(key, _normalize(value) if value is not None else "0")
        except FixError as exc:
            return str(exc)
    for where, old in routes.items():
        family, _, prefix = where.partition(" ")
        if family not in ("-4", "-6") or not _is_prefix(prefix):
            return f"route entry {where[:80]!r} is not 'FAMILY PREFIX'"
        if old is not None:
            if not isinstance(old, str):
                return f"route {prefix!r}: the saved route is not text"
            try:
                words = split_command(old)
            except FixError as exc:
                return str(exc)
            if words[0] != prefix:
                return f"route {prefix!r}: the saved route is for {words[0]!r}"
    return None


def _is_prefix(text: str) -> bool:
    if text == "default":
        return True
    try:
        ipaddress.ip_network(text, strict=False)
    except ValueError:
        return False
    return True


def _load_backup(path: Path, sysctl_root: str, conf_path: str) -> _Backup | None:
    try:
        text = read_text_if_exists(str(path), "backup")
        if text is None:
            return None
        raw = parse_json(text, str(path), "backup")
    except InputError as exc:
        raise FixError(f"{exc}; it was left untouched") from None
    problem = _backup_problem(raw, sysctl_root, conf_path)
    if problem:
        raise FixError(
            f"backup {path} is not one tcpwizard fix wrote here ({problem}); "
            "it was left untouched and nothing was changed"
        )
    return _Backup(**raw)


def _write_state(path: Path, text: str | None, what: str) -> None:
    """Write (or, for None, remove) one of our files; any failure is one FixError line."""
    try:
        if text is None:
            path.unlink(missing_ok=True)
        else:
            _atomic_write(path, text)
    except OSError as exc:
        raise FixError(
            f"cannot write {what} {path}: {exc.strerror or exc}", ExitCode.WARNING
        ) from None


def apply_plan(plan: Plan, sysctl_root: str, state_dir: str) -> ApplyReport:
    """All or nothing: the backup, then the file, then the live values, then the routes; if
    a step fails, everything done so far is undone and one FixError says what happened.
    Route changes run before tcp_metrics flushes: a flush cannot be undone (it only drops
    values the kernel learns again), so it comes when nothing that could fail is left but
    other flushes."""
    backup_path = Path(state_dir, BACKUP_NAME)
    try:
        backup_before = read_text_if_exists(str(backup_path), "backup")
    except InputError as exc:
        raise FixError(f"{exc}; nothing was changed") from None
    backup = _load_backup(backup_path, sysctl_root, plan.conf_path) or _Backup(
        time.time(), sysctl_root, plan.conf_path, plan.conf_old, {}, {}
    )
    applied: list[Applied] = []
    skipped: list[Skipped] = []
    todo: list[SysctlChange] = []
    for c in plan.sysctls:
        reason = "already set" if not c.needed else _unwritable(sysctl_root, c.key)
        if reason:
            skipped.append(Skipped(c.fix_id, c.key, reason))
        else:
            todo.append(c)
    # Record the original state before changing anything, so a crash mid-way can be undone.
    for c in todo:
        backup.sysctls.setdefault(c.key, c.old)
    for r in plan.routes:
        if r.prefix:
            backup.routes.setdefault(f"{r.family} {r.prefix}", r.old_route)
    _write_state(backup_path, json.dumps(asdict(backup), indent=2), "backup")

    conf = Path(plan.conf_path)
    conf_new = _render_conf(plan.conf_old, todo) if todo else plan.conf_old
    conf_changed = conf_new is not None and conf_new != plan.conf_old
    if conf_new is not None and conf_changed:
        try:
            _write_state(conf, conf_new, "sysctl.d file")
        except FixError as exc:
            undo = _undo(_Done(), sysctl_root, None, backup_path, backup_before)
            raise FixError(f"{exc}; {undo}", ExitCode.WARNING) from None

    done = _Done()
    written = plan if conf_changed else None
    try:
        for c in todo:
            reason = _write_live(sysctl_root, c.key, c.new)
            if reason:
                undo = _undo(done, sysctl_root, written, backup_path, backup_before)
                raise FixError(f"{reason}; {undo}", ExitCode.DATA_ERROR)
            done.sysctls.append(c)
            applied.append(Applied(c.fix_id, c.key, c.old, c.new))
        for r in sorted(plan.routes, key=lambda r: not r.prefix):
            out = _run(list(r.argv))
            if out.returncode != 0:
                why = (out.stderr.strip().splitlines() or ["failed"])[0]
                undo = _undo(done, sysctl_root, written, backup_path, backup_before)
                raise FixError(f"{r.command}: {why}; {undo}", ExitCode.DATA_ERROR)
            done.routes.append(r)
            applied.append(Applied(r.fix_id, r.prefix or r.command, r.old_route, r.command))
    except FixError:
        raise
    except BaseException:
        # Interrupted or a bug mid-way: the host must not stay half-tuned.
        _undo(done, sysctl_root, written, backup_path, backup_before)
        raise
    for m in plan.manual:
        skipped.append(Skipped(m.id, m.key, f"not applied automatically ({m.kind}): {m.command}"))
    return ApplyReport(tuple(applied), tuple(skipped), str(backup_path))


@dataclass
class _Done:
    """What apply_plan has changed so far, in order."""

    sysctls: list[SysctlChange] = field(default_factory=list)
    routes: list[RouteChange] = field(default_factory=list)


def _restore_route(family: str, prefix: str, old_route: str | None) -> list[str]:
    """The command that puts back the route for `prefix` as `ip route show` printed it."""
    if old_route:
        return ["ip", family, "route", "replace", *old_route.split()]
    return ["ip", family, "route", "del", prefix]


def _undo(
    done: _Done,
    sysctl_root: str,
    plan: Plan | None,
    backup_path: Path,
    backup_before: str | None,
) -> str:
    """Put back the routes and live values in `done`, the file (when `plan` says it was
    written) and the backup as they were; the words for what the host is left with."""
    failed: list[str] = []
    for r in reversed(done.routes):
        if r.prefix and _run(_restore_route(r.family, r.prefix, r.old_route)).returncode != 0:
            failed.append(r.prefix)
    for c in reversed(done.sysctls):
        if c.old is not None and _write_live(sysctl_root, c.key, c.old):
            failed.append(c.key)
    if plan is not None:
        try:
            _write_state(Path(plan.conf_path), plan.conf_old, "sysctl.d file")
        except FixError:
            failed.append(plan.conf_path)
    if failed:
        # Keep the backup: it is what `fix --rollback` needs to finish the job.
        return (
            f"could not restore {', '.join(failed)}: run `tcpwizard fix --rollback` "
            f"(backup {backup_path})"
        )
    # If even this fails, the backup holds the state just restored: a rollback is harmless.
    with contextlib.suppress(FixError):
        _write_state(backup_path, backup_before, "backup")
    routes = [r for r in done.routes if r.prefix]
    restored = [
        _count(len(done.sysctls), "live value"),
        _count(len(routes), "route"),
        "the file" if plan is not None else "",
    ]
    words = [w for w in restored if w]
    if not words:
        return "nothing was changed"
    listed = ", ".join(words[:-1]) + " and " + words[-1] if len(words) > 1 else words[0]
    return f"restored {listed}; nothing was changed"


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'s' * (n != 1)}" if n else ""


def _run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(argv, capture_output=True, text=True, check=False, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return subprocess.CompletedProcess(argv, 1, "", str(exc))


def rollback(state_dir: str, sysctl_root: str, conf_dir: str) -> ApplyReport:
    """Restore what the backup recorded. The backup is checked like a plan (only TCP sysctls
    under this host's sysctl root, only our one file) before anything is written."""
    backup_path = Path(state_dir, BACKUP_NAME)
    backup = _load_backup(backup_path, sysctl_root, str(Path(conf_dir, FILE_NAME)))
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
        out = _run(_restore_route(family, prefix, old_route))
        if out.returncode == 0:
            applied.append(Applied("rollback", prefix, None, old_route or "(removed)"))
        else:
            skipped.append(Skipped("rollback", prefix, out.stderr.strip() or "ip route failed"))
    conf = Path(backup.conf_path)
    try:
        _write_state(conf, backup.conf_old, "sysctl.d file")
        applied.append(Applied("rollback", str(conf), None, "restored"))
    except FixError as exc:
        skipped.append(Skipped("rollback", str(conf), str(exc)))
    if not skipped:
        with contextlib.suppress(OSError):  # restored; a stale backup only repeats it
            backup_path.unlink()
    return ApplyReport(tuple(applied), tuple(skipped), str(backup_path) if skipped else None)
