"""`tcpwizard serve`: run the far end until SIGINT/SIGTERM (or after one client with --once)."""

from __future__ import annotations

import argparse
import signal
import threading
from types import FrameType

from tcpwizard.commands._secret import secret_from_args
from tcpwizard.context import Context
from tcpwizard.exitcodes import ExitCode, Unavailable, UsageError
from tcpwizard.measure.serve.hostlock import HostLock
from tcpwizard.measure.serve.limits import ServeLimits
from tcpwizard.measure.serve.server import Server
from tcpwizard.units import parse_size


def run(args: argparse.Namespace, ctx: Context) -> int:
    if args.max_clients < 1:
        raise UsageError("--max-clients must be at least 1")
    if args.max_duration <= 0:
        raise UsageError("--max-duration must be positive")
    if not 0 <= args.port <= 65535:
        raise UsageError("--port must be 0-65535")
    secret = secret_from_args(args.secret_file, ctx)
    limits = ServeLimits(
        max_clients=args.max_clients,
        max_duration_s=args.max_duration,
        max_bytes=parse_size(args.max_bytes),
    )
    try:
        server = Server(
            bind=args.bind,
            port=args.port,
            limits=limits,
            secret=secret,
            once=args.once,
            log=ctx.progress,
            host_lock=HostLock(args.lock) if args.lock else None,
        )
    except OSError as exc:
        raise Unavailable(
            f"cannot listen on {args.bind} port {args.port}: {exc.strerror or exc}"
        ) from None
    ctx.progress(
        f"tcpwizard serve: listening on {args.bind} port {server.port} (TCP and UDP)"
        f"{', shared secret required' if secret else ''}"
        f"{'' if server.transfer is not None else ', no transfer engine in this build'}"
    )

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        ctx.progress(f"tcpwizard serve: {signal.Signals(signum).name}, shutting down")
        server.stop()

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, on_signal)
        signal.signal(signal.SIGTERM, on_signal)
    server.serve_forever()
    return int(ExitCode.OK)
