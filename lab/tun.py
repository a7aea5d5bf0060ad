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
IFF_VNET_HDR = 0x4000  # every read()/write() starts with a virtio-net header (lab/gso.py)
TUNSETOFFLOAD = 0x400454D0  # _IOW('T', 208, unsigned int)
TUN_F_CSUM = 0x01
TUN_F_TSO4 = 0x02
TUN_F_TSO6 = 0x04
TUN_F_USO4 = 0x20  # Linux 6.2+: UDP segmentation offload (UDP_SEGMENT sends) on the TUN
TUN_F_USO6 = 0x40
GSO_OFFLOADS = TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6
# With USO the capacity probe's UDP_SEGMENT trains reach the line as super-packets too, so a
# train costs the line ~40x fewer reads; each arrives whole at the far end, its datagrams
# with one timestamp, which the probe reads as a batch (measure/probes/dispersion.py: the
# lower envelope of the train's arrivals). Kernels without USO refuse the flags: TCP
# offload alone then.
GSO_OFFLOADS_UDP = GSO_OFFLOADS | TUN_F_USO4 | TUN_F_USO6
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


def open_tun(ifname: str, vnet: bool = False, offload: bool = False) -> int:
    """A non-blocking TUN fd (IFF_TUN | IFF_NO_PI) for a new interface `ifname`.

    Plain, the kernel hands us MTU-sized packets (it segments GSO packets before xmit).
    `vnet`: every read() and write() starts with a virtio-net header (lab/gso.py).
    `offload` (needs vnet): checksum, TCP and (where the kernel has it) UDP segmentation
    offload, so each read() may be a super-packet of up to 64 KB (`ethtool -k` shows
    tcp-segmentation-offload: on).
    Raises OSError where the kernel refuses either.
    """
    fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        flags = IFF_TUN | IFF_NO_PI | (IFF_VNET_HDR if vnet else 0)
        ifr = struct.pack("16sH22x", ifname.encode(), flags)
        fcntl.ioctl(fd, TUNSETIFF, ifr)
        if vnet and offload:
            try:
                fcntl.ioctl(fd, TUNSETOFFLOAD, GSO_OFFLOADS_UDP)
            except OSError:
                fcntl.ioctl(fd, TUNSETOFFLOAD, GSO_OFFLOADS)
    except OSError:
        os.close(fd)
        raise
    return fd


def set_timer_slack(ns: int) -> None:
    """The default 50 µs timer slack would add up to 50 µs to every delay we sleep for."""
    _libc.prctl(PR_SET_TIMERSLACK, ctypes.c_ulong(ns), 0, 0, 0)


# The highest nice: the delay line wins the CPU over every test process. Not real-time:
# a SCHED_FIFO line starves the kernel's softirq threads and the far end's receivers on its
# core (iperf3's UDP server lost 7 % to a full socket buffer, and the available-bandwidth
# streams read 100-112 Mbit/s free of 77 in 3 runs of 3; 3 of 3 right at nice -20).
LINE_NICE = -20


def take_the_wire() -> str:
    """Run ahead of ordinary processes: a test transfer's sender and receiver share the
    machine's cores with the delay line, and a delay line that waits for a core adds delay
    and drops packets no link would. Returns what it got (without root: nothing)."""
    try:
        os.setpriority(os.PRIO_PROCESS, 0, LINE_NICE)
        return f"nice {LINE_NICE}"
    except OSError:
        return "normal"
