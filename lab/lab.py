"""The Lab: build, use and remove two namespaces joined through an emulated bottleneck.

    with Lab(LabSpec.symmetric(100e6, 0.050, name="demo")) as lab:
        lab.run("b", ["iperf3", "-s", "-1", "-D"])
        lab.run("a", ["iperf3", "-c", lab.addr_b, "-t", "3"])

up() builds; down() removes everything that exists (idempotent, also for half-built labs and
for labs whose emulator was killed). Lab.attach(name) finds a lab built by another process.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from typing import Any, Self

from tcpwizard.advice.guard import LINE_RATE_ENV
from tcpwizard.exitcodes import PermissionRequired, UsageError
from tcpwizard.lab import hops, middlebox, netns, policer
from tcpwizard.lab.netem import build_netem, netem_available
from tcpwizard.lab.netns import LabError
from tcpwizard.lab.spec import SIDES, Addresses, LabSpec, LinkSpec, Side, addresses_for
from tcpwizard.lab.state import DEFAULT_STATE_DIR, LabRecord, StateDir
from tcpwizard.lab.updown import UpDown

IFNAME = "wan0"
# Measured on the 2-core development machine (docs/bench-calibrate.md): with GSO
# super-packets (lab/gso.py) the delay line carried 5 Gbit/s at 10-100 ms within the
# benchmark's bound while other work shared the cores; 10 Gbit/s only when the machine was
# quiet (0.95-0.965 of the rate; 0.76-0.92 at load 3-4). Above the accepted rate the delay
# line itself would become the bottleneck, so it refuses. (Packet by packet: 1 Gbit/s.)
DELAYLINE_MAX_RATE_BPS = 5e9
TXQUEUELEN = 10000  # the TUN ring: a cwnd burst must fit while the emulator is busy


def require_root() -> None:
    if os.geteuid() != 0:
        raise PermissionRequired("the lab needs root (network namespaces, TUN devices): use sudo")


class Lab(UpDown):
    def __init__(
        self,
        spec: LabSpec,
        *,
        state_dir: str = DEFAULT_STATE_DIR,
        owner_pid: int = 0,
        seed: int | None = None,
        max_rate_bps: float = DELAYLINE_MAX_RATE_BPS,
        gso: bool = True,
    ) -> None:
        """max_rate_bps: refuse delay-line rates above it (the benchmark raises it to find
        the emulator's own limit). gso: the delay line moves TCP super-packets whole
        (lab/gso.py); False: packet by packet, as the kernel segments them."""
        if not spec.name:
            raise UsageError("a Lab needs a name (LabSpec.name)")
        spec.validate()
        self.spec = spec
        self.name = spec.name
        self.ns_a = f"{spec.name}-a"
        self.ns_b = f"{spec.name}-b"
        self.ifname = IFNAME
        self.owner_pid = owner_pid
        self.seed = seed
        self.max_rate_bps = max_rate_bps
        self.gso = gso
        self.state = StateDir(state_dir)
        self.backend = spec.backend
        self.pid = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self._addrs: Addresses = hops.addresses(spec) if spec.hops else addresses_for(spec.name)

    # -- addresses and namespaces -------------------------------------------------------
    @property
    def addr_a(self) -> str:
        return self._addrs.a4

    @property
    def addr_b(self) -> str:
        return self._addrs.b4

    @property
    def addr6_a(self) -> str:
        return self._addrs.a6

    @property
    def addr6_b(self) -> str:
        return self._addrs.b6

    def ns(self, side: Side) -> str:
        return self.ns_a if _side(side) == "a" else self.ns_b

    def addr(self, side: Side) -> str:
        return self.addr_a if _side(side) == "a" else self.addr_b

    def addr6(self, side: Side) -> str:
        return self.addr6_a if _side(side) == "a" else self.addr6_b

    @property
    def rtt_s(self) -> float:
        return self.spec.rtt_s

    # -- running things inside -----------------------------------------------------------
    def command(self, side: Side, argv: list[str]) -> list[str]:
        # Every program in the lab learns the line rate the lab configured: tcpwizard's
        # reports bound their rates by it (advice/guard.py); other programs ignore it.
        env = f"{LINE_RATE_ENV}={self.line_rate_mbps:g}"
        return ["ip", "netns", "exec", self.ns(side), "env", env, *argv]

    @property
    def line_rate_mbps(self) -> float:
        """The faster of the bottleneck's two directions, Mbit/s: no rate either way
        can exceed it."""
        return max(self.spec.forward.rate_bps, self.spec.reverse.rate_bps) / 1e6

    def run(self, side: Side, argv: list[str], **kw: Any) -> subprocess.CompletedProcess[Any]:
        """subprocess.run inside host `side`; keyword arguments pass through."""
        return subprocess.run(self.command(side, argv), **kw)

    def popen(self, side: Side, argv: list[str], **kw: Any) -> subprocess.Popen[Any]:
        """subprocess.Popen inside host `side`; keyword arguments pass through."""
        return subprocess.Popen(self.command(side, argv), **kw)

    def processes(self) -> set[int]:
        """Pids of the programs running inside either host."""
        return set(netns.ns_pids(self.ns_a)) | set(netns.ns_pids(self.ns_b))

    def kill_processes(self, keep: set[int] | frozenset[int] = frozenset()) -> None:
        """End the programs running inside either host, except the pids in `keep`."""
        for ns in (self.ns_a, self.ns_b):
            netns.kill_ns_processes(ns, keep=keep)

    def sysctl(self, side: Side, key: str) -> str:
        return netns.read_sysctl(self.ns(side), key)

    def set_sysctl(self, side: Side, key: str, value: str) -> None:
        netns.write_sysctl(self.ns(side), key, value)

    def stats(self, timeout_s: float = 2.0) -> dict[str, dict[str, int]]:
        """The delay line's per-direction counters (packets, losses, queue drops)."""
        if self.backend != "delayline" or not self.pid:
            raise LabError(f"lab {self.name}: counters exist only for the delayline backend")
        path = self.state.file(self.name, ".stats.json")
        before = os.stat(path).st_mtime_ns if os.path.exists(path) else 0
        os.kill(self.pid, signal.SIGUSR1)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if os.path.exists(path) and os.stat(path).st_mtime_ns != before:
                with open(path) as f:
                    data: dict[str, dict[str, int]] = json.load(f)
                return data
            time.sleep(0.01)
        raise LabError(f"lab {self.name}: the delay line did not report its counters")

    # -- life cycle ------------------------------------------------------------------------
    def _record(self) -> LabRecord:
        return LabRecord(
            name=self.name,
            backend=self.backend,
            ns_a=self.ns_a,
            ns_b=self.ns_b,
            spec=self.spec,
            pid=self.pid,
            owner_pid=self.owner_pid,
            created=time.time(),
        )

    def up(self) -> Self:
        require_root()
        sweep_stale(self.state.path)
        if self.state.read(self.name) is not None:
            raise UsageError(
                f"lab {self.name} is already up (tcpwizard lab down --name {self.name})"
            )
        self.backend = resolve_backend(self.spec)
        if self.backend == "delayline":
            for what, link in (("a->b", self.spec.forward), ("b->a", self.spec.reverse)):
                if link.rate_bps > self.max_rate_bps:
                    raise UsageError(
                        f"{what}: {link.rate_bps / 1e6:g} Mbit/s is above what the user-space "
                        f"delay line carries on this machine ({self.max_rate_bps / 1e6:g} "
                        "Mbit/s); it would be the bottleneck itself"
                    )
        for ns in (self.ns_a, self.ns_b, *hops.routers(self.spec)):
            if netns.ns_exists(ns):
                raise UsageError(f"network namespace {ns} already exists; pick another --name")
        created: list[str] = []
        try:
            netns.ns_add(self.ns_a)
            created.append(self.ns_a)
            self.state.write(self._record())  # from here on, `down --all` can find it
            netns.ns_add(self.ns_b)
            created.append(self.ns_b)
            for ns in (self.ns_a, self.ns_b):
                netns.ip("link", "set", "lo", "up", ns=ns)
            if self.spec.hops:
                hops.create(self)
            if self.backend == "delayline":
                self._start_delayline()
            else:
                build_netem(self.spec, self.ns_a, self.ns_b, self.ifname)
            self.state.write(self._record())
            self._configure()
            if self.spec.hops:
                hops.configure(self)
            policer.apply(self)
            if self.spec.middlebox is not None:
                middlebox.router_or_hosts(
                    self.spec.middlebox, self.ns_a, self.ns_b, tuple(hops.routers(self.spec))
                )
            self._wait_reachable()
        except BaseException:
            if len(created) == 2:
                self.down()
            else:
                # Lost a race for the name with another process: remove only what is ours.
                for ns in created:
                    netns.ns_del(ns)
                if created:
                    self.state.remove(self.name)
            raise
        return self

    def _start_delayline(self) -> None:
        def params(link: LinkSpec) -> str:
            return json.dumps(
                {
                    "rate_bps": link.rate_bps,
                    "delay_s": link.delay_s,
                    "jitter_s": link.jitter_s,
                    "loss": link.loss,
                    "queue_bytes": self.spec.queue_bytes(link),
                }
            )

        argv = [
            sys.executable, "-m", "tcpwizard.lab.delayline",
            "--name", self.name, "--ns-a", self.ns_a, "--ns-b", hops.first_peer(self),
            "--ifname", self.ifname, "--mtu", str(self.spec.mtu),
            "--forward", params(self.spec.forward), "--reverse", params(self.spec.reverse),
            "--state-file", self.state.file(self.name),
            "--stats-file", self.state.file(self.name, ".stats.json"),
        ]  # fmt: skip
        if self.seed is not None:
            argv += ["--seed", str(self.seed)]
        if not self.gso:
            argv += ["--gso", "off"]
        if self.owner_pid:
            argv += ["--owner-pid", str(self.owner_pid)]
        for ns in hops.routers(self.spec) + ([self.ns_b] if self.spec.hops else []):
            argv += ["--extra-ns", ns]  # removed with the lab when its owner is gone
        with open(self.state.file(self.name, ".log"), "ab") as log:
            # Own session: survives the CLI that started it and its terminal's ^C.
            self._proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log,
                start_new_session=True, close_fds=True,
            )  # fmt: skip
        self.pid = self._proc.pid
        self.state.write(self._record())
        if not netns.said_ready(self._proc):
            raise LabError(f"lab {self.name}: the delay line did not start; {self._log_tail()}")

    def _log_tail(self) -> str:
        try:
            with open(self.state.file(self.name, ".log")) as f:
                lines = f.read().strip().splitlines()
        except FileNotFoundError:
            lines = []
        return lines[-1] if lines else "no message"

    def _configure(self) -> None:
        dev = self.ifname
        for side in SIDES:
            ns = self.ns(side)
            # No IPv6 link-local/DAD chatter: it would cross the emulated link as noise.
            netns.ip("link", "set", dev, "addrgenmode", "none", ns=ns, check=False)
            netns.ip("link", "set", dev, "mtu", str(self.spec.mtu), "txqueuelen", str(TXQUEUELEN),
                     ns=ns)  # fmt: skip
            netns.ip("addr", "add", f"{self.addr(side)}/{self._addrs.prefix4}", "dev", dev, ns=ns)
            netns.ip("-6", "addr", "add", f"{self.addr6(side)}/{self._addrs.prefix6}", "dev", dev,
                     "nodad", ns=ns)  # fmt: skip
            netns.ip("link", "set", dev, "up", ns=ns)
            for key, value in self.spec.sysctls(side):
                netns.write_sysctl(ns, key, value)

    def _wait_reachable(self) -> None:
        timeout = max(2, round(self.rtt_s * 4 + 1.5))
        for _ in range(3):
            proc = self.run(
                "a", ["ping", "-n", "-q", "-c", "1", "-W", str(timeout), self.addr_b],
                capture_output=True, check=False, timeout=timeout + 5,
            )  # fmt: skip
            if proc.returncode == 0:
                return
            lossless = not any(h.loss for h in self.spec.hops)
            if self.spec.forward.loss == 0 and self.spec.reverse.loss == 0 and lossless:
                break
        raise LabError(f"lab {self.name}: b ({self.addr_b}) does not answer ping from a")

    def down(self) -> None:
        """Remove everything of this lab that exists. Safe to call any number of times."""
        record = self.state.read(self.name)
        pids = {self.pid, record.pid if record else 0} - {0}
        for pid in pids:
            if netns.is_delayline_of(pid, self.name):
                netns.terminate(pid)
        if self._proc is not None:
            try:
                self._proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
            self._proc = None
        for ns in (self.ns_a, self.ns_b):
            netns.kill_ns_processes(ns)
            netns.ns_del(ns)
        hops.teardown(self)
        self.state.remove(self.name)
        self.pid = 0

    @property
    def is_up(self) -> bool:
        if not (netns.ns_exists(self.ns_a) and netns.ns_exists(self.ns_b)):
            return False
        return self.backend != "delayline" or netns.is_delayline_of(self.pid, self.name)

    @classmethod
    def attach(cls, name: str, state_dir: str = DEFAULT_STATE_DIR) -> Lab:
        """The lab called `name` that some process built earlier."""
        record = StateDir(state_dir).read(name)
        if record is None:
            raise UsageError(f"no lab named {name} (tcpwizard lab status lists them)")
        lab = cls(record.spec, state_dir=state_dir, owner_pid=record.owner_pid)
        lab.backend = record.backend
        lab.pid = record.pid
        return lab


