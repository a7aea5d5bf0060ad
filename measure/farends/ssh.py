"""`check user@host --ssh`: start a one-time serve on a host we can log into, and remove it.

The OpenSSH client runs with the user's own configuration, keys and agent (and any extra
options). Over one session it sends a bootstrap, the far-end zipapp (measure/farends/zipapp.py) and
a fresh secret on standard input; the far end (measure/farends/ssh_remote.py) writes the zipapp into
a private temporary directory, loads it, deletes the directory, starts serve on a free port
and prints one ready line. `ssh_serve()` yields where that serve listens; leaving the
`with` block (normally, by an exception or Ctrl-C) closes the session, which stops the far
end. A heartbeat on standard input lets the far end stop by itself when the connection
vanishes without a FIN.

Nothing is installed: the far end needs python3 >= 3.9 and no root, no pip, no open file.
"""

from __future__ import annotations

import contextlib
import json
import queue
import secrets
import shutil
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import IO, Any

from tcpwizard.exitcodes import ExitCode, TcpWizardError, UsageError
from tcpwizard.measure.farends import ssh_remote, zipapp

# ssh's own failures (could not connect, authentication) exit 255; a login shell that finds
# no python3 exits 127; the bootstrap exits 3 for a Python older than 3.9.
SSH_FAILED = 255
NOT_FOUND = 127
HEARTBEAT_S = 5.0
# Enough for a passphrase or password typed at ssh's own prompt (it reads /dev/tty).
READY_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 10.0
Log = Callable[[str], None]


class SshFailed(TcpWizardError):
    """ssh could not log in or the far end could not start."""

    exit_code = ExitCode.UNKNOWN


class NoPython(SshFailed):
    """The far end has no usable python3: the caller falls back to a peerless check."""


@dataclass(frozen=True)
class RemoteServe:
    """A serve started over SSH: where it listens and the secret it wants."""

    host: str  # the host name ssh connects to (after ~/.ssh/config: `ssh -G`)
    port: int
    secret: bytes
    hostname: str  # what the far end calls itself
    python: str  # the far end's Python version
    workdir: str  # the private directory it used (already removed: workdir_removed)
    workdir_removed: bool
    pid: int


def split_destination(destination: str) -> tuple[str | None, str]:
    """(user or None, host) of `[user@]host`; refuses what ssh would read as an option."""
    if not destination or destination.startswith("-") or any(c.isspace() for c in destination):
        raise UsageError(f"not an SSH destination: {destination!r} (use [user@]host)")
    user, _, host = destination.rpartition("@")
    if not host:
        raise UsageError(f"not an SSH destination: {destination!r} (use [user@]host)")
    return (user or None), host


def ssh_arguments(options: Sequence[str]) -> list[str]:
    """`--ssh-option` values as ssh arguments: `Key=Value` becomes `-o Key=Value`; a value
    that starts with `-` is passed as it is, split on spaces (`-i ~/.ssh/lab`, `-F cfg`)."""
    args: list[str] = []
    for opt in options:
        text = opt.strip()
        if not text:
            continue
        if text.startswith("-"):
            args.extend(text.split())
        else:
            args.extend(["-o", text])
    return args


