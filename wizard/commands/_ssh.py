"""`check [user@]host --ssh`: a serve started over SSH for this one check, then the check.

The far end is started and removed by measure/farends/ssh.py; here it only becomes the check's
--port and --secret-file. Without python3 there, the check goes on peerless (the SSH port
itself is then the open port for RTT probes).
"""

from __future__ import annotations

import argparse
import os
import tempfile
from collections.abc import Callable

from tcpwizard.commands._output import machine
from tcpwizard.context import Context
from tcpwizard.exitcodes import TcpWizardError
from tcpwizard.measure.farends.ssh import NoPython, resolved_host, split_destination, ssh_serve

Check = Callable[[argparse.Namespace, Context], int]


def _ssh_port(options: list[str]) -> int | None:
    """The port of `-p N` or `Port=N` among the ssh options (22 is the usual default)."""
    for i, opt in enumerate(options):
        words = opt.split()
        if words[:1] == ["-p"] and len(words) > 1 and words[1].isdigit():
            return int(words[1])
        key, _, value = opt.partition("=")
        if key.strip().lower() == "port" and value.strip().isdigit():
            return int(value)
        if opt == "-p" and i + 1 < len(options) and options[i + 1].isdigit():
            return int(options[i + 1])
    return None


def run_over_ssh(args: argparse.Namespace, ctx: Context, check: Check) -> int:
    destination = args.host or ""
    options = list(args.ssh_option or [])
    if args.secret_file:
        ctx.progress("tcpwizard: note: --secret-file is not used with --ssh (a fresh secret is)")
    plain = argparse.Namespace(**vars(args))
    plain.ssh = False
    try:
        split_destination(destination)
        with (
            ssh_serve(destination, options, port=args.port or 0) as far,
            tempfile.TemporaryDirectory(prefix="tcpwizard-ssh-") as tmp,
        ):
            secret_file = os.path.join(tmp, "secret")
            fd = os.open(secret_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(far.secret)
            ctx.progress(
                f"tcpwizard: serve started over SSH on {far.hostname or far.host} "
                f"(Python {far.python}, port {far.port}); it is removed after the check"
            )
            plain.host, plain.port, plain.secret_file = far.host, far.port, secret_file
            return check(plain, ctx)
    except NoPython as exc:
        ctx.progress(f"tcpwizard: {exc}; checking without a far end (a prediction)")
    except TcpWizardError as exc:
        if not machine(args.format):
            raise
        from tcpwizard.commands.check import machine_error

        return machine_error(args, ctx, exc)
    plain.host = resolved_host(destination, options)
    if plain.tcp_port is None:
        plain.tcp_port = _ssh_port(options) or 22
    return check(plain, ctx)
