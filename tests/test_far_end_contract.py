"""Every far end in the registry keeps the contract (measure/farends/interface.py): it is a
`FarEnd`, declares abilities that agree with what it then does on loopback (real serve, a
real `iperf3 -s`, an HTTP server, an open port), and its fallback is registered. The walk
(`choose`) and the mid-run fallback (`fall_back`) are exercised on loopback too."""

from __future__ import annotations

import contextlib
import dataclasses
import shutil
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tcpwizard.measure.farends import registry
from tcpwizard.measure.farends.interface import (
    Abilities,
    FarEnd,
    FarEndError,
    TransferOptions,
)
from tcpwizard.measure.farends.iperf3_control import ONE_OFF, Iperf3Error
from tcpwizard.measure.model import Direction
from tcpwizard.measure.wire import spec
from tcpwizard.measure.wire.protocol import PeerUnavailable

from .loopback import free_port, local_iperf3
from .serve_helpers import running_server

NAMES = [e.name for e in registry.REGISTRY]
HAS_IPERF3 = shutil.which("iperf3") is not None


def _reach(**kw: object) -> registry.Reach:
    """A far end on loopback with every port closed unless given."""
    ports: dict[str, object] = {"serve_port": free_port(), "iperf3_port": free_port()}
    return registry.Reach("localhost", "127.0.0.1", **{**ports, **kw})  # type: ignore[arg-type]


