"""`python -m benchmarks NAME [OPTIONS]` (or `make bench ARGS='NAME ...'`): every bench by
name. The matrix benches share --only, --rtt, --quick and --out; the others keep their own
arguments (`python -m benchmarks NAME --help`). Errors are one line, with the product's exit
codes; every bench that builds a lab needs root."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import signal
import sys
from collections.abc import Callable, Sequence
from typing import NoReturn

from tcpwizard import argtypes
from tcpwizard.cli import Parser
from tcpwizard.context import Context
from tcpwizard.exitcodes import ExitCode, UsageError, describe_failure
from tcpwizard.lab.lab import require_root
from tcpwizard.units import parse_duration

PROG = "python -m benchmarks"


def _rtts_ms(args: argparse.Namespace) -> tuple[float, ...]:
    return tuple(parse_duration(r) * 1e3 for r in args.rtt or ())


def _calibrate(args: argparse.Namespace, ctx: Context) -> int:
    from benchmarks.bench_calibrate import run_calibrate

    return run_calibrate(quick=args.quick, out_dir=args.out, ctx=ctx)


def _probes(args: argparse.Namespace, ctx: Context) -> int:
    from benchmarks.bench_probes import run_bench

    only = tuple(args.only or ())
    return run_bench(args.quick, args.out, stdout=ctx.stdout, progress=ctx.progress, only=only)


def _transfer(args: argparse.Namespace, ctx: Context) -> int:
    from benchmarks.bench_transfer import run_bench_cli

    return run_bench_cli(args.quick, args.out, ctx)


def _paper(args: argparse.Namespace, ctx: Context) -> int:
    from benchmarks.bench_paper import run_paper

    tunings = tuple(args.only or ())
    return run_paper(args.quick, args.out, ctx, rtts_ms=_rtts_ms(args), tunings=tunings)


def _drs_targets(args: argparse.Namespace, ctx: Context) -> int:
    from benchmarks.bench_drs_targets import run

    rounds = 1 if args.quick else 3
    text = run(
        args.out,
        rounds,
        _rtts_ms(args),
        say=ctx.progress,
        loss=args.loss / 100.0,
        jitter_s=args.jitter / 1e3,
    )
    print(text, file=ctx.stdout)
    ctx.progress(f"wrote {args.out}/bench-drs-targets.md and .json")
    return int(ExitCode.OK)


def _scenarios(args: argparse.Namespace, ctx: Context) -> int:
    from benchmarks.bench_scenarios import run_scenarios

    return run_scenarios(args.out, tuple(args.only or ()), ctx, quick=args.quick)


def _far_ends(args: argparse.Namespace, ctx: Context) -> int:
    from benchmarks.bench_far_ends import run_far_ends

    return run_far_ends(args.out, args.quick, ctx)


def _causes(args: argparse.Namespace, ctx: Context) -> int:
    from benchmarks.bench_causes import run_causes

    return run_causes(args.out, tuple(args.only or ()), ctx, quick=args.quick)


# The matrix benches: name -> (what it measures, runner). A new one plugs in here.
MATRIX: dict[str, tuple[str, Callable[[argparse.Namespace, Context], int]]] = {
    "calibrate": ("the emulator against its truth", _calibrate),
    "probes": ("RTT and capacity probe accuracy", _probes),
    "transfer": ("transfer modes against iperf3", _transfer),
    "paper": ("the seed papers' experiment matrix", _paper),
    "drs-targets": ("DRS against autotune, every run reported", _drs_targets),
    "scenarios": ("misconfigurations: verdict, fix, re-measure", _scenarios),
    "far-ends": ("check against iperf3 -s beside iperf3 -c", _far_ends),
    "causes": ("a policer and a bloated queue at two rates and RTTs: verdict, rate, RTT", _causes),
}

# Benches with arguments of their own: name -> (what it measures, module with main(argv)).
OWN_ARGUMENTS: dict[str, tuple[str, str]] = {
    "application": (
        "a slow reader and SSH's own window, seen by conns and --pcap",
        "bench_application",
    ),
    "capture": ("reading a real 1 GB capture: time and memory", "bench_capture"),
    "host": ("a CPU-starved far end and drops inside a host", "bench_host"),
    "loopback": ("the transfer engine against iperf3 on loopback", "bench_loopback"),
    "middlebox": ("a device that rewrites the handshake", "bench_middlebox"),
    "path": ("hop naming, available bandwidth, time-sequence graphs", "bench_path"),
}


# Benches with arguments of their own, parsed by the shared parser (the product's rules for
# bad input): name -> (what it measures, module with add_arguments(parser) and run(args, ctx)).
OWN_PARSER: dict[str, tuple[str, str]] = {
    "matrix": ("random scenarios over the lab's envelope: confusion, calibration", "bench_matrix"),
    "confidence": ("the verdicts' confidence table from matrix rows", "bench_confidence"),
    "check-time": ("a healthy tuned path: verdict and time against the floor", "bench_check_time"),
    "rejudge": ("stored matrix reports judged again by today's rules", "bench_rejudge"),
    "three-ways": ("one upload judged by check, conns and --pcap, every run", "bench_three_ways"),
}


class _Parser(Parser):
    def error(self, message: str) -> NoReturn:
        where = self.prog.removeprefix(PROG).strip()  # the bench's name, if any
        raise UsageError(f"{where}: {message}" if where else message)


def build_parser() -> Parser:
    parser = _Parser(prog=PROG, description="Benchmarks of tcpwizard on its lab (root).")
    sub = parser.add_subparsers(dest="bench", required=True, metavar="BENCH")
    for name, (help_text, _run) in MATRIX.items():
        p = sub.add_parser(name, help=help_text)
        p.add_argument(
            "--only",
            action="append",
            metavar="NAME",
            help=(
                "only these scenarios (paper: tunings; causes: cases; probes: gigabit, "
                "multigigabit; scenarios: gigabit, multigigabit)"
            ),
        )
        p.add_argument(
            "--rtt",
            type=argtypes.duration("ms"),
            action="append",
            metavar="TIME",
            help="paper, drs-targets: only these delays, e.g. 25ms",
        )
        p.add_argument("--quick", action="store_true", help="a smaller matrix")
        p.add_argument("--out", default="results", help="folder for tables and plots")
        if name == "drs-targets":
            importlib.import_module("benchmarks.bench_drs_targets").add_path_arguments(p)
    for name, (help_text, module) in OWN_PARSER.items():
        p = sub.add_parser(name, help=help_text)
        importlib.import_module(f"benchmarks.{module}").add_arguments(p)
    for name, (help_text, _module) in OWN_ARGUMENTS.items():
        p = sub.add_parser(name, help=f"{help_text} (its own arguments: {name} --help)")
        p.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    return parser


def run(argv: Sequence[str], ctx: Context) -> int:
    if argv and argv[0] in OWN_ARGUMENTS:
        # Before the shared parser, so `NAME --help` reaches the bench's own.
        module = importlib.import_module(f"benchmarks.{OWN_ARGUMENTS[argv[0]][1]}")
        code: int = module.main(list(argv[1:]))
        return code
    args = build_parser().parse_args(argv)
    if args.bench in OWN_PARSER:
        own = importlib.import_module(f"benchmarks.{OWN_PARSER[args.bench][1]}")
        own_code: int = own.run(args, ctx)  # checks its arguments, then needs root
        return own_code
    require_root()
    return MATRIX[args.bench][1](args, ctx)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None, ctx: Context | None = None) -> int:
    """Failures as the product reports them: one line, its exit codes (TCPWIZARD_DEBUG=1 for
    the traceback)."""
    ctx = ctx or Context()
    # A bench stopped with SIGTERM (kill, a CI timeout) unwinds like ^C: its labs' finally
    # blocks remove their namespaces and helper processes instead of leaving them behind.
    if argv is None:  # the process's own command line, not a caller's
        signal.signal(signal.SIGTERM, _interrupt)
    try:
        code = run(sys.argv[1:] if argv is None else argv, ctx)
        ctx.stdout.flush()
        return code
    except BaseException as exc:
        if isinstance(exc, SystemExit):  # --help
            raise
        if os.environ.get("TCPWIZARD_DEBUG") and not isinstance(exc, KeyboardInterrupt):
            raise
        failure = describe_failure(exc)
        if failure.line:
            with contextlib.suppress(OSError, ValueError):
                print(failure.line.replace("tcpwizard:", "benchmarks:", 1), file=ctx.stderr)
        return int(failure.code)
