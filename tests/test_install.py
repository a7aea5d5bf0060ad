"""Installing like a Python tool: the man page is generated and current, the wheel builds with
the standard front end (`python -m build`, sdist then wheel from it), holds every module of
the source tree and the data files but no bench (benchmarks/ stays in the checkout), needs
matplotlib only for its `plot` extra, and installed into a fresh venv it runs: every module
imports without matplotlib, `--version`, `check --json` valid against the committed schema,
the man page where man finds it.

No network: the build uses this venv's setuptools (--no-isolation) and the fresh venv takes
the wheel with --no-deps; its third-party dependencies come from this venv through a .pth
line (a plain path: the editable install's own .pth files there are not processed, so
tcpwizard itself can only come from the wheel)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from pathlib import Path

import jsonschema
import pytest

from tcpwizard import __version__
from tcpwizard.exitcodes import ExitCode
from tcpwizard.man_gen import EXIT_MEANINGS, generate

ROOT = Path(__file__).resolve().parent.parent
MAN_PAGE = ROOT / "man" / "tcpwizard.1"
DATA_FILES = {
    "share/man/man1/tcpwizard.1": ROOT / "man" / "tcpwizard.1",
    "share/bash-completion/completions/tcpwizard.bash": ROOT / "completions" / "tcpwizard.bash",
    "share/zsh/site-functions/_tcpwizard": ROOT / "completions" / "_tcpwizard",
    "share/fish/vendor_completions.d/tcpwizard.fish": ROOT / "completions" / "tcpwizard.fish",
}
# The folders installed as tcpwizard.* (pyproject package-dir).
PACKAGE_DIRS = {
    "wizard": "tcpwizard",
    "checks": "tcpwizard/checks",
    "measure": "tcpwizard/measure",
    "advice": "tcpwizard/advice",
    "lab": "tcpwizard/lab",
}
# The checkout's benchmarks/ stays out of the wheel: by its package, and by any of its
# modules that might be copied back into the product's tree.
BENCH_MODULES = re.compile(r"^benchmarks/|/(bench_\w+|paper_\w+|checkrun|windowtest)\.py$")
NOT_SOURCES = (".venv", "build", "dist", ".git", "*.egg-info", "__pycache__", "*_cache", "results")


def test_man_page_is_current() -> None:
    assert MAN_PAGE.read_text() == generate(), "run `make man` and commit"


def test_man_page_documents_every_exit_code_and_option() -> None:
    assert set(EXIT_MEANINGS) == set(ExitCode)
    page = MAN_PAGE.read_text()
    for flag in ("\\-\\-ssh\\-option", "\\-\\-secret\\-file", "\\-\\-version"):
        assert flag in page
    for command in ("check", "serve", "fix", "lab up", "history"):
        assert f'.SS "tcpwizard {command}"' in page


def test_man_page_renders_without_warnings() -> None:
    groff = shutil.which("groff")
    if groff is None:
        pytest.skip("groff is not installed")
    out = subprocess.run(
        [groff, "-man", "-Tutf8", "-ww", "-z", str(MAN_PAGE)], capture_output=True, text=True
    )
    assert (out.returncode, out.stderr) == (0, "")


def _source_modules() -> set[str]:
    found = set()
    for folder, installed in PACKAGE_DIRS.items():
        for path in (ROOT / folder).rglob("*.py"):
            if "__pycache__" not in path.parts:
                found.add(f"{installed}/{path.relative_to(ROOT / folder).as_posix()}")
    return found


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """sdist and wheel built from a copy of the work tree (the build writes build/ and
    *.egg-info into its source folder, which must not be the shared one)."""
    tmp = tmp_path_factory.mktemp("build")
    src = tmp / "src"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(*NOT_SOURCES))
    out = subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(tmp / "dist"), str(src)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    wheels = list((tmp / "dist").glob("tcpwizard-*.whl"))
    sdists = list((tmp / "dist").glob("tcpwizard-*.tar.gz"))
    assert len(wheels) == len(sdists) == 1
    return {"wheel": wheels[0], "sdist": sdists[0], "tmp": tmp}


@pytest.mark.slow
def test_wheel_holds_every_module_and_the_data_files(built: dict[str, Path]) -> None:
    assert built["wheel"].name == f"tcpwizard-{__version__}-py3-none-any.whl"
    with zipfile.ZipFile(built["wheel"]) as whl:
        names = set(whl.namelist())
        data = f"tcpwizard-{__version__}.data/data/"
        for installed, committed in DATA_FILES.items():
            assert whl.read(data + installed) == committed.read_bytes(), installed
    missing = sorted(_source_modules() - names)
    assert missing == [], "add the new package to [tool.setuptools] packages in pyproject.toml"
    assert sorted(n for n in names if BENCH_MODULES.search(n)) == []
    with tarfile.open(built["sdist"]) as sdist:
        members = {m.name.split("/", 1)[1] for m in sdist.getmembers() if "/" in m.name}
    assert {"man/tcpwizard.1", "completions/_tcpwizard", "README.md"} <= members


@pytest.mark.slow
def test_wheel_requires_matplotlib_only_for_the_plot_extra(built: dict[str, Path]) -> None:
    with zipfile.ZipFile(built["wheel"]) as whl:
        meta = whl.read(f"tcpwizard-{__version__}.dist-info/METADATA").decode()
    requires = [line.split(":", 1)[1].strip() for line in meta.splitlines()
                if line.startswith("Requires-Dist:")]  # fmt: skip
    plotting = [r for r in requires if r.lower().startswith("matplotlib")]
    assert plotting, "the plot extra names matplotlib"
    assert all("extra ==" in r for r in plotting), plotting
    assert "Provides-Extra: plot" in meta.splitlines()


# Every module of the installed product imports with matplotlib absent (None in sys.modules
# fails its import as a missing package does): only --plot needs it, and says so.
IMPORT_ALL_WITHOUT_MATPLOTLIB = """
import importlib, pkgutil, sys
sys.modules["matplotlib"] = None
import tcpwizard
names = [m.name for m in pkgutil.walk_packages(tcpwizard.__path__, "tcpwizard.")
         if not m.name.endswith("__main__")]
