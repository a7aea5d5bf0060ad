"""A name with a leading underscore is its module's own: no other module, test or not,
imports it (a test reaches what it tests through the module's public names)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SKIP = {".venv", "build", ".git"}


def private_imports(paths: list[Path], root: Path = ROOT) -> list[str]:
    found = []
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom) or not (node.module or "").startswith(
                "tcpwizard"
            ):
                continue
            for alias in node.names:
                if alias.name.startswith("_") and not alias.name.startswith("__"):
                    found.append(f"{path.relative_to(root)}: {node.module}.{alias.name}")
    return found


def _sources() -> list[Path]:
    return [p for p in ROOT.rglob("*.py") if not SKIP & set(p.relative_to(ROOT).parts)]


def test_the_sources_are_found() -> None:
    assert len(_sources()) > 300


def test_no_private_name_is_imported_across_modules() -> None:
    assert private_imports(_sources()) == []


def test_a_private_import_is_named(tmp_path: Path) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text("from tcpwizard.advice.calibration import _logit\nfrom os import _exit\n")
    assert private_imports([planted], tmp_path) == [
        "planted.py: tcpwizard.advice.calibration._logit"
    ]
