"""One round of `tcpwizard conns`: observe the live connections, keep those the filters
name, judge each busy one. Used by the CLI (`conns`, `--watch`) and the TUI's connections
screen (one implementation)."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import ClassVar

from tcpwizard.advice.conns import DEFAULT_RATE_BPS, ConnDiagnosis, judge
from tcpwizard.advice.middlebox import located_in_conn
from tcpwizard.advice.rules.host_conns import host_conn_verdict
from tcpwizard.checks.sysctl import SysctlReader
from tcpwizard.exitcodes import ExitCode, UsageError
from tcpwizard.measure.observe.conns import ConnObservation, Owner, observe, owners
from tcpwizard.measure.observe.hostload import HostSampler, sample_host
from tcpwizard.measure.probes.hops import route_to
from tcpwizard.measure.probes.syntrace import syn_trace
from tcpwizard.measure.probes.syntrace_model import SynTrace
from tcpwizard.outcome import Outcome, exit_code

SYSCTLS = (
    "net.ipv4.tcp_rmem",
    "net.ipv4.tcp_wmem",
    "net.core.rmem_max",
    "net.core.wmem_max",
    "net.ipv4.tcp_window_scaling",
    "net.ipv4.tcp_sack",
)
OwnerKey = tuple[str, int, str, int]


@dataclass(frozen=True)
class ConnFilter:
    port: int | None = None  # local or remote
    address: str | None = None  # an address or a prefix (local or remote)
    process: str | None = None  # a pid, or part of the process name
    busy_only: bool = False

    def describe(self) -> tuple[str, ...]:
        out = []
        if self.port is not None:
            out.append(f"port {self.port}")
        if self.address:
            out.append(f"address {self.address}")
        if self.process:
            out.append(f"process {self.process}")
        if self.busy_only:
            out.append("busy only")
        return tuple(out)

    def network(self) -> ipaddress.IPv4Network | ipaddress.IPv6Network | None:
        if not self.address:
            return None
        try:
            return ipaddress.ip_network(self.address, strict=False)
        except ValueError:
            raise UsageError(
                f"--address: {self.address!r} is not an IP address or prefix"
            ) from None

    def keeps(
        self, obs: ConnObservation, owner: Owner | None, diag: ConnDiagnosis, net: object
    ) -> bool:
        k = obs.key
        if self.port is not None and self.port not in (k.local_port, k.remote_port):
            return False
        if net is not None and not any(
            ipaddress.ip_address(a) in net  # type: ignore[operator]
            for a in (k.local, k.remote)
        ):
            return False
        if self.process:
            if owner is None:
                return False
            wanted = self.process
            if not (str(owner.pid) == wanted or wanted.lower() in owner.name.lower()):
                return False
        return not (self.busy_only and diag.verdict is None)


@dataclass(frozen=True)
class ConnEntry:
    observation: ConnObservation
    owner: Owner | None
    diagnosis: ConnDiagnosis


@dataclass(frozen=True)
class ConnsReport:
    kind: ClassVar[str] = "conns"
    hostname: str
    interval_s: float
    total: int  # established connections seen (before filters)
    entries: tuple[ConnEntry, ...]
    filters: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    exit_code: ExitCode = ExitCode.OK

    @property
    def busy(self) -> tuple[ConnEntry, ...]:
        return tuple(e for e in self.entries if e.diagnosis.verdict is not None)


Observer = Callable[[float], tuple[ConnObservation, ...]]
OwnerFn = Callable[[], Mapping[OwnerKey, Owner]]


def _observe(interval_s: float) -> tuple[ConnObservation, ...]:
    return observe(interval_s, samples=max(2, round(interval_s * 10) + 1))


def conns_outcome(entries: tuple[ConnEntry, ...]) -> Outcome:
    """The limits the busy connections' verdicts name: one held back by something
    fixable makes the run a warning."""
    verdicts = (e.diagnosis.verdict for e in entries)
    return Outcome(limits=tuple(v.limiting_factor for v in verdicts if v is not None))


# The routers' quotes of this host's SYN toward one peer and port (measure/probes/syntrace.py),
# or None where it could not be probed; OSError (raw sockets, routing) for the note.
SynTracer = Callable[[str, int], SynTrace | None]


def syn_tracer(max_ttl: int = 30) -> SynTracer:
    """Probe with this host's own SYN options, hop by hop (root: raw sockets)."""

    def trace(address: str, port: int) -> SynTrace | None:
        # The route's MTU sets the MSS this host's SYN carries, as a connection's would.
        return syn_trace(address, port, route_to(address).mtu, max_ttl)

    return trace


def _located(
    diag: ConnDiagnosis,
    peer: tuple[str, int],
    tracer: SynTracer,
    traces: dict[tuple[str, int], SynTrace | None],
    notes: list[str],
) -> ConnDiagnosis:
    """A connection's `window-scaling` verdict checked against the routers' quotes of this
    host's SYN toward the same peer and port (`conns --hops`): a device that strips the
    option is named instead of the far end. One trace per peer and port."""
    if diag.verdict is None or diag.verdict.limiting_factor != "window-scaling":
        return diag
    if peer not in traces:
        try:
            traces[peer] = tracer(*peer)
        except OSError as exc:  # PermissionRequired included: the verdict stands, said why
            traces[peer] = None
            notes.append(f"SYN options per hop toward {peer[0]} port {peer[1]}: {exc}")
    trace = traces[peer]
    located = located_in_conn(diag.verdict, trace) if trace is not None else None
    if located is None:
        return diag
    return ConnDiagnosis(diag.role, *located)


def connections_report(
    flt: ConnFilter,
    interval_s: float = 1.0,
    sysctl_root: str = "/proc/sys",
    rate_bps: float = DEFAULT_RATE_BPS,
    observer: Observer = _observe,
    owner_fn: OwnerFn = owners,
    host_sampler: Callable[[], HostSampler] | None = None,
    tracer: SynTracer | None = None,
) -> ConnsReport:
    net = flt.network()
    reader = SysctlReader(sysctl_root)
    sysctls = {k: v for k in SYSCTLS if (v := reader.read_optional(k)) is not None}
    # The host's CPU and drops over the same interval (live connections only, unless given).
    sampler = host_sampler or (sample_host if observer is _observe else None)
    running = sampler() if sampler is not None else None
    observed = observer(interval_s)
    load = running.stop() if running is not None else None
    who = owner_fn()
    entries: list[ConnEntry] = []
    notes: list[str] = []
    traces: dict[tuple[str, int], SynTrace | None] = {}
    for obs in observed:
        k = obs.key
        owner = who.get((k.local, k.local_port, k.remote, k.remote_port))
        diag = judge(
            obs,
            sysctls,
            rate_bps,
            program=owner.name if owner else None,
            pid=owner.pid if owner else None,
        )
        diag = host_conn_verdict(diag, obs, load)
        if tracer is not None and diag.verdict is not None:
            diag = _located(diag, (k.remote, k.remote_port), tracer, traces, notes)
        if flt.keeps(obs, owner, diag, net):
            entries.append(ConnEntry(obs, owner, diag))
    # Busy first, fastest first; idle ones after, in address order.
    entries.sort(key=lambda e: (e.diagnosis.verdict is None, -e.observation.rate_mbps))
    if observed and not who:
        notes.append("no process owners visible (other users' sockets need root)")
    return ConnsReport(
        hostname=socket.gethostname(),
        interval_s=interval_s,
        total=len(observed),
        entries=tuple(entries),
        filters=flt.describe(),
        notes=tuple(notes),
        exit_code=exit_code(conns_outcome(tuple(entries))),
    )
