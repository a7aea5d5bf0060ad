"""The far end in one file: a zipapp of serve and the audit that runs on any Linux host with
Python >= 3.9 and nothing else (no pip, no site-packages: `python3 -I far.pyz`).

Which modules go in is computed, not listed: the import closure of FAREND_ROOTS, read from
the sources with `ast` (module-level imports, imports inside functions, and the module names
given to importlib as string constants). A module of the closure that imports a package
outside the standard library at import time would break the far end, so `import_problems()`
names such imports and the tests keep the list empty.
"""

from __future__ import annotations

import ast
import importlib.util
import io
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

PACKAGE = "tcpwizard"
FAREND_ROOTS = ("tcpwizard.measure.farends.ssh_remote",)
MIN_PYTHON = (3, 9)
# Fixed timestamps and order: the same sources always give the same bytes.
_ZIP_DATE = (2020, 1, 1, 0, 0, 0)
_MAIN = (
    "import sys\nfrom tcpwizard.measure.farends.ssh_remote import standalone\n"
    "sys.exit(standalone(sys.argv[1:]))\n"
)


@dataclass(frozen=True)
class ImportSite:
    module: str  # the importing module
    imported: str  # the module named by the import statement
    lineno: int
    at_import_time: bool  # False: inside a function body (runs only when called)


