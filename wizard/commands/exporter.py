"""`tcpwizard exporter`: Prometheus /metrics for a list of targets, checked on a schedule."""

from __future__ import annotations

import argparse
import random
import signal
import sqlite3
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import FrameType
from typing import Any, Literal

from tcpwizard.commands._secret import secret_from_args
from tcpwizard.context import Context
from tcpwizard.exitcodes import ExitCode, TcpWizardError, UsageError
from tcpwizard.exporter import Exporter, Target, load_targets, serve_exporter
from tcpwizard.measure.serve.hostlock import HostLock, ask_serve
from tcpwizard.outcome import Outcome, exit_code
from tcpwizard.output.errors import error_report
from tcpwizard.units import parse_duration

MIN_INTERVAL_S = 10.0
# What serve's refusal says when a check ran into a far end busy with another measurement.
BUSY_NOTE = "server busy"
JITTER_S = 1.0
# A target's check that could not run (an error, or its hosts stayed busy).
FAILED = exit_code(Outcome(incomplete=True))


@dataclass(frozen=True)
class Turns:
    """Taking turns in a mesh: this host's lock (shared with its serve --lock), its name
    in the lock file, how long one check is expected to take, and how long a check may wait
    for busy hosts before it gives up (then it reports exit 3, never a prediction)."""

    lock: HostLock | None
    me: str
    expect_s: float
    patience_s: float
    sleep: Callable[[float], None] = time.sleep


def check_target(
    ctx: Context,
    quick: bool,
    record: bool,
    secret: bytes | None = None,
    direction: Literal["up", "down", "both"] | None = None,
    turns: Turns | None = None,
) -> Any:
    """The real pipeline for one target; failures become a report with exit_code 3. With
    `turns`, a check never runs through a host that is measuring: it waits as long as this
    host's lock or the far end's serve asks, and tries again."""
    from tcpwizard.cli import DEFAULT_PORT
    from tcpwizard.history import History
    from tcpwizard.output.json_format import report_json
    from tcpwizard.run import CheckRequest, resolve, run_check

    def once(t: Target, port: int) -> dict[str, Any]:
        try:
            req = CheckRequest(t.host, port, secret=secret, quick=quick, direction=direction)
            return dict(report_json(run_check(req, ctx)))
        except TcpWizardError as exc:
            return dict(error_report(t.host, port, str(exc), FAILED))

    def taking_turns(t: Target, port: int, turns: Turns) -> dict[str, Any]:
        waits = 0
        ran = True
        give_up = time.monotonic() + turns.patience_s
        started = time.time()  # of the check that counts (after the waits)
        while True:
            wait: float | None = None
            who = ""
            if turns.lock is not None and not turns.lock.try_acquire(turns.me, turns.expect_s):
                wait, who = turns.lock.retry_after(), "this host"
            else:
                try:
                    address: str | None = resolve(t.host)
                except TcpWizardError:
                    address = None  # the check itself says why the name does not resolve
                wait, who = (
                    (None, t.name) if address is None else (ask_serve(address, port), t.name)
                )
                if wait is None:
                    started = time.time()
                    try:
                        doc = once(t, port)
                    finally:
                        if address is not None:
                            ask_serve(address, port, release=True)
                        if turns.lock is not None:
                            turns.lock.release()
                    busy = not doc.get("measured") and any(
                        BUSY_NOTE in str(n) for n in doc.get("notes") or []
                    )
                    if not busy:
                        break
                    wait, who = 5.0, t.name  # lost a race for the far end: its next turn
                elif turns.lock is not None:
                    turns.lock.release()
            waits += 1
            left = give_up - time.monotonic()
            if left <= 0:
                msg = f"{who} stayed busy with other measurements for {turns.patience_s:.0f} s"
                doc = dict(error_report(t.host, port, msg, FAILED))
                ran = False
                break
            # A little jitter: two exporters refused by each other's host must not come back
            # at the same instant again.
            wait += random.uniform(0.0, JITTER_S)
            ctx.progress(f"tcpwizard exporter: {who} is busy, checking {t.name} in {wait:.0f} s")
            turns.sleep(min(wait, left))
        doc["busy_waits"] = waits
        doc["mesh"] = {"near": turns.me, "started": started, "finished": time.time(), "ran": ran}
        return doc

    def check(t: Target) -> Mapping[str, Any]:
        port = t.port or DEFAULT_PORT
        doc = once(t, port) if turns is None else taking_turns(t, port, turns)
        if record:
            try:
                History().append(t.host, doc)
            except (OSError, sqlite3.Error, TcpWizardError) as exc:
                ctx.progress(f"tcpwizard exporter: history not recorded: {exc}")
        return doc

    return check


def _warm_up(ctx: Context) -> None:
    """Audit this host once before the first slot: the first check of a process otherwise
    spends a second or two loading what the audit uses (netlink, psutil), and a mesh slot
    is only a few seconds longer than a check."""
    from tcpwizard.checks.audit import audit

    try:
        audit(ctx)
    except Exception as exc:  # a warm-up never stops the exporter; the checks will tell
        ctx.progress(f"tcpwizard exporter: warm-up audit failed: {exc}")


def run(args: argparse.Namespace, ctx: Context) -> int:
    from tcpwizard.mesh import load_plan

    interval = parse_duration(args.interval, default_unit="s")
    if interval < MIN_INTERVAL_S:
        raise UsageError(f"--interval must be at least {MIN_INTERVAL_S:g}s")
    if (args.targets is None) == (args.mesh is None):
        raise UsageError("give either --targets FILE or --mesh FILE --self HOST")
    if args.mesh is not None and not args.self_host:
        raise UsageError("--mesh needs --self HOST: this host's line in the mesh file")
    if args.self_host and args.mesh is None:
        raise UsageError("--self goes with --mesh")
    secret = secret_from_args(args.secret_file, ctx)
    offsets: dict[str, float] | None = None
    turns: Turns | None = None
    lock = HostLock(args.lock) if args.lock else None
    if args.mesh is not None:
        plan = load_plan(args.mesh, args.self_host, interval)
        targets, offsets = plan.targets, plan.offsets
        # A check that misses its slot may wait up to half an interval for busy hosts.
        turns = Turns(lock, plan.me.name, plan.slot_s, interval / 2)
    else:
        targets = load_targets(args.targets)
        if lock is not None:
            turns = Turns(lock, "exporter", interval / len(targets), interval / 2)
    check = check_target(ctx, args.quick, not args.no_history, secret, args.direction, turns)
    if offsets:
        _warm_up(ctx)
    exporter = Exporter(targets, interval, check, offsets=offsets)
    server, worker = serve_exporter(exporter, args.listen, args.max_clients)
    ctx.progress(
        f"tcpwizard exporter: {len(targets)} targets every {interval:g} s, "
        f"/metrics on {args.listen}"
    )
    stop = threading.Event()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, on_signal)
    stop.wait()
    exporter.stop()
    server.shutdown()
    worker.join(timeout=5)
    return int(ExitCode.OK)
