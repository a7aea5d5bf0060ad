"""Shared assertions of the robustness suite: every bad input ends in one line on
stderr and an exit code from the README's table, never an internal error; and the
slow clients the servers must outlast."""

from __future__ import annotations

import hashlib
import io
import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tcpwizard.context import Context
from tcpwizard.main import main

# README "Exit codes": the only codes the tool may use (70 is a bug).
DOCUMENTED = frozenset({0, 1, 2, 3, 64, 65, 69, 77, 130})


@dataclass
class Outcome:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


def fake_tree(root: Path) -> Path:
    """A small /proc/sys with the keys the fix tests touch."""
    (root / "net/ipv4").mkdir(parents=True, exist_ok=True)
    (root / "net/core").mkdir(parents=True, exist_ok=True)
    (root / "net/ipv4/tcp_rmem").write_text("4096\t65536\t262144\n")
    (root / "net/ipv4/tcp_window_scaling").write_text("0\n")
    (root / "net/core/rmem_max").write_text("212992\n")
    return root


def run_cli(
    argv: list[str], tmp: Path, root: bool = False, sysctl_root: str | None = None
) -> Outcome:
    ctx = Context(
        sysctl_root=sysctl_root or str(fake_tree(tmp / "proc_sys")),
        sysctl_conf_dir=str(tmp / "sysctl.d"),
        state_dir=str(tmp / "state"),
        is_root=root,
        stdout=io.StringIO(),
        stderr=io.StringIO(),
    )
    code = main(argv, ctx)
    return Outcome(code, ctx.stdout.getvalue(), ctx.stderr.getvalue())  # type: ignore[attr-defined]


def assert_clean_failure(o: Outcome, *codes: int) -> None:
    """A documented exit code (one of `codes` when given) and exactly one stderr line."""
    assert o.code in DOCUMENTED, (o.code, o.err)
    if codes:
        assert o.code in codes, (o.code, o.err)
    lines = o.err.strip().splitlines()
    assert len(lines) == 1, o.err
    assert "internal error" not in o.err and "Traceback" not in o.err, o.err


def tree_digest(root: Path) -> dict[str, str]:
    """Every file under `root` (or `root` itself) by content hash: to prove nothing changed."""
    if not root.exists():
        return {}
    if root.is_file():
        return {str(root): hashlib.sha256(root.read_bytes()).hexdigest()}
    return {
        str(p): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
        for p in sorted(root.rglob("*"))
    }


@contextmanager
def client_threads(client: Callable[[], None], count: int, stop: threading.Event) -> Iterator[None]:
    """`count` daemon threads running `client`; when the block ends `stop` is set and each
    is given 15 s to notice."""
    threads = [threading.Thread(target=client, daemon=True) for _ in range(count)]
    for t in threads:
        t.start()
    try:
        yield
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=15)
