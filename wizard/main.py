"""Entry point: parse, build the context, dispatch, map every failure to an exit code."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib
import io
import os
import sys
from collections.abc import Sequence
from typing import TextIO, cast

from tcpwizard.cli import build_parser
from tcpwizard.context import Context
from tcpwizard.exitcodes import Failure, describe_failure
from tcpwizard.measure.engine.threads import favour_packet_timing

# Commands whose machine formats promise a document even when they fail.
DOCUMENT_COMMANDS = frozenset({"check", "probe", "transfer", "fix", "history"})


class _Watched(io.TextIOBase):
    """stdout that remembers whether anything was written, so a failing command gets an
    error document only when it has not printed its own."""

    def __init__(self, inner: TextIO) -> None:
        self.inner = inner
        self.used = False
        self.failed = False  # a write or flush raised: stdout itself is the problem

    def write(self, s: str) -> int:
        if s:
            self.used = True
        try:
            return self.inner.write(s)
        except OSError:
            self.failed = True
            raise

    def flush(self) -> None:
        try:
            self.inner.flush()
        except OSError:
            self.failed = True
            raise

    def isatty(self) -> bool:
        return self.inner.isatty()

    def fileno(self) -> int:
        return self.inner.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.inner, "encoding", "utf-8") or "utf-8"


def run_command(args: argparse.Namespace, ctx: Context) -> int:
    module = importlib.import_module(f"tcpwizard.commands.{args.command}")
    result: int = module.run(args, ctx)
    return result


def _tolerant_std_streams() -> None:
    # A non-UTF-8 locale must not turn a '·' or 'µ' in a report into a crash.
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(AttributeError, ValueError):
            stream.reconfigure(errors="backslashreplace")  # type: ignore[union-attr]


def _silence_stdout() -> None:
    """After stdout failed (a closed pipe, /dev/full), point it at /dev/null so the
    interpreter's own flush at exit cannot print a second, unhandled error."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def _report_failure(
    args: argparse.Namespace | None, ctx: Context, watched: _Watched, failure: Failure
) -> None:
    """The failure's one line on stderr, and, where a machine format promised stdout a
    document that the command did not print, the error document."""
    from tcpwizard.documents import ErrorDocument
    from tcpwizard.output import registry

    host, port = getattr(args, "host", None), getattr(args, "port", None)
    doc = ErrorDocument(host, port, failure.message, failure.code, failure.line)
    with contextlib.suppress(OSError, ValueError):
        registry.get("text").render(doc, ctx.stderr)
    if watched.failed or args is None or args.command not in DOCUMENT_COMMANDS:
        return
    fmt = registry.FORMATS.get(getattr(args, "format", "text"))
    if fmt is None or not fmt.machine or watched.used:
        return
    with contextlib.suppress(OSError, ValueError):
        fmt.render(doc, ctx.stdout)
        ctx.stdout.flush()


def main(argv: Sequence[str] | None = None, ctx: Context | None = None) -> int:
    """`ctx` lets tests point the readers at a fake /proc/sys tree."""
    favour_packet_timing()
    if ctx is None:
        _tolerant_std_streams()
        ctx = Context()
    watched = _Watched(ctx.stdout)
    ctx = dataclasses.replace(ctx, stdout=cast(TextIO, watched))
    args: argparse.Namespace | None = None
    try:
        args = build_parser().parse_args(argv)
        code = run_command(args, ctx)
        ctx.stdout.flush()
        return code
    except BaseException as exc:
        if isinstance(exc, SystemExit):  # --help and --version
            raise
        if os.environ.get("TCPWIZARD_DEBUG") and not isinstance(exc, KeyboardInterrupt):
            raise
        failure = describe_failure(exc, stdout_failed=watched.failed)
        if watched.failed and watched.inner is sys.stdout:
            _silence_stdout()
        _report_failure(args, ctx, watched, failure)
        return int(failure.code)
