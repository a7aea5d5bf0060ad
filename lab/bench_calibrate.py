"""`tcpwizard lab bench --calibrate`: the emulator measured against its configuration."""

from __future__ import annotations

from tcpwizard.context import Context
from tcpwizard.exitcodes import UsageError


def run_calibrate(quick: bool, out_dir: str, ctx: Context) -> int:
    raise UsageError("lab bench --calibrate: not written yet")
