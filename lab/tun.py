"""TUN devices opened inside a named network namespace.

The delay line opens each TUN after switching its thread into the target namespace, so the
interface is born where it belongs (no name clash in the root namespace, no moment where it
is visible there) and disappears the moment the emulator's fd closes.
"""

from __future__ import annotations

import ctypes
import fcntl
import os
import struct
from collections.abc import Iterator
from contextlib import contextmanager

TUNSETIFF = 0x400454CA
IFF_TUN = 0x0001
IFF_NO_PI = 0x1000  # no 4-byte packet-info header: read()/write() carry bare IP packets
CLONE_NEWNET = 0x40000000
PR_SET_TIMERSLACK = 29
NETNS_RUN_DIR = "/run/netns"

_libc = ctypes.CDLL(None, use_errno=True)


def _setns(fd: int) -> None:
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns: {os.strerror(err)}")


@contextmanager
def in_netns(ns_name: str) -> Iterator[None]:
    """Run the body with this thread in namespace `ns_name`, then switch back."""
    home = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    target = os.open(os.path.join(NETNS_RUN_DIR, ns_name), os.O_RDONLY | os.O_CLOEXEC)
    try:
        _setns(target)
        try:
            yield
        finally:
            _setns(home)
    finally:
        # Holding an fd on the namespace would keep it alive after `ip netns del`.
        os.close(target)
        os.close(home)


def open_tun(ifname: str) -> int:
    """A non-blocking TUN fd (IFF_TUN | IFF_NO_PI) for a new interface `ifname`.

    Without IFF_VNET_HDR the kernel hands us MTU-sized packets (GSO segments before xmit),
    so the emulator serializes real packets, not 64 KB super-packets.
    """
    fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        ifr = struct.pack("16sH22x", ifname.encode(), IFF_TUN | IFF_NO_PI)
        fcntl.ioctl(fd, TUNSETIFF, ifr)
    except OSError:
        os.close(fd)
        raise
    return fd


def set_timer_slack(ns: int) -> None:
    """The default 50 µs timer slack would add up to 50 µs to every delay we sleep for."""
    _libc.prctl(PR_SET_TIMERSLACK, ctypes.c_ulong(ns), 0, 0, 0)


# Low: above every normal process, below the kernel's own real-time threads.
LINE_PRIORITY = 10


def take_the_wire() -> str:
    """Run ahead of every ordinary process, as netem does in the kernel's softirq: a test
    transfer's sender and receiver share the machine's cores with the delay line, and a
    delay line that waits for a core adds delay and drops packets no link would. Real-time
    FIFO when allowed (the kernel's RT throttling still leaves the others 5 %), else the
    highest nice; returns what it got."""
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(LINE_PRIORITY))
        return "SCHED_FIFO"
    except (OSError, AttributeError):
        pass
    try:
        os.nice(-20)
        return "nice -20"
    except OSError:
        return "normal"
