"""Shell completions generated from the argparse parser (shtab, pinned in pyproject so the
committed files are reproducible): `python -m tcpwizard.completion_gen completions`
writes completions/tcpwizard.bash, _tcpwizard (zsh) and tcpwizard.fish."""

from __future__ import annotations

import sys
from pathlib import Path

FILES = {"bash": "tcpwizard.bash", "zsh": "_tcpwizard", "fish": "tcpwizard.fish"}


def generate(shell: str) -> str:
    import shtab  # a dev dependency: only generating needs it, not the tool

    from tcpwizard.cli import build_parser

    text: str = shtab.complete(build_parser(), shell=shell)
    # argparse help strings escape % as %%; shells should show a single one.
    return text.replace("%%", "%")


def write_all(outdir: Path) -> list[Path]:
    outdir.mkdir(parents=True, exist_ok=True)
    written = []
    for shell, name in FILES.items():
        path = outdir / name
        path.write_text(generate(shell), encoding="utf-8")
        written.append(path)
    return written


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m tcpwizard.completion_gen OUTDIR", file=sys.stderr)
        return 64
    for path in write_all(Path(argv[0])):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
