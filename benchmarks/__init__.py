"""The benchmarks of tcpwizard on its lab: accuracy and performance against configured truth,
and the seed papers' experiment matrix. Run from a checkout (`python -m benchmarks`, or
`make bench ARGS=...`), never shipped in the wheel: they import the product, the product
never imports them (pyproject.toml's import-linter contract `product-free-of-benches`)."""

from __future__ import annotations

import sys
from pathlib import Path


def buffer_maxima(rmem_max: int, wmem_max: int) -> tuple[tuple[str, str], ...]:
    """tcp_rmem and tcp_wmem at the kernel's own minimum and default, with these maxima."""
    return (
        ("net.ipv4.tcp_rmem", f"4096 131072 {rmem_max}"),
        ("net.ipv4.tcp_wmem", f"4096 16384 {wmem_max}"),
    )


def script_argv(name: str) -> list[str]:
    """The argv that runs benchmarks/NAME.py in a lab host: by its path, so the child finds it
    from any working directory (such a script imports only the installed tcpwizard)."""
    return [sys.executable, str(Path(__file__).with_name(f"{name}.py"))]
