"""Socket buffer sizing: set SO_SNDBUF/SO_RCVBUF, read back what the kernel granted, and
know the largest sizes this host allows.

Linux facts this module encodes (socket(7), net/core/sock.c):
- setsockopt(SO_RCVBUF, n) caps n at net.core.rmem_max, then stores 2n (the extra half pays
  for skb overhead); getsockopt returns that doubled value. SO_SNDBUF likewise with wmem_max.
- SO_RCVBUFFORCE/SO_SNDBUFFORCE skip the rmem_max/wmem_max cap but need CAP_NET_ADMIN.
- Setting either option locks that buffer: the kernel stops autotuning it for the socket.
- The receive window can never grow past tp->window_clamp. For a client that is fixed at
  connect from the buffer in place then (hence "open large before connect", drsFTP §3.4);
  for an accepted socket it starts small and only autotuning raises it, so after setting
  SO_RCVBUF on an accepted socket we raise TCP_WINDOW_CLAMP explicitly.
"""

from __future__ import annotations

import errno
import os
import socket
from dataclasses import dataclass
from pathlib import Path

SO_SNDBUFFORCE = getattr(socket, "SO_SNDBUFFORCE", 32)
SO_RCVBUFFORCE = getattr(socket, "SO_RCVBUFFORCE", 33)
TCP_WINDOW_CLAMP = getattr(socket, "TCP_WINDOW_CLAMP", 10)
UNTUNED_BYTES = 64 * 1024  # stock FTP's buffers, the paper's baseline
# Forced (root) sizes still need a ceiling: the kernel accepts up to INT_MAX/2 and would
# happily pin that much memory per socket.
FORCE_CEILING = 256 * 1024 * 1024


@dataclass(frozen=True)
class HostBufferLimits:
    """What this host lets a socket have (bytes, as the sysctls state them)."""

    rmem_max: int
    wmem_max: int
    tcp_rmem: tuple[int, int, int]
    tcp_wmem: tuple[int, int, int]

    def max_request(self, receive: bool, force: bool) -> int:
        """The largest setsockopt argument that is not silently cut. Without force, the
        core cap; with force, the one that gives a buffer as large as the TCP ceiling
        (tcp_rmem/tcp_wmem max, which is memory as getsockopt reports it, so half of it is
        the request), or the core cap if that is larger."""
        core = self.rmem_max if receive else self.wmem_max
        if not force:
            return core
        auto = self.tcp_rmem[2] if receive else self.tcp_wmem[2]
        return min(max(core, auto // 2), FORCE_CEILING // 2)

    def to_json(self) -> dict[str, object]:
        return {
            "rmem_max": self.rmem_max,
            "wmem_max": self.wmem_max,
            "tcp_rmem": list(self.tcp_rmem),
            "tcp_wmem": list(self.tcp_wmem),
        }

    @classmethod
    def from_json(cls, obj: object) -> HostBufferLimits | None:
        if not isinstance(obj, dict):
            return None
        try:
            r = [int(x) for x in obj["tcp_rmem"]]
            w = [int(x) for x in obj["tcp_wmem"]]
            return cls(
                rmem_max=int(obj["rmem_max"]),
                wmem_max=int(obj["wmem_max"]),
                tcp_rmem=(r[0], r[1], r[2]),
                tcp_wmem=(w[0], w[1], w[2]),
            )
        except (KeyError, TypeError, ValueError, IndexError):
            return None


def _read_ints(root: Path, key: str) -> list[int]:
    text = (root / key.replace(".", "/")).read_text()
    return [int(x) for x in text.split()]


def read_host_limits(sysctl_root: str = "/proc/sys") -> HostBufferLimits:
    """Read the four sysctls; raises OSError if /proc/sys is not there."""
    root = Path(sysctl_root)
    r = _read_ints(root, "net.ipv4.tcp_rmem")
    w = _read_ints(root, "net.ipv4.tcp_wmem")
    return HostBufferLimits(
        rmem_max=_read_ints(root, "net.core.rmem_max")[0],
        wmem_max=_read_ints(root, "net.core.wmem_max")[0],
        tcp_rmem=(r[0], r[1], r[2]),
        tcp_wmem=(w[0], w[1], w[2]),
    )


def can_force() -> bool:
    """SO_*BUFFORCE needs CAP_NET_ADMIN; root is the practical proxy (a refusal is still
    handled where the option is set)."""
    return hasattr(os, "geteuid") and os.geteuid() == 0


def get_buffers(sock: socket.socket) -> tuple[int, int]:
    """(sndbuf, rcvbuf) as the kernel reports them (the doubled, granted values)."""
    return (
        sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF),
        sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF),
    )


