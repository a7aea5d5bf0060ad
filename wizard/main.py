"""Entry point: parse, build the context, dispatch, map every failure to an exit code."""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Sequence

from tcpwizard.cli import build_parser
from tcpwizard.context import Context
from tcpwizard.exitcodes import ExitCode, TcpWizardError


def run_command(args: argparse.Namespace, ctx: Context) -> int:
    module = importlib.import_module(f"tcpwizard.commands.{args.command}")
    result: int = module.run(args, ctx)
    return result


def main(argv: Sequence[str] | None = None, ctx: Context | None = None) -> int:
    """`ctx` lets tests point the readers at a fake /proc/sys tree."""
    ctx = ctx if ctx is not None else Context()
    try:
        args = build_parser().parse_args(argv)
        return run_command(args, ctx)
    except TcpWizardError as exc:
        print(f"tcpwizard: error: {exc}", file=ctx.stderr)
        return int(exc.exit_code)
    except KeyboardInterrupt:
        print("tcpwizard: interrupted", file=ctx.stderr)
        return int(ExitCode.INTERRUPTED)
    except BrokenPipeError:
        return int(ExitCode.OK)


if __name__ == "__main__":
    raise SystemExit(main())
