"""The far end of `check user@host --ssh`: runs inside the zipapp (measure/farends/zipapp.py)
on a host that has only Python >= 3.9, started by measure/farends/ssh.py over one SSH session.

Lifetime: bound to the SSH session, not to one control connection (a check opens several:
the far end's audit, the probes, the transfers), so `--once` here means once per check. It
stops when its standard input closes (the check is done, Ctrl-C, the SSH connection
dropped) or when the near end's heartbeat (a byte every few seconds) has been silent too
long (a connection that vanished without a FIN). Its temporary directory is removed before
it says it is ready, so even a SIGKILL leaves no file behind.

Standard library only, and nothing newer than Python 3.9 at run time (the zipapp's copy of
the other modules is rewritten for 3.9 by zipapp.for_python39; this one needs no rewrite).
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import select
import shutil
import signal
import socket
import sys
import threading
import time
import zipfile
from collections.abc import Callable
from typing import Any, BinaryIO

READY = "tcpwizard-farend-ready"
ERROR = "tcpwizard-farend-error"
# Sent as source and run with exec() by REMOTE_COMMAND: it writes the zipapp into a private
# temporary directory (mkdtemp: mode 0700) and runs main() from it. Written in Python 3
# syntax every python3 parses, so an old one still says which version it is.
BOOTSTRAP = r"""
import os, shutil, sys, tempfile
if sys.version_info < (3, 9):
    _v = "%d.%d" % sys.version_info[:2]
    sys.stdout.write("tcpwizard-farend-error python " + _v + " is older than 3.9\n")
    sys.stdout.flush()
    sys.exit(3)
_b = sys.stdin.buffer
_n = int(_b.readline())
_data = _b.read(_n)
if len(_data) != _n:
    sys.exit(4)
_d = tempfile.mkdtemp(prefix="tcpwizard-")
try:
    _p = os.path.join(_d, "tcpwizard-farend.pyz")
    with open(_p, "wb") as _f:
        _f.write(_data)
    sys.path.insert(0, _p)
    from tcpwizard.measure.farends.ssh_remote import main
    _rc = main(_d, _p)
finally:
    shutil.rmtree(_d, ignore_errors=True)
sys.exit(_rc)
"""
# What the far end's login shell runs: quoting that sh, bash, zsh, fish and csh read alike
# (single quotes, no quote or `!` inside). -I: no site-packages, no user site, no PYTHON*.
REMOTE_COMMAND = "python3 -I -c 'import sys;_b=sys.stdin.buffer;exec(_b.read(int(_b.readline())))'"
HEARTBEAT_TIMEOUT_S = 30.0
MAX_LIFETIME_S = 3600.0  # a check takes seconds; a forgotten far end must not live on


def _import_all(zip_path: str) -> None:
    """Load every module of the zipapp now: its file is deleted before serving starts."""
    with zipfile.ZipFile(zip_path) as zf:
        names = sorted(zf.namelist())
    for arc in names:
        if not arc.endswith(".py") or arc == "__main__.py":
            continue
        mod = arc[: -len(".py")].replace("/", ".")
        if mod.endswith(".__init__"):
            mod = mod[: -len(".__init__")]
        importlib.import_module(mod)


def watch_stdin(
    stream: BinaryIO,
    stopped: threading.Event,
    on_end: Callable[[str], None],
    heartbeat_timeout_s: float = HEARTBEAT_TIMEOUT_S,
    max_lifetime_s: float = MAX_LIFETIME_S,
) -> None:
    """Until EOF, a silent heartbeat or the maximum lifetime: then on_end(reason)."""
    fd = stream.fileno()
    started = last = time.monotonic()
    while not stopped.is_set():
        ready, _, _ = select.select([fd], [], [], 0.5)
        now = time.monotonic()
        if ready:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                chunk = b""
            if not chunk:
                on_end("the near end closed the session")
                return
            last = now
        elif now - last > heartbeat_timeout_s:
            on_end("no heartbeat from the near end")
            return
        if now - started > max_lifetime_s:
            on_end("maximum lifetime reached")
            return


def standalone(argv: list[str]) -> int:
    """`python3 -I tcpwizard-farend.pyz [--port N] [--bind ADDR] [--secret-file F] [--once]`:
    serve from the zipapp copied by hand to a host without tcpwizard (until Ctrl-C)."""
    import argparse

    from tcpwizard.measure.serve.server import Server
    from tcpwizard.measure.wire.auth import read_secret_file

    parser = argparse.ArgumentParser(prog="tcpwizard-farend.pyz", description=standalone.__doc__)
    parser.add_argument("--bind", default="::")
    parser.add_argument("--port", type=int, default=5301)
    parser.add_argument("--secret-file")
    parser.add_argument("--once", action="store_true", help="exit after the first client")
    args = parser.parse_args(argv)
    secret = read_secret_file(args.secret_file)[0] if args.secret_file else None

    def log(message: str) -> None:
        sys.stderr.write(message + "\n")
        sys.stderr.flush()

    try:
        server = Server(bind=args.bind, port=args.port, secret=secret, once=args.once, log=log)
    except OSError as exc:
        log(f"tcpwizard-farend: cannot listen on {args.bind} port {args.port}: {exc}")
        return 69  # ExitCode.UNAVAILABLE, as `tcpwizard serve`
    signal.signal(signal.SIGTERM, lambda _s, _f: server.stop())
    signal.signal(signal.SIGINT, lambda _s, _f: server.stop())
    log(f"tcpwizard serve: listening on {args.bind} port {server.port} (TCP and UDP)")
    server.serve_forever()
    return 0


def main(workdir: str, zip_path: str) -> int:
    _import_all(zip_path)
    from tcpwizard.measure.serve.server import Server

    stdin = sys.stdin.buffer
    secret = bytes.fromhex(stdin.readline().decode("ascii").strip())
    port = int(stdin.readline().decode("ascii").strip() or 0)
    shutil.rmtree(workdir, ignore_errors=True)

    def log(message: str) -> None:
        # A dropped session makes stderr a broken pipe: logging must never stop the stop.
        with contextlib.suppress(OSError, ValueError):
            sys.stderr.write(message + "\n")
            sys.stderr.flush()

    if not secret:
        log(f"{ERROR} no secret given")
        return 2
    try:
        server = Server(bind="::", port=port, secret=secret, log=log)
    except OSError as exc:
        sys.stdout.write(f"{ERROR} cannot listen on port {port}: {exc.strerror or exc}\n")
        sys.stdout.flush()
        return 2
    stopped = threading.Event()

    def end(reason: str) -> None:
        first = not stopped.is_set()
        stopped.set()
        server.stop()
        if first:
            log(f"tcpwizard far end: {reason}, stopping")

    def on_signal(signum: int, _frame: Any) -> None:
        end(signal.Signals(signum).name)

    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, on_signal)
    watcher = threading.Thread(
        target=watch_stdin, args=(stdin, stopped, end), name="farend-stdin", daemon=True
    )
    watcher.start()
    ready = {
        "type": READY,
        "port": server.port,
        "pid": os.getpid(),
        "python": "{}.{}.{}".format(*sys.version_info[:3]),
        "hostname": socket.gethostname(),
        "workdir": workdir,
        "workdir_removed": not os.path.exists(workdir),
        "transfer": server.transfer is not None,
    }
    try:
        sys.stdout.write(json.dumps(ready) + "\n")
        sys.stdout.flush()
    except OSError:
        end("the session is gone")
        return 1
    server.serve_forever()
    return 0
