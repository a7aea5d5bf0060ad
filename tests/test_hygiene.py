"""Architecture rules that must not erode (DESIGN.md, 'Rules that keep it easy to live in')."""

from __future__ import annotations

import subprocess
import sys

import pytest

CORE = ["tcpwizard.checks", "tcpwizard.measure", "tcpwizard.advice", "tcpwizard.lab"]


@pytest.mark.parametrize("package", CORE)
def test_core_never_imports_ui_libraries(package: str) -> None:
    # A fresh interpreter, so modules imported by other tests cannot hide an import.
    code = (
        "import importlib, pkgutil, sys\n"
        f"pkg = importlib.import_module({package!r})\n"
        "for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + '.'):\n"
        "    importlib.import_module(m.name)\n"
        "bad = sorted(n for n in sys.modules if n.split('.')[0] in ('textual', 'rich'))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"{package} pulls in {out.stdout.strip()}"