def _source_path(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
        raise ImportError(f"{name}: no Python source to put in the far-end zipapp")
    return Path(spec.origin)


def _is_package(name: str) -> bool:
    return _source_path(name).name == "__init__.py"


def _resolve_relative(module: str, is_pkg: bool, level: int, name: str | None) -> str:
    base = module.split(".")
    base = base if is_pkg else base[:-1]
    if level > 1:
        base = base[: -(level - 1)]
    return ".".join([*base, name] if name else base)


class _Imports(ast.NodeVisitor):
    """Every import of one module, telling those that run at import time from those inside
    a function; `if TYPE_CHECKING:` blocks never run and are skipped."""

    def __init__(self, module: str, is_pkg: bool) -> None:
        self.module = module
        self.is_pkg = is_pkg
        self.depth = 0
        self.sites: list[ImportSite] = []

    def _add(self, name: str, node: ast.AST) -> None:
        self.sites.append(
            ImportSite(self.module, name, getattr(node, "lineno", 0), self.depth == 0)
        )

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> None:
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_FunctionDef = _function
    visit_AsyncFunctionDef = _function
    visit_Lambda = _function

    def visit_If(self, node: ast.If) -> None:
        test = node.test
        name = test.id if isinstance(test, ast.Name) else getattr(test, "attr", None)
        if name == "TYPE_CHECKING":
            for stmt in node.orelse:
                self.visit(stmt)
            return
        self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._add(alias.name, node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        base = (
            _resolve_relative(self.module, self.is_pkg, node.level, node.module)
            if node.level
            else node.module or ""
        )
        if base == "__future__":
            return
        self._add(base, node)
        # `from pkg import sub` imports the submodule pkg.sub when there is one.
        if base.split(".")[0] == PACKAGE:
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                if importlib.util.find_spec(base) is not None and _module_exists(sub):
                    self._add(sub, node)

    def visit_Call(self, node: ast.Call) -> None:
        # importlib.import_module("tcpwizard.x") and __import__("tcpwizard.x")
        func = node.func
        called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if called in ("import_module", "__import__") and node.args:
            first = node.args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                self._add(first.value, node)
        self.generic_visit(node)


def _module_exists(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def import_sites(name: str) -> list[ImportSite]:
    path = _source_path(name)
    visitor = _Imports(name, path.name == "__init__.py")
    visitor.visit(ast.parse(path.read_text(encoding="utf-8"), str(path)))
    return visitor.sites


def _parents(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def closure(roots: tuple[str, ...] = FAREND_ROOTS) -> dict[str, Path]:
    """Every tcpwizard module the roots need (with their parent packages), by name."""
    found: dict[str, Path] = {}
    todo = list(roots)
    while todo:
        name = todo.pop()
        if name in found:
            continue
        found[name] = _source_path(name)
        todo.extend(p for p in _parents(name) if p not in found)
        for site in import_sites(name):
            if site.imported.split(".")[0] == PACKAGE and _module_exists(site.imported):
                todo.append(site.imported)
    return dict(sorted(found.items()))


def import_problems(roots: tuple[str, ...] = FAREND_ROOTS) -> list[str]:
    """Imports in the closure that would fail on a far end with only the standard library:
    a module outside it, at import time. One line each; empty when the zipapp is sound."""
    stdlib = set(sys.stdlib_module_names)
    problems = []
    for name in closure(roots):
        for site in import_sites(name):
            top = site.imported.split(".")[0]
            if site.at_import_time and top != PACKAGE and top not in stdlib:
                problems.append(f"{name}:{site.lineno} imports {site.imported}")
    return problems


_PAIRWISE = (
    "(lambda it: (lambda a, b: (next(b, None), zip(a, b))[1])(*__import__('itertools').tee(it)))"
)


class _Python39(ast.NodeTransformer):
    """The far end's dialect: this code base targets Python 3.11, far ends may run 3.9.
    The idioms that differ there are rewritten in the zipapp's copy only: socket timeouts
    raise socket.timeout, which is not TimeoutError before 3.10 (so handlers and isinstance
    checks name both); zip(strict=) does not exist (dropped: a length check only);
    isinstance(x, A | B) needs a tuple; itertools.pairwise is spelled out."""

    changed = False

    @staticmethod
    def _socket_timeout() -> ast.expr:
        # __import__ rather than a name: the module may not have imported socket.
        call = ast.Call(ast.Name("__import__", ast.Load()), [ast.Constant("socket")], [])
        return ast.Attribute(call, "timeout", ast.Load())

    def _with_socket_timeout(self, node: ast.expr) -> ast.expr:
        if isinstance(node, ast.Name) and node.id == "TimeoutError":
            self.changed = True
            return ast.Tuple([node, self._socket_timeout()], ast.Load())
        if isinstance(node, ast.Tuple) and any(
            isinstance(e, ast.Name) and e.id == "TimeoutError" for e in node.elts
        ):
            self.changed = True
            return ast.Tuple([*node.elts, self._socket_timeout()], ast.Load())
        return node

    def _union_to_tuple(self, node: ast.expr) -> ast.expr:
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            self.changed = True
            left = self._union_to_tuple(node.left)
            right = self._union_to_tuple(node.right)
            elts = [
                *(left.elts if isinstance(left, ast.Tuple) else [left]),
                *(right.elts if isinstance(right, ast.Tuple) else [right]),
            ]
            return ast.Tuple(elts, ast.Load())
        return node

    def visit_Attribute(self, node: ast.Attribute) -> ast.expr:
        self.generic_visit(node)
        value = node.value
        if node.attr == "pairwise" and isinstance(value, ast.Name) and value.id == "itertools":
            self.changed = True
            return ast.parse(_PAIRWISE, mode="eval").body
        return node

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> ast.ExceptHandler:
        self.generic_visit(node)
        if node.type is not None:
            node.type = self._with_socket_timeout(node.type)
        return node

    def visit_Call(self, node: ast.Call) -> ast.Call:
        self.generic_visit(node)
        name = node.func.id if isinstance(node.func, ast.Name) else ""
        if name == "zip" and any(k.arg == "strict" for k in node.keywords):
            self.changed = True
            node.keywords = [k for k in node.keywords if k.arg != "strict"]
        elif name in ("isinstance", "issubclass") and len(node.args) == 2:
            node.args[1] = self._with_socket_timeout(self._union_to_tuple(node.args[1]))
        return node


def for_python39(source: str, filename: str = "<zipapp>") -> str:
    """`source` as the far end needs it (unchanged when none of the idioms occurs)."""
    tree = ast.parse(source, filename)
    fixer = _Python39()
    tree = fixer.visit(tree)
    if not fixer.changed:
        return source
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"


def _arcname(name: str, path: Path) -> str:
    parts = name.split(".")
    if path.name == "__init__.py":
        return "/".join([*parts, "__init__.py"])
    return "/".join(parts) + ".py"


def build(roots: tuple[str, ...] = FAREND_ROOTS) -> bytes:
    """The zipapp's bytes (shebang, then a deflated zip with __main__.py at the top)."""
    buf = io.BytesIO()
    buf.write(b"#!/usr/bin/env python3\n")
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        entries = {"__main__.py": _MAIN.encode()}
        for name, path in closure(roots).items():
            source = for_python39(path.read_text(encoding="utf-8"), str(path))
            entries[_arcname(name, path)] = source.encode("utf-8")
        for arc in sorted(entries):
            info = zipfile.ZipInfo(arc, date_time=_ZIP_DATE)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            zf.writestr(info, entries[arc])
    return buf.getvalue()


def write(dest: str | Path, roots: tuple[str, ...] = FAREND_ROOTS) -> Path:
    path = Path(dest)
    path.write_bytes(build(roots))
    path.chmod(0o755)
    return path


if __name__ == "__main__":
    print(write(sys.argv[1] if len(sys.argv) > 1 else "tcpwizard-farend.pyz"))
