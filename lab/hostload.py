"""Causes inside a lab host, made with kernel parts (docs/lab.md, "Causes inside a host"):

- a CPU-starved far end: serve's process in its own cgroup with a CPU quota, cgroup v2
  `cpu.max` where the unified hierarchy has the cpu controller, else v1
  `cpu.cfs_quota_us`/`cpu.cfs_period_us`. The kernel's packet work is charged to no
  process, so only what the process itself does (reading, writing, answering) is starved.
  A one-second period keeps each throttled stretch long: the sender's socket buffer drains
  and the path idles, as on a host whose CPU another job holds.
- drops inside a host: a short transmit queue on the host's lab interface (its txqueuelen,
  which is the TUN ring of the delay-line lab); bursts beyond it are dropped by the driver
  and counted in the interface's tx_dropped. Nothing global is changed.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path

from tcpwizard.lab.lab import Lab
from tcpwizard.lab.netns import LabError, ip
from tcpwizard.lab.spec import Side

CGROUP_ROOT = "/sys/fs/cgroup"
QUOTA_PERIOD_US = 1_000_000  # the longest period both cgroup versions accept
MIN_QUOTA_US = 1000  # the kernel's smallest quota


def _v2_root(root: str) -> Path | None:
    """The cgroup v2 directory whose children may use the cpu controller, if any."""
    for base in (Path(root), Path(root, "unified")):
        try:
            controllers = (base / "cgroup.controllers").read_text().split()
        except OSError:
            continue
        if "cpu" in controllers:
            return base
    return None


def _v1_root(root: str) -> Path | None:
    for name in ("cpu", "cpu,cpuacct", "cpuacct,cpu"):
        base = Path(root, name)
        if (base / "cpu.cfs_quota_us").exists():
            return base
    return None


def quota_us(share: float, period_us: int = QUOTA_PERIOD_US) -> int:
    """The quota for `share` of one core per period (at least the kernel's minimum)."""
    return max(MIN_QUOTA_US, round(share * period_us))


@contextlib.contextmanager
def cpu_quota(
    pids: int | Sequence[int],
    share: float,
    root: str = CGROUP_ROOT,
    period_us: int = QUOTA_PERIOD_US,
) -> Iterator[Path]:
    """Move `pids` (all their threads) into a new cgroup limited to `share` of one core per
    `period_us` (a CFS bandwidth limit: a short period spreads the stalls, a long one makes
    them long); moved back and removed afterwards."""
    if not 0 < share <= 1:
        raise LabError(f"cpu share {share}: use a fraction of one core, 0-1")
    name = f"tcpwizard-lab-{uuid.uuid4().hex[:8]}"
    quota = quota_us(share, period_us)
    v2 = _v2_root(root)
    if v2 is not None:
        parent = v2
        with contextlib.suppress(OSError):
            # Children get the cpu controller only when their parent delegates it.
            (parent / "cgroup.subtree_control").write_text("+cpu")
        group = parent / name
        group.mkdir()
        try:
            (group / "cpu.max").write_text(f"{quota} {period_us}")
        except OSError as exc:
            group.rmdir()
            raise LabError(f"cgroup v2 cpu.max: {exc}") from None
    else:
        v1 = _v1_root(root)
        if v1 is None:
            raise LabError("no cgroup cpu controller is mounted (v1 cpu or v2 cpu.max)")
        parent = v1
        group = parent / name
        group.mkdir()
        (group / "cpu.cfs_period_us").write_text(str(period_us))
        (group / "cpu.cfs_quota_us").write_text(str(quota))
    try:
        for pid in [pids] if isinstance(pids, int) else pids:
            (group / "cgroup.procs").write_text(str(pid))
        yield group
    finally:
        # Back to the parent, then the empty group can go.
        with contextlib.suppress(OSError):
            for line in (group / "cgroup.procs").read_text().split():
                with contextlib.suppress(OSError):
                    (parent / "cgroup.procs").write_text(line)
        for _ in range(50):  # bounded: the kernel frees the group once it is empty
            try:
                group.rmdir()
                break
            except OSError:
                time.sleep(0.02)


def set_txqueuelen(lab: Lab, side: Side, packets: int) -> None:
    ip("link", "set", "dev", lab.ifname, "txqueuelen", str(packets), ns=lab.ns(side))
