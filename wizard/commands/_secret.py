"""The shared secret of `--secret-file`, for every command that talks to serve or is serve."""

from __future__ import annotations

from tcpwizard.context import Context
from tcpwizard.measure.wire.auth import read_secret_file


def secret_from_args(path: str | None, ctx: Context) -> bytes | None:
    if not path:
        return None
    secret, warning = read_secret_file(path)
    if warning:
        ctx.progress(f"tcpwizard: warning: {warning}")
    return secret
