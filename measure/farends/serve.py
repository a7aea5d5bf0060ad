"""`tcpwizard serve` as the far end: every ability (its own settings, the probe reflector,
transfers both ways with the DRS channel, the available bandwidth), over one control
connection held from choosing the far end to the last transfer."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import TYPE_CHECKING

from tcpwizard.checks.facts import FactsError, HostFacts, facts_from_json
from tcpwizard.measure.engine.transfer import run_transfer
from tcpwizard.measure.farends.interface import (
    NO_HOOKS,
    Abilities,
    FarEndKind,
    TransferHooks,
    TransferOptions,
)
from tcpwizard.measure.model import Direction, IdleLoss, ModeResult, PathEstimate, TransferResult
from tcpwizard.measure.observe.handshake import HandshakeFacts
from tcpwizard.measure.probes.probe import Progress as ProbeProgress
from tcpwizard.measure.probes.probe import probe
from tcpwizard.measure.wire import spec
from tcpwizard.measure.wire.control import ControlClient
from tcpwizard.measure.wire.protocol import AuthFailed, PeerSilent, PeerUnavailable, ProtocolError

if TYPE_CHECKING:
    from tcpwizard.measure.probes.availbw import AvailBandwidth

# serve answers its hello at once; a late one (a starved serve) is waited for while serve's
# kernel shows it took ours (measure/wire/control.py, STARVED_HELLO_S).
HELLO_TIMEOUT_S = 3.0
TRANSFER_TIMEOUT_S = 5.0  # a transfer request's answer (serve prepares its sockets first)
# serve's answer to a stream's arrival report (up), or to a stream's probe_train (down)
AVAIL_TIMEOUT_S = 5.0


def _fresh(c: ControlClient, last_used: float) -> bool:
    """Open, and idle for less than half serve's idle timeout (serve may close it after)."""
    return not c.closed and time.monotonic() - last_used <= c.idle_timeout_s / 2


