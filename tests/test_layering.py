"""The layering contracts in pyproject.toml ([tool.importlinter]) hold for the tree, and each
one can fail: a copy of the installed package with one planted upward import breaks exactly
the contract it should. import-linter reads imports inside functions and under
`if TYPE_CHECKING:` as well as at the top (grimp follows every import statement)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import tcpwizard

ROOT = Path(__file__).resolve().parent.parent
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")
CONTRACTS = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
CONTRACT_IDS = [c["id"] for c in CONTRACTS["contracts"]]

pytestmark = pytest.mark.skipif(not LINT_IMPORTS.exists(), reason="import-linter not installed")


def _lint(pythonpath: Path | None = None, *contracts: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    argv = [str(LINT_IMPORTS), "--no-cache"]
    for c in contracts:
        argv += ["--contract", c]
    return subprocess.run(
        argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False
    )


def test_the_tree_keeps_every_contract() -> None:
    proc = _lint()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"Contracts: {len(CONTRACT_IDS)} kept, 0 broken." in proc.stdout


# Where each contract is broken on purpose: (contract, module, source appended to it).
PLANTED = {
    "core-free": (
        "tcpwizard.measure.planted",
        "measure/planted.py",
        "def f():\n    from tcpwizard.output import text\n",
    ),
    "core-layers": (
        "tcpwizard.checks.planted",
        "checks/planted.py",
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from tcpwizard.advice import model\n",
    ),
    # A verdict rule reaching up into the engine that walks it.
    "rules-below-engine": (
        "tcpwizard.advice.rules.planted",
        "advice/rules/planted.py",
        "def f():\n    from tcpwizard.advice import diagnose\n",
    ),
    "primitives-are-leaves": (
        "tcpwizard.units",
        "units.py",
        "\nfrom tcpwizard.measure import model\n",
    ),
    "lab-free-of-tui": ("tcpwizard.lab.planted", "lab/planted.py", "import textual\n"),
    # The checkout's benchmarks/ is found from the root, where lint-imports runs.
    "product-free-of-benches": (
        "tcpwizard.lab.planted",
        "lab/planted.py",
        "def f():\n    from benchmarks import bench_paper\n",
    ),
    "pipeline-knows-no-far-end": (
        "tcpwizard.run",
        "run.py",
        "\ndef _planted() -> None:\n    from tcpwizard.measure.farends.iperf3 import Iperf3Far\n",
    ),
    # The wire protocol reaching up into a probe: a room below importing one above.
    "measure-rooms": (
        "tcpwizard.measure.wire.planted",
        "measure/wire/planted.py",
        "def f():\n    from tcpwizard.measure.probes import rtt\n",
    ),
}


@pytest.mark.parametrize("contract", CONTRACT_IDS)
def test_a_planted_violation_breaks_the_contract(tmp_path: Path, contract: str) -> None:
    assert contract in PLANTED, f"add a planted violation for the new contract {contract!r}"
    # The installed layout (wizard/ -> tcpwizard, checks/ -> tcpwizard.checks, ...), copied.
    tree = tmp_path / "tcpwizard"
    shutil.copytree(Path(tcpwizard.__file__).parent, tree, symlinks=False)
    module, path, source = PLANTED[contract]
    target = tree / path
    target.write_text((target.read_text() if target.exists() else "") + source)
    proc = _lint(tmp_path, contract)
    assert proc.returncode != 0, proc.stdout
    assert "BROKEN" in proc.stdout and module in proc.stdout, proc.stdout