for name in names:
    importlib.import_module(name)
print(len(names))
"""


@pytest.mark.slow
def test_wheel_installs_into_a_fresh_venv_and_runs(built: dict[str, Path]) -> None:
    venv = built["tmp"] / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"

    def printed(code: str) -> str:
        """What `code` prints, run by the fresh venv's python."""
        return subprocess.run(
            [python, "-c", code], capture_output=True, text=True, check=True
        ).stdout.strip()

    purelib = printed("import sysconfig; print(sysconfig.get_paths()['purelib'])")
    Path(purelib, "dependencies-from-the-test-venv.pth").write_text(
        sysconfig.get_paths()["purelib"] + "\n"
    )
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "-q",
            "--no-deps",
            "--no-index",
            str(built["wheel"]),
        ],
        check=True,
        timeout=120,
    )
    tool = venv / "bin" / "tcpwizard"
    version = subprocess.run([tool, "--version"], capture_output=True, text=True, check=True)
    assert version.stdout.strip() == f"tcpwizard {__version__}"
    where = printed("import tcpwizard.measure.serve.server as m; print(m.__file__)")
    assert where.startswith(purelib), f"tcpwizard came from {where}, not from the wheel"
    imported = subprocess.run(
        [python, "-c", IMPORT_ALL_WITHOUT_MATPLOTLIB],
        capture_output=True,
        text=True,
        cwd=built["tmp"],  # not the checkout: its benchmarks/ must not be on the path
        timeout=60,
    )
    assert imported.returncode == 0, imported.stderr[-2000:]
    assert int(imported.stdout) > 100
    bench = subprocess.run(
        [python, "-c", "import benchmarks"], capture_output=True, cwd=built["tmp"], timeout=30
    )
    assert bench.returncode != 0, "the wheel installed the benchmarks"
    env = {"PATH": f"{venv / 'bin'}:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": str(built["tmp"])}
    check = subprocess.run(
        [tool, "check", "--json", "--no-history"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    doc = json.loads(check.stdout)
    jsonschema.validate(doc, json.loads((ROOT / "docs" / "report.schema.json").read_text()))
    assert doc["exit_code"] == check.returncode
    assert (venv / "share/man/man1/tcpwizard.1").read_bytes() == MAN_PAGE.read_bytes()