class ServeFar:
    """`tcpwizard serve`. A check holds one control connection to it from choosing the far
    end to the last transfer: each new one would cost a connect, a hello (and the secret's
    round trip), about 0.3 s on a 100 ms path, four times over."""

    kind: FarEndKind = "serve"
    abilities = Abilities(
        True, True, spec.MODES, spec.MODES, True, steady_end=True, both_at_once=True
    )

    def __init__(
        self,
        address: str,
        port: int,
        secret: bytes | None,
        host: str,
        control: ControlClient | None = None,
    ) -> None:
        self.address, self.port, self.secret, self.host = address, port, secret, host
        self._handshake: HandshakeFacts | None = None
        self._control = control
        self._last_used = time.monotonic()
        self._second: ControlClient | None = None
        self._second_thread: threading.Thread | None = None
        self._second_at = 0.0
        self._silent: str | None = None  # a request serve took and never answered

    @classmethod
    def reach(
        cls, address: str, port: int, secret: bytes | None, host: str, *, both_ways: bool = False
    ) -> ServeFar | str:
        """serve at address:port with its control connection open, else why not
        (AuthFailed propagates: a serve that wants a secret is there, and the user must be
        told). both_ways: the transfers will run both ways at once, so the way back's own
        connection is opened now, in the background."""
        try:
            # check asks for serve's settings first: that request goes with the hello.
            control = ControlClient(address, port, secret, timeout=HELLO_TIMEOUT_S, ask_audit=True)
        except AuthFailed:
            raise
        except (PeerUnavailable, ProtocolError) as exc:
            return str(exc)
        far = cls(address, port, secret, host, control)
        if both_ways:
            far._open_second()
        return far

    @property
    def notes(self) -> tuple[str, ...]:
        """What reaching serve showed: a hello answered late while serve's kernel took ours
        at once means serve's process waits for a CPU."""
        c = self._control
        if c is None or c.hello_wait_s <= c.timeout:
            return ()
        return (
            f"serve at {self.host} answered its hello after {c.hello_wait_s:.1f} s though its "
            "kernel acknowledged ours at once: serve's process waits for a CPU (a CPU quota "
            "or a busy host)",
        )

    def silent(self) -> str | None:
        """serve answered its hello, then took a request and answered nothing in time (or
        answered the hello itself late while its kernel took ours at once): its process
        does not get to run, whatever the network does."""
        return self._silent or next(iter(self.notes), None)

    def _open_second(self) -> None:
        """Connect the way back's control connection while the probe runs: opened only when
        both ways start, it would start the way back a connect and a hello (and the secret's
        round trip) after the way there, and the check would wait for those."""

        def connect() -> None:
            with contextlib.suppress(PeerUnavailable, ProtocolError, AuthFailed, OSError):
                self._second = ControlClient(
                    self.address, self.port, self.secret, timeout=HELLO_TIMEOUT_S
                )
                self._second_at = time.monotonic()

        self._second_thread = threading.Thread(target=connect, name="control-back", daemon=True)
        self._second_thread.start()

    def _take_second(self) -> ControlClient | None:
        """The connection _open_second made, if it is there and still fresh."""
        if self._second_thread is not None:
            self._second_thread.join()
            self._second_thread = None
        c, self._second = self._second, None
        if c is not None and not _fresh(c, self._second_at):
            c.close()
            return None
        return c

    @contextmanager
    def control(self, timeout: float) -> Iterator[ControlClient]:
        """The open control connection, or a new one where serve may have closed it: it
        idled for half serve's idle timeout (a long hop trace in between), or an error
        ended it. One that fails during use is dropped: serve closes after an error."""
        c = self._control
        if c is None or not _fresh(c, self._last_used):
            if c is not None:
                c.close()
            self._control = None
            try:
                c = ControlClient(self.address, self.port, self.secret, timeout)
            except PeerSilent as exc:
                # serve answered its hello before; a new connection's hello went unanswered
                # while its kernel took ours: the same starved process as a request unanswered.
                self._silent = self._silent or str(exc)
                raise
            self._control = c
        c.timeout = timeout
        try:
            yield c
        except BaseException as exc:
            if isinstance(exc, PeerSilent):
                self._silent = self._silent or str(exc)
            c.close()
            self._control = None
            raise
        finally:
            self._last_used = time.monotonic()

    def close(self) -> None:
        if self._control is not None:
            self._control.close()
            self._control = None
        second = self._take_second()
        if second is not None:
            second.close()

    def describe(self) -> str:
        return f"tcpwizard serve at port {self.port}"

    def facts(self) -> tuple[HostFacts | None, str | None]:
        try:
            with self.control(3.0) as client:
                self._handshake = client.handshake()
                raw = client.peer_audit()
        except AuthFailed:
            raise
        except PeerUnavailable as exc:
            return None, f"no tcpwizard serve at {self.host} port {self.port} ({exc})"
        except ProtocolError as exc:
            return None, f"the far end's serve did not give its audit ({exc})"
        facts = raw.get("facts")
        if raw.get("source") != "tcpwizard.checks" or facts is None:
            return None, "the far end sent no usable audit (an older serve?)"
        try:
            return facts_from_json(facts), None
        except FactsError as exc:
            return None, f"the far end's audit is malformed: {exc}"

    def handshake(self) -> HandshakeFacts | None:
        return self._handshake

    def probe(self, budget_s: float, progress: ProbeProgress | None = None) -> PathEstimate:
        timeout = max(0.5, min(2.0, budget_s / 2))
        try:
            with self.control(timeout) as client:
                return probe(
                    self.address, self.port, budget_s=budget_s, progress=progress, control=client
                )
        except PeerUnavailable:
            # serve went away since it answered: the probe's own fallbacks (peerless) decide.
            return probe(
                self.address, self.port, secret=self.secret, budget_s=budget_s, progress=progress
            )

    def transfer(self, options: TransferOptions, hooks: TransferHooks = NO_HOOKS) -> TransferResult:
        if options.at_once and options.direction == "both":
            return self._both_at_once(options, hooks)
        with self.control(TRANSFER_TIMEOUT_S) as client:
            return run_transfer(self.address, self.port, options, hooks, control=client)

    def _both_at_once(self, options: TransferOptions, hooks: TransferHooks) -> TransferResult:
        """The way back on a second control connection of its own, in a thread, while the
        way there runs on the check's connection; the modes in the order a series gives."""
        there = replace(options, direction="up", reverse_modes=None, at_once=False)
        back = replace(
            options, direction="down", modes=options.modes_for("down"), reverse_modes=None,
            at_once=False,
        )  # fmt: skip
        got: list[TransferResult] = []
        failed: list[str] = []

        def run_back() -> None:
            second = self._take_second()
            if second is not None:
                second.timeout = TRANSFER_TIMEOUT_S
            try:
                result = run_transfer(
                    self.address, self.port, back, hooks,
                    secret=self.secret, timeout=TRANSFER_TIMEOUT_S, control=second,
                )  # fmt: skip
                got.append(result)
            except (PeerUnavailable, ProtocolError) as exc:
                failed.append(str(exc))
            finally:
                if second is not None:
                    second.close()

        thread = threading.Thread(target=run_back, name="transfer-back", daemon=True)
        thread.start()
        try:
            up = self.transfer(there, hooks)
        finally:
            thread.join()
        down_modes = (
            got[0].modes
            if got
            else tuple(
                ModeResult.failed(m, "down", back.streams, failed[0] if failed else "no result")
                for m in back.modes
            )
        )
        return replace(
            up,
            modes=(*up.modes, *down_modes),
            direction="both",
            at_once=True,
            left_out=(*up.left_out, *(got[0].left_out if got else ())),
            peer_congestion_control=up.peer_congestion_control
            or (got[0].peer_congestion_control if got else ""),
        )

    def available(
        self,
        capacity_bps: float,
        rtt_s: float,
        random_loss: float = 0.0,
        direction: Direction = "up",
    ) -> AvailBandwidth:
        from tcpwizard.measure.probes.availbw import measure_available
        from tcpwizard.measure.probes.availbw_down import measure_available_down

        measure = measure_available if direction == "up" else measure_available_down
        with self.control(AVAIL_TIMEOUT_S) as client:
            udp = client.udp_socket()
            try:
                return measure(client, udp, capacity_bps, rtt_s, random_loss=random_loss)
            finally:
                udp.close()

    def idle_echo(self, count: int) -> IdleLoss:
        from tcpwizard.measure.probes import rtt

        with self.control(AVAIL_TIMEOUT_S) as client:
            udp = client.udp_socket()
            try:
                stats = rtt.udp_echo(
                    udp, client.udp_token, count=count, interval=rtt.FOLLOW_UP_INTERVAL_S
                )
            finally:
                udp.close()
        got = stats.samples if stats is not None else 0
        return IdleLoss(count, count - got, "udp-echo")

    def missing(self) -> tuple[str, ...]:
        return ()
