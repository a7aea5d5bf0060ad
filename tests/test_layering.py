"""The core (checks/, measure/, advice/) never imports the application layer nor the lab
(DESIGN.md rule 1): read from the sources with `ast`, so an import inside a function, under
`if TYPE_CHECKING:`, relative, or given to importlib as a string counts as much as one at the
top. Shared primitives the core may use (exitcodes, units, context, inputs) are not listed."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CORE = {"tcpwizard.checks": "checks", "tcpwizard.measure": "measure", "tcpwizard.advice": "advice"}
FORBIDDEN = (
    "tcpwizard.cli",
    "tcpwizard.commands",
    "tcpwizard.tui",
    "tcpwizard.output",
    "tcpwizard.run",
    "tcpwizard.main",
    "tcpwizard.lab",
)


@dataclass(frozen=True)
class Upward:
    module: str
    line: int
    imported: str

    def __str__(self) -> str:
        return f"{self.module}:{self.line} imports {self.imported}"


def _forbidden(name: str) -> str | None:
    for prefix in FORBIDDEN:
        if name == prefix or name.startswith(prefix + "."):
            return prefix
    return None


def _string_prefix(node: ast.expr) -> str | None:
    """The module name given to importlib: a literal, or the literal head of an f-string
    (`f"tcpwizard.commands.{name}"` names tcpwizard.commands.*)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr) and node.values:
        head = node.values[0]
        if isinstance(head, ast.Constant) and isinstance(head.value, str):
            return head.value.rstrip(".")
    return None


def imported_names(module: str, is_package: bool, source: str) -> list[tuple[int, str]]:
    """(line, module name) of every import in `source`, relative ones resolved."""
    found: list[tuple[int, str]] = []
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - (node.level - 1)] if node.level > 1 else parts
                base = ".".join([*parts, base] if base else parts)
            found.append((node.lineno, base))
            # `from tcpwizard import cli` imports the module tcpwizard.cli
            found += [(node.lineno, f"{base}.{alias.name}") for alias in node.names]
        elif isinstance(node, ast.Call) and node.args:
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if called in ("import_module", "__import__"):
                name = _string_prefix(node.args[0])
                if name:
                    found.append((node.lineno, name))
    return found


def upward_imports(package: str, folder: Path) -> list[Upward]:
    problems = []
    for path in sorted(folder.rglob("*.py")):
        rel = path.relative_to(folder).with_suffix("")
        parts = [p for p in rel.parts if p != "__init__"]
        module = ".".join([package, *parts])
        lines_seen = set()
        for line, name in imported_names(module, path.name == "__init__.py", path.read_text()):
            if _forbidden(name) and line not in lines_seen:  # one report per statement
                lines_seen.add(line)
                problems.append(Upward(module, line, name))
    return problems


BENCHES_IN_MEASURE = [
    name for name in ("bench_probes.py", "bench_transfer.py") if (ROOT / "measure" / name).exists()
]


@pytest.mark.parametrize(
    "package",
    [
        "tcpwizard.checks",
        "tcpwizard.advice",
        pytest.param(
            "tcpwizard.measure",
            marks=pytest.mark.xfail(
                bool(BENCHES_IN_MEASURE),
                reason="still in measure/ and driving the lab (moving to lab/, issue #16): "
                + ", ".join(BENCHES_IN_MEASURE),
                strict=True,
            ),
        ),
    ],
)
def test_core_never_imports_the_app_or_the_lab(package: str) -> None:
    problems = [str(p) for p in upward_imports(package, ROOT / CORE[package])]
    assert problems == [], "the core must not depend on the app or the lab"


# -- the test of the test --------------------------------------------------------------------

UPWARD = {
    "plain.py": "import tcpwizard.cli\n",
    "from_module.py": "from tcpwizard.output.text import render\n",
    "from_package.py": "from tcpwizard import run\n",
    "relative.py": "from .. import main\n",
    "deep_relative.py": "from ..lab.netns import ns_pids\n",
    "late.py": "def f():\n    from tcpwizard.tui import app\n    return app\n",
    "typing_only.py": (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from tcpwizard.commands import check\n"
    ),
    "by_string.py": "import importlib\nmod = importlib.import_module('tcpwizard.lab')\n",
    "by_fstring.py": (
        "import importlib\n"
        "def f(n):\n"
        "    return importlib.import_module(f'tcpwizard.commands.{n}')\n"
    ),
    "dunder.py": "m = __import__('tcpwizard.main')\n",
}
ALLOWED = (
    "import os\nfrom tcpwizard import __version__\nfrom tcpwizard.exitcodes import ExitCode\n"
    "from tcpwizard.measure import udpwire\nfrom . import sibling\nfrom .model import X\n"
    "import importlib\nimportlib.import_module('tcpwizard.measure.transfer_server')\n"
    "from tcpwizard.lab_notes import x  # a name that only starts like one\n"
)


def test_the_check_finds_each_kind_of_upward_import(tmp_path: Path) -> None:
    pkg = tmp_path / "measure"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    for name, source in UPWARD.items():
        (pkg / name).write_text(source)
    found = {
        p.module.rsplit(".", 1)[1]: p.imported for p in upward_imports("tcpwizard.measure", pkg)
    }
    assert set(found) == {name[: -len(".py")] for name in UPWARD}
    assert found["relative"] == "tcpwizard.main"
    assert found["deep_relative"].startswith("tcpwizard.lab")
    assert found["by_fstring"] == "tcpwizard.commands"


def test_the_check_passes_what_the_core_may_import(tmp_path: Path) -> None:
    pkg = tmp_path / "measure"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "fine.py").write_text(ALLOWED)
    assert upward_imports("tcpwizard.measure", pkg) == []


# -- the shared primitives are leaves ---------------------------------------------------------

PRIMITIVES = ("exitcodes", "units", "context", "inputs")


@pytest.mark.parametrize("name", PRIMITIVES)
def test_shared_primitives_import_nothing_of_the_project_but_each_other(name: str) -> None:
    """What the core may import from the application package is a leaf: it must not pull
    the application (or anything else of the project) in behind the core's back."""
    source = (ROOT / "wizard" / f"{name}.py").read_text()
    project = [
        (line, imported)
        for line, imported in imported_names(f"tcpwizard.{name}", False, source)
        if imported.startswith("tcpwizard") and imported != "tcpwizard"
    ]
    others = [
        f"line {line}: {imported}"
        for line, imported in project
        if imported.split(".")[1] not in PRIMITIVES
    ]
    assert others == [], f"tcpwizard.{name} is no longer a leaf"
