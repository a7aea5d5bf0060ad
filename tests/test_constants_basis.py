"""Every number the judges decide by states its basis beside it.

A module-level constant of the verdict code (advice/) that holds a number carries a comment
on its own line, or sits in a group of constants under a comment: its derivation or the
bench it was measured in. A bare number is a threshold nobody can check."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ADVICE = Path(__file__).resolve().parent.parent / "advice"


def _numeric(node: ast.expr) -> bool:
    return any(
        isinstance(n, ast.Constant)
        and isinstance(n.value, int | float)
        and not isinstance(n.value, bool)
        for n in ast.walk(node)
    )


def _is_constant(stmt: ast.stmt) -> bool:
    target = (
        stmt.targets[0]
        if isinstance(stmt, ast.Assign)
        else stmt.target
        if isinstance(stmt, ast.AnnAssign)
        else None
    )
    return isinstance(target, ast.Name) and target.id.isupper()


def unexplained(source: str) -> list[str]:
    """The numeric constants of `source` with no comment beside or above their group."""
    lines = source.splitlines()
    tree = ast.parse(source)
    starts = {s.lineno for s in tree.body if _is_constant(s)}
    ends = {s.end_lineno: s.lineno for s in tree.body if _is_constant(s) and s.end_lineno}
    bad = []
    for stmt in tree.body:
        value = getattr(stmt, "value", None)
        if not _is_constant(stmt) or value is None or not _numeric(value):
            continue
        own = lines[stmt.lineno - 1 : (stmt.end_lineno or stmt.lineno)]
        if any("#" in line for line in own):
            continue
        # Climb the group of constants directly above; a comment must head it.
        above = stmt.lineno - 1
        while above in ends or above in starts:
            above = ends.get(above, above) - 1
        if above < 1 or not lines[above - 1].lstrip().startswith("#"):
            bad.append(f"line {stmt.lineno}: {lines[stmt.lineno - 1].strip()}")
    return bad


@pytest.mark.parametrize(
    "path", sorted(ADVICE.rglob("*.py")), ids=lambda p: str(p.relative_to(ADVICE))
)
def test_every_threshold_states_its_basis(path: Path) -> None:
    assert unexplained(path.read_text()) == []


def test_a_bare_number_is_found() -> None:
    source = "# the basis\nA = 1\nB = 2\n\nC = 0.3\nD = 'text'\nE = 4  # why\n"
    assert unexplained(source) == ["line 5: C = 0.3"]