def resolved_host(destination: str, options: Sequence[str], ssh: str = "ssh") -> str:
    """The host name ssh really connects to (a `Host` alias in ~/.ssh/config resolved),
    from `ssh -G`; the destination's host part when that is not available."""
    _, host = split_destination(destination)
    try:
        out = subprocess.run(
            [ssh, "-G", *ssh_arguments(options), destination],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return host
    for line in out.stdout.splitlines():
        key, _, value = line.partition(" ")
        if key.lower() == "hostname" and value.strip():
            return value.strip()
    return host


def _payload(secret: bytes, port: int) -> bytes:
    """What the far end reads from standard input: the bootstrap and the zipapp (each after
    its length), then the secret (hex) and the port, a line each."""
    boot = ssh_remote.BOOTSTRAP.encode()
    app = zipapp.build()
    return b"%d\n%s%d\n%s%s\n%d\n" % (len(boot), boot, len(app), app, secret.hex().encode(), port)


def _pump(stream: IO[bytes], sink: Callable[[str | None], None]) -> None:
    with contextlib.suppress(OSError, ValueError):
        for raw in stream:
            sink(raw.decode("utf-8", "replace").rstrip("\n"))
    sink(None)  # end of stream


class _Session:
    """One ssh process: its output read by threads, its input fed with heartbeats."""

    def __init__(self, argv: list[str], log: Log | None) -> None:
        self.log = log
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.stderr: deque[str] = deque(maxlen=20)
        self.stdin_lock = threading.Lock()
        self.closed = threading.Event()
        self.payload: threading.Thread | None = None
        # Same process group as us: Ctrl-C reaches ssh too, and its password prompt keeps
        # the terminal. ssh then closes the session and the far end stops on EOF.
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        assert self.proc.stdout is not None and self.proc.stderr is not None
        threading.Thread(target=_pump, args=(self.proc.stdout, self.lines.put), daemon=True).start()
        threading.Thread(target=_pump, args=(self.proc.stderr, self._err), daemon=True).start()

    def _err(self, line: str | None) -> None:
        if line:
            self.stderr.append(line)
            if self.log is not None:
                self.log(line)

    def send_payload(self, data: bytes) -> None:
        """In a thread: ssh may sit at a password prompt, and the ready timeout must still
        run. The heartbeat starts only after the far end is ready, so nothing interleaves."""

        def write() -> None:
            stdin = self.proc.stdin
            with contextlib.suppress(OSError, ValueError):
                assert stdin is not None
                stdin.write(data)
                stdin.flush()

        self.payload = threading.Thread(target=write, name="ssh-payload", daemon=True)
        self.payload.start()

    def send(self, data: bytes) -> bool:
        with self.stdin_lock:
            stdin = self.proc.stdin
            if stdin is None or self.closed.is_set():
                return False
            try:
                stdin.write(data)
                stdin.flush()
            except (OSError, ValueError):
                return False
        return True

    def heartbeat(self) -> None:
        while not self.closed.wait(HEARTBEAT_S):
            if not self.send(b"\n"):
                return

    def last_error(self) -> str:
        for line in reversed(self.stderr):
            # serve's own log lines are not why ssh failed
            if line.strip() and "control connection" not in line:
                return line.strip()
        return ""

    def close(self) -> int | None:
        """EOF to the far end (it stops and exits), then wait; kill if it will not end."""
        if self.payload is not None and self.payload.is_alive():
            self.proc.terminate()  # a write stuck in a full pipe would hold stdin open
        with self.stdin_lock:
            self.closed.set()
            if self.proc.stdin is not None:
                with contextlib.suppress(OSError):
                    self.proc.stdin.close()
        try:
            return self.proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.proc.terminate()
        try:
            return self.proc.wait(timeout=2.0)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()


def _wait_ready(session: _Session, timeout_s: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise SshFailed(f"the far end did not start within {timeout_s:g} s")
        try:
            line = session.lines.get(timeout=min(left, 0.5))
        except queue.Empty:
            continue
        if line is None:
            break
        if line.startswith(ssh_remote.ERROR):
            why = line[len(ssh_remote.ERROR) :].strip()
            if why.startswith("python"):
                raise NoPython(f"the far end cannot run tcpwizard: {why}")
            raise SshFailed(f"the far end could not start serve: {why}")
        with contextlib.suppress(ValueError):
            msg = json.loads(line)
            if isinstance(msg, dict) and msg.get("type") == ssh_remote.READY:
                return msg
        # anything else is the login shell's chatter (a motd in .bashrc): skip it
    code = session.proc.wait(timeout=STOP_TIMEOUT_S)
    reason = session.last_error()
    if code == NOT_FOUND:
        raise NoPython("the far end has no python3 (tcpwizard needs Python >= 3.9 there)")
    if code == SSH_FAILED:
        raise SshFailed(f"ssh failed: {reason or 'exit 255'}")
    raise SshFailed(
        f"the far end stopped before serving (exit {code}){': ' + reason if reason else ''}"
    )


@contextlib.contextmanager
def ssh_serve(
    destination: str,
    options: Sequence[str] = (),
    *,
    port: int = 0,
    ssh: str = "ssh",
    log: Log | None = None,
    ready_timeout_s: float = READY_TIMEOUT_S,
) -> Iterator[RemoteServe]:
    """Start a one-time serve on `destination` ([user@]host) over SSH, on `port` (0: a free
    one); stop it and remove everything on the way out of the `with` block, however it is
    left.

    Raises UsageError (a bad destination), SshFailed (with ssh's own reason) or NoPython."""
    split_destination(destination)
    if shutil.which(ssh) is None:
        raise SshFailed(f"{ssh} not found: install the OpenSSH client (openssh-client)")
    host = resolved_host(destination, options, ssh)
    # Text, not raw bytes: a secret file's trailing whitespace is not part of the secret.
    secret = secrets.token_hex(32).encode()
    argv = [
        ssh,
        "-T",  # no terminal: the session is a byte pipe
        "-o",
        "ServerAliveInterval=10",  # a dead path ends the session instead of hanging
        *ssh_arguments(options),
        destination,
        ssh_remote.REMOTE_COMMAND,
    ]
    session = _Session(argv, log)
    try:
        session.send_payload(_payload(secret, port))
        ready = _wait_ready(session, ready_timeout_s)
        threading.Thread(target=session.heartbeat, name="ssh-heartbeat", daemon=True).start()
        yield RemoteServe(
            host=host,
            port=int(ready["port"]),
            secret=secret,
            hostname=str(ready.get("hostname", "")),
            python=str(ready.get("python", "")),
            workdir=str(ready.get("workdir", "")),
            workdir_removed=bool(ready.get("workdir_removed")),
            pid=int(ready.get("pid", 0)),
        )
    finally:
        session.close()
