"""`tcpwizard transfer HOST`: test transfers with each buffer strategy, DRS included."""

from __future__ import annotations

import argparse
from dataclasses import replace
from typing import get_args

from tcpwizard.advice import guard
from tcpwizard.commands._output import emit, machine
from tcpwizard.commands._plot import plot_ready, plotting
from tcpwizard.commands._secret import secret_from_args
from tcpwizard.context import Context
from tcpwizard.documents import TransferDocument
from tcpwizard.exitcodes import PermissionRequired, UsageError
from tcpwizard.measure.engine.transfer import run_transfer, static_request
from tcpwizard.measure.farends.interface import TransferHooks, TransferOptions
from tcpwizard.measure.model import Mode, TransferResult
from tcpwizard.measure.wire import spec
from tcpwizard.units import parse_duration, parse_rate, parse_size


def parse_modes(text: str | None) -> tuple[Mode, ...]:
    if not text:
        return spec.DEFAULT_MODES
    known: tuple[str, ...] = get_args(Mode)
    modes: list[Mode] = []
    for part in text.split(","):
        name = part.strip()
        if name == "all":
            return tuple(m for m in known)  # type: ignore[misc]
        if name not in known:
            raise UsageError(f"unknown mode {name!r} (choose from {', '.join(known)}, all)")
        if name not in modes:
            modes.append(name)  # type: ignore[arg-type]
    return tuple(modes)


def parse_transfer_duration(text: str) -> float:
    """--duration of `transfer` and `check`, in seconds (the unit if none is given)."""
    duration = parse_duration(text, default_unit="s")
    if not spec.MIN_DURATION_S <= duration <= spec.MAX_DURATION_S:
        raise UsageError(
            f"--duration must be between {spec.MIN_DURATION_S:g}s and {spec.MAX_DURATION_S:g}s"
        )
    return duration


def options_from_args(args: argparse.Namespace, ctx: Context) -> TransferOptions:
    """TransferOptions from the transfer flags (shared with `check`)."""
    modes = parse_modes(args.modes)
    if not spec.MIN_STREAMS <= args.streams <= spec.MAX_STREAMS:
        raise UsageError(f"--streams must be between {spec.MIN_STREAMS} and {spec.MAX_STREAMS}")
    duration: float | None = spec.FIXED_DURATION_S
    nbytes: int | None = None
    if args.nbytes:
        nbytes = parse_size(args.nbytes)
        if nbytes <= 0:
            raise UsageError("--bytes must be positive")
        duration = None
    elif args.duration:
        duration = parse_transfer_duration(args.duration)
    if args.force_buffers and not ctx.is_root:
        raise PermissionRequired("--force-buffers needs root (SO_RCVBUFFORCE/SO_SNDBUFFORCE)")
    static: int | None = None
    if getattr(args, "rtt", None) and getattr(args, "bandwidth", None):
        static = static_request(parse_duration(args.rtt), parse_rate(args.bandwidth))
    elif getattr(args, "rtt", None) or getattr(args, "bandwidth", None):
        raise UsageError("--rtt and --bandwidth go together (the BDP needs both)")
    return TransferOptions(
        modes=modes,
        streams=args.streams,
        direction=args.direction or "up",
        duration_s=duration,
        nbytes=nbytes,
        static_request=static,
        force=bool(args.force_buffers),
    )


def _static_from_probe(args: argparse.Namespace, secret: bytes | None, ctx: Context) -> int | None:
    """`static` needs a BDP; without --rtt/--bandwidth, measure it (a short probe)."""
    from tcpwizard.measure.probes.probe import probe

    ctx.progress("measuring the path for the static (2 x BDP) buffer ...")
    est = probe(
        args.host, args.port, secret=secret, budget_s=spec.STATIC_PROBE_BUDGET_S, download=False
    )
    if est.bdp_bytes is None:
        return None
    return max(64 * 1024, est.bdp_bytes)


def run(args: argparse.Namespace, ctx: Context) -> int:
    opts = options_from_args(args, ctx)
    plot_ready(args)  # before the static mode's probe
    secret = secret_from_args(args.secret_file, ctx)
    if "static" in opts.modes and opts.static_request is None:
        bdp = _static_from_probe(args, secret, ctx)
        if bdp is None:
            ctx.progress("no BDP measured: the static mode is skipped (give --rtt/--bandwidth)")
            opts = replace(opts, modes=tuple(m for m in opts.modes if m != "static"))
        else:
            opts = replace(opts, static_request=bdp)
    with plotting(args, ctx, args.host):
        if machine(args.format):
            result = run_transfer(args.host, args.port, opts, secret=secret)
        else:
            from tcpwizard.output.transfer_progress import ProgressDisplay

            with ProgressDisplay(ctx.stderr, enabled=not args.no_color) as display:
                hooks = TransferHooks(progress=display)
                result = run_transfer(args.host, args.port, opts, hooks, secret=secret)
    return emit(TransferDocument.of(args.host, args.port, _guarded(result)), args, ctx)


def _guarded(result: TransferResult) -> TransferResult:
    """Rates within the configured line rate, when one is known (advice/guard.py)."""
    return guard.guard_transfer(result, guard.bounds_for(None, None)) or result