class _Body(BaseHTTPRequestHandler):
    """Sends zeros until the client closes (the URL far end ends a download by closing)."""

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", str(1 << 34))
        self.end_headers()
        chunk = bytes(1 << 16)
        with contextlib.suppress(OSError):
            for _ in range(1 << 18):  # at most 16 GiB: bounded, far more than any test reads
                self.wfile.write(chunk)

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: the test reads the far end's results, not the server's log."""


@contextlib.contextmanager
def _http() -> Iterator[int]:
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Body)
    srv.daemon_threads = True
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        yield int(srv.server_address[1])
    finally:
        srv.shutdown()
        srv.server_close()
        t.join(timeout=5)


@contextlib.contextmanager
def _listening() -> Iterator[socket.socket]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(8)
        yield s


@contextlib.contextmanager
def _world(name: str) -> Iterator[registry.Reach]:
    """Loopback where the far end `name` answers."""
    if name == "serve":
        with running_server() as srv:
            yield _reach(serve_port=srv.port)
    elif name == "iperf3":
        if not HAS_IPERF3:
            pytest.skip("iperf3 not installed")
        with local_iperf3("-1") as (port, _):
            yield _reach(iperf3_port=port)
    elif name == "url":
        with _http() as port:
            yield _reach(url=f"http://127.0.0.1:{port}/big")
    elif name == "tcp-port":
        with _listening() as s:
            yield _reach(tcp_port=s.getsockname()[1])
    else:
        raise AssertionError(f"add a loopback world for the new far end {name!r}")


def test_the_registry_is_well_formed() -> None:
    assert len(set(NAMES)) == len(NAMES), "one entry per far end"
    for e in registry.REGISTRY:
        assert e.fallback is None or e.fallback in NAMES, e
        assert e.fallback != e.name, e
    last = registry.LAST_RESORT
    assert last.fallback is None and last.named_by is None and not last.asked_by_first_transfer
    # The walk starts with the far end that gives the most evidence.
    walked = [e.name for e in registry.REGISTRY if e.named_by is None]
    assert walked == ["serve", "iperf3", "tcp-port"]


def _coherent(a: Abilities) -> None:
    assert set(a.modes_up) <= set(spec.MODES) and set(a.modes_down) <= set(spec.MODES)
    if a.drs_channel:  # serve's receiver sizes the far end's window: DRS uploads
        assert "drs" in a.modes_up
    if a.both_at_once:
        assert a.modes_up and a.modes_down
    if a.down_sizes_itself:
        assert "drs" in a.modes_down
    if a.steady_end:
        assert a.transfers


def _one_way(a: Abilities) -> TransferOptions:
    """The shortest transfer the far end can take part in: one autotune mode, one way."""
    direction: Direction = "up" if "autotune" in a.modes_up else "down"
    return TransferOptions(
        modes=("autotune",), direction=direction, duration_s=1.0, sample_interval_s=0.1
    )


@pytest.mark.parametrize("name", NAMES)
def test_every_far_end_keeps_the_contract(name: str) -> None:
    with _world(name) as reach:
        got = registry.entry(name).answer(reach)
        assert not isinstance(got, str), got
        far, _notes = got
        try:
            assert isinstance(far, FarEnd)
            assert far.kind == name
            assert far.address == "127.0.0.1" and far.describe()
            a = far.abilities
            assert isinstance(a, Abilities)
            _coherent(a)
            missing = far.missing()
            assert all(isinstance(m, str) and m for m in missing)
            # What it cannot do is said: only a far end with every ability misses nothing.
            everything = a.facts and a.reflector and a.drs_channel and a.modes_down
            assert bool(missing) != bool(everything), missing

            facts, why = far.facts()
            assert (facts is not None) == a.facts, why
            if not a.reflector:
                with pytest.raises(PeerUnavailable):
                    far.available(1e9, 1e-3)
                with pytest.raises(PeerUnavailable):
                    far.idle_echo(5)
            else:
                # Loopback loses nothing: every probe sent comes back.
                idle = far.idle_echo(5)
                assert (idle.sent, idle.lost, idle.method) == (5, 0, "udp-echo")

            if not a.transfers:
                with pytest.raises(PeerUnavailable):
                    far.transfer(_one_way(a))
                return
            opts = _one_way(a)
            result = far.transfer(opts)
            assert [(m.mode, m.direction) for m in result.modes] == [("autotune", opts.direction)]
            m = result.modes[0]
            assert m.error is None and m.bytes > 0, m.error
            # A handshake, once a transfer has run: the far end's TCP options are known.
            assert far.handshake() is not None
        finally:
            far.close()


def test_a_far_end_asked_by_its_first_transfer_is_not_asked_when_chosen() -> None:
    """Choosing iperf3 costs a one-off server nothing: no connection reaches its port."""
    for e in registry.REGISTRY:
        if not e.asked_by_first_transfer:
            continue
        with _listening() as s:
            port = s.getsockname()[1]
            got = e.answer(_reach(iperf3_port=port, serve_port=port, tcp_port=None))
            assert not isinstance(got, str)
            s.setblocking(False)
            with pytest.raises(BlockingIOError):
                s.accept()
            got[0].close()


def test_the_walk_takes_the_best_far_end_that_answers() -> None:
    reach = _reach()
    far, notes = registry.choose(reach)
    assert far.kind == "iperf3", "iperf3 is taken unasked once serve does not answer"
    assert notes and notes[0].startswith(f"no tcpwizard serve at localhost port {reach.serve_port}")
    far, notes = registry.choose(reach, "serve")
    assert far.kind == "tcp-port" and len(notes) == 1, "an explicit serve, else the last resort"
    far, notes = registry.choose(reach, "iperf3")
    assert far.kind == "iperf3" and notes == []
    with running_server() as srv:
        far, notes = registry.choose(_reach(serve_port=srv.port))
        try:
            assert far.kind == "serve" and notes == []
        finally:
            far.close()
    with _http() as port:
        far, _ = registry.choose(_reach(url=f"http://127.0.0.1:{port}/"), "auto")
        assert far.kind == "url", "a URL names the web server whatever the walk would take"


def _first_transfer_error(far: FarEnd) -> FarEndError:
    try:
        far.transfer(_one_way(far.abilities))
    except FarEndError as exc:
        return exc
    raise AssertionError("the transfer did not fail")


@pytest.mark.skipif(not HAS_IPERF3, reason="iperf3 not installed")
def test_an_absent_iperf3_falls_back_to_the_port_in_auto_mode_only() -> None:
    with _listening() as s:
        reach = _reach(tcp_port=s.getsockname()[1])  # nothing at the iperf3 port
        far, _ = registry.choose(reach, "auto")
        exc = _first_transfer_error(far)
        assert exc.absent
        swap = registry.fall_back(far, exc, reach, "auto")
        assert swap is not None
        port_far, why = swap
        assert port_far.kind == registry.entry("iperf3").fallback == "tcp-port"
        assert why == f"no iperf3 at localhost port {reach.iperf3_port} ({exc})"
        assert port_far.handshake() is not None, "the open port's handshake is read"
        assert registry.fall_back(far, exc, reach, "iperf3") is None, "an explicit choice"
        busy = Iperf3Error("the iperf3 server is busy running a test", "busy")
        assert registry.fall_back(far, busy, reach, "auto") is None, "busy is the answer"


@pytest.mark.skipif(not HAS_IPERF3, reason="iperf3 not installed")
def test_a_one_off_iperf3_says_why_the_second_transfer_failed() -> None:
    with local_iperf3("-1") as (port, proc):
        far, _ = registry.choose(_reach(iperf3_port=port), "iperf3")
        first = far.transfer(_one_way(far.abilities))
        assert first.modes[0].error is None
        proc.wait(timeout=10)  # a one-off server exits after its results
        exc = _first_transfer_error(far)
        assert exc.absent, "the port is closed now"
        assert ONE_OFF in exc.later(), exc.later()


def test_the_pipeline_tunes_downloads_by_ability_not_by_name() -> None:
    """Downloads from a far end that cannot be told a window are tuned by our receiver's
    DRS alone: the ability decides, whatever the far end is called."""
    from tcpwizard.checks.model import BdpTarget
    from tcpwizard.run import CheckRequest, default_modes

    target = BdpTarget(0.05, 1e9, "measured")
    req = CheckRequest("h")
    with _http() as port:
        web, _ = registry.choose(_reach(url=f"http://127.0.0.1:{port}/"))
    assert web.abilities.down_sizes_itself
    assert default_modes(req, web, target)[1] == ("autotune", "drs")
    far, _ = registry.choose(_reach(), "iperf3")
    assert not far.abilities.down_sizes_itself
    assert default_modes(req, far, target)[1] == ("autotune", "static")
    far.abilities = dataclasses.replace(far.abilities, down_sizes_itself=True)  # type: ignore[misc]
    assert default_modes(req, far, target)[1] == ("autotune", "drs")
