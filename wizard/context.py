"""The explicit context every command receives: no module reads globals behind its back."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TextIO


def _env_dir(name: str, default: str) -> str:
    # Tests and packagers relocate where fixes are written without touching /etc.
    return os.environ.get(name) or default


def _is_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


@dataclass(frozen=True)
class Context:
    sysctl_root: str = "/proc/sys"
    proc_root: str = "/proc"
    sys_root: str = "/sys"
    sysctl_conf_dir: str = field(
        default_factory=lambda: _env_dir("TCPWIZARD_SYSCTL_DIR", "/etc/sysctl.d")
    )
    state_dir: str = field(
        default_factory=lambda: _env_dir("TCPWIZARD_STATE_DIR", "/var/lib/tcpwizard")
    )
    is_root: bool = field(default_factory=_is_root)
    clock: Callable[[], float] = time.monotonic
    wall_clock: Callable[[], float] = time.time
    stdout: TextIO = field(default_factory=lambda: sys.stdout)
    stderr: TextIO = field(default_factory=lambda: sys.stderr)
    color: bool | None = None

    def progress(self, message: str) -> None:
        """Progress goes to stderr so stdout stays machine-readable."""
        print(message, file=self.stderr, flush=True)
