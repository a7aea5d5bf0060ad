"""Real applications that hold the rate, made inside a lab host: a reader that does not read
(Debian's iperf3 under a cgroup CPU quota) and OpenSSH's own window (Debian's sshd started
in a lab host with throwaway keys, and the real scp/sftp client in the other).

Shared by the application lab tests and `python -m benchmarks application`.
Nothing of this machine's ssh configuration is read or changed; every process started here
is stopped, and every cgroup removed, also on failure.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from tcpwizard.lab.lab import Lab
from tcpwizard.lab.netns import stop
from tcpwizard.lab.spec import Side

SSHD = "/usr/sbin/sshd"
CGROUP_V1_CPU = Path("/sys/fs/cgroup/cpu")
CGROUP_V2 = Path("/sys/fs/cgroup")


def ssh_missing() -> str | None:
    """Why the OpenSSH scenarios cannot run here, or None."""
    for tool in (SSHD, "ssh", "scp", "sftp", "ssh-keygen"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (make system-deps: openssh-server)"
    return None


def keygen(path: Path, comment: str = "tcpwizard-lab") -> None:
    """A passphrase-less ed25519 key pair at `path` and `path`.pub."""
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
        check=True,
    )


def make_ssh_keys(keys: Path, comment: str = "tcpwizard-lab") -> None:
    """A new private directory `keys` holding a host key, a client key (id_ed25519) and that
    client key as the one authorized."""
    keys.mkdir(mode=0o700)
    keygen(keys / "host_ed25519", comment)
    keygen(keys / "id_ed25519", comment)
    shutil.copy(keys / "id_ed25519.pub", keys / "authorized_keys")


def write_sshd_config(path: Path, keys: Path, port: int, extra: Sequence[str] = ()) -> None:
    """sshd's configuration for the keys of make_ssh_keys: key auth only, root allowed, no
    PAM, nothing of this machine's ssh configuration; `extra` lines added before the log
    level."""
    lines = [
        f"Port {port}",
        "ListenAddress 0.0.0.0",
        f"HostKey {keys / 'host_ed25519'}",
        f"AuthorizedKeysFile {keys / 'authorized_keys'}",
        "AuthenticationMethods publickey",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "PermitRootLogin prohibit-password",
        "StrictModes no",  # the keys live under /tmp
        "UsePAM no",
        "PidFile none",
        "PrintMotd no",
        *extra,
        "LogLevel ERROR",
    ]
    path.write_text("\n".join(lines) + "\n")


@contextlib.contextmanager
def privsep_dir() -> Iterator[None]:
    """sshd refuses to start without /run/sshd (the package's service creates it at boot)."""
    path = Path("/run/sshd")
    created = not path.exists()
    if created:
        path.mkdir(mode=0o755)
    try:
        yield
    finally:
        if created:
            with contextlib.suppress(OSError):
                path.rmdir()


def _listens(lab: Lab, side: Side, port: int) -> bool:
    out = lab.run(side, ["ss", "-Hltn"], capture_output=True, text=True, check=False).stdout
    return any(line.split()[3].endswith(f":{port}") for line in out.splitlines() if line.split())


@dataclass(frozen=True)
class SshServer:
    host: str  # the server's address, as the client reaches it
    options: tuple[str, ...]  # ssh -o options for the client (keys, known hosts, batch)


@contextlib.contextmanager
def sshd_serving(lab: Lab, side: Side = "b", port: int = 22) -> Iterator[SshServer]:
    """Debian's sshd in `side`, key auth only with keys made for this run in a temporary
    directory (removed afterwards, with the server)."""
    with tempfile.TemporaryDirectory(prefix="tcpwizard-sshd-") as tmp:
        keys = Path(tmp) / "keys"
        make_ssh_keys(keys)
        config = Path(tmp) / "sshd_config"
        write_sshd_config(config, keys, port, ["Subsystem sftp internal-sftp"])
        with privsep_dir():
            subprocess.run([SSHD, "-t", "-f", str(config)], check=True)
            sshd = lab.popen(side, [SSHD, "-D", "-e", "-f", str(config)], stderr=subprocess.PIPE)
            try:
                deadline = time.monotonic() + 10
                while not _listens(lab, side, port):
                    if sshd.poll() is not None:
                        raise RuntimeError(f"sshd did not start: {sshd.communicate()[1]!r}")
                    if time.monotonic() > deadline:
                        raise RuntimeError("sshd did not start listening in 10 s")
                    time.sleep(0.05)
                options = (
                    f"IdentityFile={keys / 'id_ed25519'}",
                    "IdentitiesOnly=yes",
                    f"UserKnownHostsFile={keys / 'known_hosts'}",
                    "StrictHostKeyChecking=accept-new",
                    "BatchMode=yes",
                    "ConnectTimeout=10",
                    f"Port={port}",
                )
                yield SshServer(lab.addr("b" if side == "b" else "a"), options)
            finally:
                stop(sshd)


def ssh_argv(tool: str, server: SshServer, source: str, seconds: int) -> list[str]:
    """An upload of `source` to the server's /dev/null by `tool` (scp or sftp), bounded in
    time by `timeout` (the file is larger than the path carries in that time)."""
    opts = [a for o in server.options for a in ("-o", o)]
    if tool == "scp":
        return ["timeout", str(seconds), "scp", "-q", "-F", "/dev/null", *opts, source,
                f"root@{server.host}:/dev/null"]  # fmt: skip
    if tool == "sftp":
        return ["timeout", str(seconds), "sftp", "-q", "-F", "/dev/null", *opts, "-b", "-",
                f"root@{server.host}"]  # fmt: skip
    raise ValueError(f"unknown ssh tool {tool!r}")


def sftp_batch(source: str) -> str:
    return f"put {source} /dev/null\n"


@contextlib.contextmanager
def payload(size: int) -> Iterator[str]:
    """A sparse file of `size` bytes (reads as zeros at memory speed; ssh does not compress
    unless told to)."""
    with tempfile.TemporaryDirectory(prefix="tcpwizard-payload-") as tmp:
        path = os.path.join(tmp, "payload")
        with open(path, "wb") as f:
            f.truncate(size)
        yield path