def _side(side: str) -> Side:
    if side == "a":
        return "a"
    if side == "b":
        return "b"
    raise UsageError(f"host {side!r}: a lab has hosts a and b")


def resolve_backend(spec: LabSpec) -> str:
    if spec.backend == "delayline":
        return "delayline"
    has_netem = netem_available()
    if spec.backend == "netem" and not has_netem:
        raise UsageError("this kernel has no sch_netem; use --backend delayline (or auto)")
    return "netem" if has_netem else "delayline"


def lab_health(record: LabRecord) -> str:
    """'up', or why the lab is stale."""
    for ns in (record.ns_a, record.ns_b):
        if not netns.ns_exists(ns):
            return f"namespace {ns} missing"
    if record.backend == "delayline" and not netns.is_delayline_of(record.pid, record.name):
        return "delay line not running"
    if record.owner_pid and not netns.pid_alive(record.owner_pid):
        return f"owner process {record.owner_pid} exited"
    return "up"


def sweep_stale(state_dir: str = DEFAULT_STATE_DIR, min_age_s: float = 10.0) -> list[str]:
    """Remove labs that are broken or orphaned; returns their names.

    Labs younger than min_age_s are left alone: another process may be building them.
    """
    removed = []
    state = StateDir(state_dir)
    for record in state.records():
        if time.time() - record.created < min_age_s:
            continue
        if lab_health(record) != "up":
            attached = Lab(record.spec, state_dir=state_dir, owner_pid=record.owner_pid)
            attached.backend = record.backend
            attached.pid = record.pid
            attached.down()
            removed.append(record.name)
    return removed


def down_all(state_dir: str = DEFAULT_STATE_DIR) -> list[str]:
    names = []
    for record in StateDir(state_dir).records():
        Lab.attach(record.name, state_dir).down()
        names.append(record.name)
    return names
