"""A site of N hosts on one machine: each host a network namespace joined to a hub (a router
namespace, real kernel forwarding) by its own emulated access link (the user-space delay
line), so every path between two hosts crosses two emulated links and two paths that share
no host share no link.

    with Mesh(MeshSpec(hosts=4), "twm-1") as mesh:
        mesh.run(0, ["ping", "-c", "1", mesh.addr(3)])

Host i is 10.77.i.2 on its `wan0`; the hub is 10.77.i.1 on its `h<i>`. The addresses live
only inside these namespaces. Every delay line watches its owner (the test or CLI process)
and removes the whole mesh if it dies; down() removes everything that exists.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from typing import Any, Self

from tcpwizard.lab import netns
from tcpwizard.lab.lab import TXQUEUELEN, require_root
from tcpwizard.lab.netns import LabError
from tcpwizard.lab.updown import UpDown

MAX_HOSTS = 16


@dataclass(frozen=True)
class MeshSpec:
    """hosts: how many; rate_bps and delay_s: each access link, each way (a path between two
    hosts has RTT 4 x delay_s and the rate of its access links); sysctls: (host index, key,
    value) overrides, e.g. a small tcp_rmem on one host."""

    hosts: int = 4
    rate_bps: float = 20e6
    delay_s: float = 0.010
    sysctls: tuple[tuple[int, str, str], ...] = ()
    mtu: int = 1500

    @property
    def rtt_s(self) -> float:
        return 4 * self.delay_s

    def queue_bytes(self) -> int:
        """One BDP of a host-to-host path, at least 10 packets."""
        return max(10 * self.mtu, int(self.rate_bps * self.rtt_s / 8))


class Mesh(UpDown):
    def __init__(self, spec: MeshSpec, name: str, owner_pid: int = 0) -> None:
        if not 2 <= spec.hosts <= MAX_HOSTS:
            raise LabError(f"a mesh has 2-{MAX_HOSTS} hosts, not {spec.hosts}")
        self.spec = spec
        self.name = name
        self.owner_pid = owner_pid
        self.hub = f"{name}-hub"
        self._procs: list[subprocess.Popen[bytes]] = []

    # -- addresses and namespaces -------------------------------------------------------
    def ns(self, host: int | str) -> str:
        return self.hub if host == "hub" else f"{self.name}-h{host}"

    def addr(self, host: int) -> str:
        return f"10.77.{host}.2"

    def hub_addr(self, host: int) -> str:
        return f"10.77.{host}.1"

    @property
    def namespaces(self) -> list[str]:
        return [self.hub, *(self.ns(i) for i in range(self.spec.hosts))]

    # -- running things inside ------------------------------------------------------------
    def command(self, host: int | str, argv: list[str]) -> list[str]:
        return ["ip", "netns", "exec", self.ns(host), *argv]

    def run(self, host: int | str, argv: list[str], **kw: Any) -> subprocess.CompletedProcess[Any]:
        return subprocess.run(self.command(host, argv), **kw)

    def popen(self, host: int | str, argv: list[str], **kw: Any) -> subprocess.Popen[Any]:
        return subprocess.Popen(self.command(host, argv), **kw)

    # -- life cycle -----------------------------------------------------------------------
    def up(self) -> Self:
        require_root()
        for ns in self.namespaces:
            if netns.ns_exists(ns):
                raise LabError(f"network namespace {ns} already exists; pick another name")
        try:
            for ns in self.namespaces:
                netns.ns_add(ns)
                netns.ip("link", "set", "lo", "up", ns=ns)
            netns.write_sysctl(self.hub, "net.ipv4.ip_forward", "1")
            for i in range(self.spec.hosts):
                self._start_link(i)
                self._configure(i)
            for i in range(1, self.spec.hosts):
                self._wait_reachable(0, i)
        except BaseException:
            self.down()
            raise
        return self

    def _start_link(self, i: int) -> None:
        link = json.dumps(
            {
                "rate_bps": self.spec.rate_bps,
                "delay_s": self.spec.delay_s,
                "jitter_s": 0.0,
                "loss": 0.0,
                "queue_bytes": self.spec.queue_bytes(),
            }
        )
        argv = [
            sys.executable, "-m", "tcpwizard.lab.delayline",
            "--name", f"{self.name}-h{i}", "--ns-a", self.ns(i), "--ns-b", self.hub,
            "--ifname", "wan0", "--ifname-b", f"h{i}", "--mtu", str(self.spec.mtu),
            "--forward", link, "--reverse", link,
        ]  # fmt: skip
        if self.owner_pid:
            argv += ["--owner-pid", str(self.owner_pid)]
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            start_new_session=True, close_fds=True,
        )  # fmt: skip
        self._procs.append(proc)
        if not netns.said_ready(proc):
            raise LabError(f"mesh {self.name}: the delay line of host {i} did not start")

    def _configure(self, i: int) -> None:
        for ns, dev, addr in (
            (self.ns(i), "wan0", self.addr(i)),
            (self.hub, f"h{i}", self.hub_addr(i)),
        ):
            netns.ip("link", "set", dev, "addrgenmode", "none", ns=ns, check=False)
            netns.ip("link", "set", dev, "mtu", str(self.spec.mtu), "txqueuelen", str(TXQUEUELEN),
                     ns=ns)  # fmt: skip
            netns.ip("addr", "add", f"{addr}/24", "dev", dev, ns=ns)
            netns.ip("link", "set", dev, "up", ns=ns)
        netns.ip("route", "add", "default", "via", self.hub_addr(i), ns=self.ns(i))
        for host, key, value in self.spec.sysctls:
            if host == i:
                netns.write_sysctl(self.ns(i), key, value)

    def _wait_reachable(self, src: int, dst: int) -> None:
        for _ in range(3):
            proc = self.run(
                src, ["ping", "-n", "-q", "-c", "1", "-W", "2", self.addr(dst)],
                capture_output=True, check=False, timeout=10,
            )  # fmt: skip
            if proc.returncode == 0:
                return
        raise LabError(f"mesh {self.name}: host {dst} does not answer ping from host {src}")

    def down(self) -> None:
        """Remove everything of this mesh that exists; safe to call any number of times."""
        for ns in self.namespaces:
            netns.kill_ns_processes(ns)
        for proc in self._procs:
            netns.stop(proc, grace_s=2.0)
        self._procs.clear()
        for ns in self.namespaces:
            netns.ns_del(ns)

    @property
    def is_up(self) -> bool:
        return all(netns.ns_exists(ns) for ns in self.namespaces) and all(
            p.poll() is None for p in self._procs
        )
