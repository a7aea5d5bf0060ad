"""A command's document onto stdout (or stderr) in the format its flags chose, and the
exit code for it (output/registry.py: `emit`)."""

from __future__ import annotations

import argparse
from typing import TextIO

from tcpwizard.context import Context
from tcpwizard.output.document import Document, RenderOptions


def render_options(args: argparse.Namespace, ctx: Context) -> RenderOptions:
    return RenderOptions(
        color=False if getattr(args, "no_color", False) else ctx.color,
        warning=getattr(args, "warning", None),
        critical=getattr(args, "critical", None),
        lines=bool(getattr(args, "watch", False)),
    )


def emit(
    doc: Document, args: argparse.Namespace, ctx: Context, stream: TextIO | None = None
) -> int:
    from tcpwizard.output import registry

    out = ctx.stdout if stream is None else stream
    return int(registry.emit(doc, args.format, out, render_options(args, ctx)))


def machine(fmt: str) -> bool:
    """Whether the format's documents are for programs (progress then stays off stdout)."""
    from tcpwizard.output import registry

    return registry.get(fmt).machine
