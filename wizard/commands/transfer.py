"""`tcpwizard transfer HOST`: test transfers with each buffer strategy, DRS included."""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from typing import get_args

from tcpwizard import TOOL_NAME, __version__
from tcpwizard.advice import guard
from tcpwizard.commands._plot import plot_ready, plotting
from tcpwizard.commands._secret import secret_from_args
from tcpwizard.context import Context
from tcpwizard.exitcodes import ExitCode, PermissionRequired, UsageError
from tcpwizard.measure import spec
from tcpwizard.measure.model import Mode, ModeResult, TransferResult
from tcpwizard.measure.transfer import TransferHooks, TransferOptions, run_transfer, static_request
from tcpwizard.output.measure_json import transfer_json
from tcpwizard.report import SCHEMA_VERSION
from tcpwizard.units import format_bytes, parse_duration, parse_rate, parse_size


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
    from tcpwizard.measure.probe import probe

    ctx.progress("measuring the path for the static (2 x BDP) buffer ...")
    est = probe(
        args.host, args.port, secret=secret, budget_s=spec.STATIC_PROBE_BUDGET_S, download=False
    )
    if est.bdp_bytes is None:
        return None
    return max(64 * 1024, est.bdp_bytes)


def run(args: argparse.Namespace, ctx: Context) -> int:
    if args.format not in ("text", "json"):
        raise UsageError(f"transfer supports --format text or json, not {args.format}")
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
    if args.format == "text":
        from tcpwizard.output.transfer_progress import ProgressDisplay

        with (
            plotting(args, ctx, args.host),
            ProgressDisplay(ctx.stderr, enabled=not args.no_color) as display,
        ):
            result = run_transfer(
                args.host, args.port, opts, TransferHooks(progress=display), secret=secret
            )
        result = _guarded(result)
        print(render_text(args.host, result), file=ctx.stdout)
    else:
        with plotting(args, ctx, args.host):
            result = run_transfer(args.host, args.port, opts, secret=secret)
        result = _guarded(result)
        doc = {
            "schema_version": SCHEMA_VERSION,
            "tool": {"name": TOOL_NAME, "version": __version__},
            "target": {"host": args.host, "port": args.port},
            "transfer": transfer_json(result),
        }
        print(json.dumps(doc, indent=2, allow_nan=False), file=ctx.stdout)
    # Partial results were printed; a mode that could not finish makes the run "unknown".
    if any(m.error for m in result.modes):
        return int(ExitCode.UNKNOWN)
    return int(ExitCode.OK)


def _guarded(result: TransferResult) -> TransferResult:
    """Rates within the configured line rate, when one is known (advice/guard.py)."""
    return guard.guard_transfer(result, guard.bounds_for(None, None)) or result


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.0f}%"


def render_text(host: str, result: TransferResult) -> str:
    lines = [
        f"Test transfers with {host} ({result.streams} stream"
        f"{'s' if result.streams > 1 else ''}; congestion control local "
        f"{result.local_congestion_control or '?'}, peer {result.peer_congestion_control or '?'})",
        f"  {'mode':<16}{'dir':<5}{'Mbit/s':>10}{'max buffer':>12}{'Mbit/s/MB':>11}"
        f"{'retrans':>9}{'rwnd-lim':>10}{'sndbuf-lim':>11}",
    ]
    for m in result.modes:
        lines.append(_row(m))
    for m in result.modes:
        for note in m.notes:
            if "autotuning was off" in note:
                continue
            lines.append(f"  note ({m.mode} {m.direction}): {note}")
        if m.error:
            lines.append(f"  error ({m.mode} {m.direction}): {m.error}")
    if any(not m.rcv_autotuning for m in result.modes):
        lines.append(
            "  note: every mode but autotune sets SO_RCVBUF, which turns kernel autotuning off"
            " for that socket"
        )
    return "\n".join(lines)


def _row(m: ModeResult) -> str:
    return (
        f"  {m.mode:<16}{m.direction:<5}{m.throughput_mbps:>10.1f}"
        f"{format_bytes(m.max_buffer_bytes):>12}{m.mbps_per_mb:>11.1f}"
        f"{m.retransmits:>9}{_pct(m.rwnd_limited):>10}{_pct(m.sndbuf_limited):>11}"
    )