def _set(sock: socket.socket, receive: bool, nbytes: int, force: bool) -> tuple[int, bool]:
    """Set one buffer; returns (granted, forced). A refused FORCE falls back to the plain
    option, so an unprivileged what-if degrades to the host's limits instead of failing."""
    nbytes = max(1, min(int(nbytes), FORCE_CEILING // 2))
    plain = socket.SO_RCVBUF if receive else socket.SO_SNDBUF
    forced = False
    if force:
        try:
            sock.setsockopt(
                socket.SOL_SOCKET, SO_RCVBUFFORCE if receive else SO_SNDBUFFORCE, nbytes
            )
            forced = True
        except OSError as exc:
            if exc.errno not in (errno.EPERM, errno.EACCES, errno.ENOPROTOOPT):
                raise
    if not forced:
        sock.setsockopt(socket.SOL_SOCKET, plain, nbytes)
    return sock.getsockopt(socket.SOL_SOCKET, plain), forced


def set_rcvbuf(sock: socket.socket, nbytes: int, force: bool = False) -> int:
    """Request nbytes of receive buffer; returns what was granted (getsockopt)."""
    return _set(sock, True, nbytes, force)[0]


def set_sndbuf(sock: socket.socket, nbytes: int, force: bool = False) -> int:
    return _set(sock, False, nbytes, force)[0]


@dataclass(frozen=True)
class Granted:
    requested_sndbuf: int | None
    requested_rcvbuf: int | None
    sndbuf: int
    rcvbuf: int
    forced: bool


def apply_buffers(
    sock: socket.socket, sndbuf: int | None, rcvbuf: int | None, force: bool = False
) -> Granted:
    """Set either or both buffers (None leaves that one to autotuning) and read back."""
    forced = False
    if sndbuf is not None:
        forced |= _set(sock, False, sndbuf, force)[1]
    if rcvbuf is not None:
        forced |= _set(sock, True, rcvbuf, force)[1]
    snd, rcv = get_buffers(sock)
    return Granted(sndbuf, rcvbuf, snd, rcv, forced)


def raise_window_clamp(sock: socket.socket, window: int) -> None:
    """Let the advertised window reach `window` bytes on a connected socket whose clamp was
    fixed small (accepted sockets). Never lowers it. Best effort: not every platform has it."""
    try:
        cur = sock.getsockopt(socket.IPPROTO_TCP, TCP_WINDOW_CLAMP)
        if window > cur:
            sock.setsockopt(socket.IPPROTO_TCP, TCP_WINDOW_CLAMP, int(window))
    except OSError:
        pass


def set_window_clamp(sock: socket.socket, window: int) -> None:
    """Bound the window this socket advertises from now on (raise or lower). Lowering it
    does not take back a window already advertised: TCP never shrinks the right edge, so
    data up to it may still arrive (DRS shrinks its buffer only after that)."""
    sock.setsockopt(socket.IPPROTO_TCP, TCP_WINDOW_CLAMP, max(1, int(window)))


def window_clamp(sock: socket.socket) -> int | None:
    try:
        return int(sock.getsockopt(socket.IPPROTO_TCP, TCP_WINDOW_CLAMP))
    except OSError:
        return None
