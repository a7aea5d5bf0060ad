"""Test transfers through serve (TransferService) over loopback: every mode, both
directions, the JSON contract, bad requests, and peers that vanish mid-transfer."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import replace

import pytest

from tcpwizard.exitcodes import ExitCode
from tcpwizard.main import main
from tcpwizard.measure.engine.transfer import run_transfer
from tcpwizard.measure.farends.interface import TransferHooks, TransferOptions
from tcpwizard.measure.serve.server import Server
from tcpwizard.measure.wire.control import ControlClient
from tcpwizard.measure.wire.protocol import ProtocolError
from tcpwizard.measure.wire.spec import MAX_STREAMS
from tcpwizard.output.measure_json import transfer_json

from .loopback import free_port
from .serve_helpers import raw_conn, read_lines, running_server, send_line


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    with running_server() as srv:
        yield srv


def test_every_mode_both_directions(server: Server) -> None:
    opts = TransferOptions(
        modes=("untuned", "autotune", "static", "overprovisioned", "drs"),
        streams=2,
        direction="both",
        duration_s=0.3,
        static_request=1 << 20,
        sample_interval_s=0.05,
    )
    res = run_transfer("127.0.0.1", server.port, opts)
    assert [(m.mode, m.direction) for m in res.modes] == [
        (m, d) for d in ("up", "down") for m in opts.modes
    ]
    for m in res.modes:
        assert m.error is None, (m.mode, m.direction, m.error)
        assert m.throughput_mbps > 100, (m.mode, m.direction)
        assert m.streams == 2 and m.samples
        assert m.samples[-1].tcp_info is not None  # from the sender, whichever end it is
        assert m.rcv_autotuning == (m.mode == "autotune")
        assert m.max_buffer_bytes > 0 and m.mbps_per_mb > 0
    drs = [m for m in res.modes if m.mode == "drs"]
    assert all(any(s.drs_rtt_ms is not None for s in m.samples) for m in drs)
    untuned = [m for m in res.modes if m.mode == "untuned"]
    assert all(m.max_buffer_bytes == 2 * 2 * 65536 for m in untuned)
    doc = transfer_json(res)
    json.dumps(doc, allow_nan=False)
    for key in ("mode", "streams", "throughput_mbps", "max_buffer_bytes", "retransmits", "samples"):
        assert key in doc["modes"][0]
    assert doc["direction"] == "both"


def test_the_most_streams_each_with_drs(server: Server) -> None:
    """MAX_STREAMS streams both ways, DRS on each (its own SBUF channel), the byte count
    split over all of them, and both hosts' per-core CPU sampled."""
    n = MAX_STREAMS
    opts = TransferOptions(
        modes=("drs",), streams=n, direction="both", duration_s=None, nbytes=n * 4_000_000
    )
    res = run_transfer("127.0.0.1", server.port, opts)
    assert [(m.mode, m.direction) for m in res.modes] == [("drs", "up"), ("drs", "down")]
    for m in res.modes:
        assert m.error is None, (m.direction, m.error)
        assert m.streams == n and m.bytes == n * 4_000_000
        assert any(s.drs_rtt_ms is not None for s in m.samples)
        # Buffers summed over the streams: DRS starts each at the stock 64 KiB (doubled).
        assert m.max_buffer_bytes >= n * 2 * 65536
        for load in (m.sender_load, m.receiver_load):
            assert load is not None and load.cores


def test_the_way_back_runs_its_own_modes(server: Server) -> None:
    """`check`'s default: every mode up, autotune alone down."""
    opts = TransferOptions(
        modes=("untuned", "drs"), direction="both", reverse_modes=("autotune",), duration_s=0.3
    )
    res = run_transfer("127.0.0.1", server.port, opts)
    assert [(m.mode, m.direction) for m in res.modes] == [
        ("untuned", "up"),
        ("drs", "up"),
        ("autotune", "down"),
    ]
    assert all(m.error is None and m.throughput_mbps > 0 for m in res.modes)


def test_a_way_autotuning_filled_skips_its_tuned_mode(server: Server) -> None:
    """With the line a sure probe measured (here far below what loopback carries), DRS is
    left out after autotuning held it, and the result says why; with a line above
    loopback's rate it runs."""
    opts = TransferOptions(
        modes=("autotune", "drs"), direction="both", duration_s=0.4, sample_interval_s=0.05,
        filled_lines=(("up", 1.0), ("down", 1.0)),
    )  # fmt: skip
    res = run_transfer("127.0.0.1", server.port, opts)
    assert [(m.mode, m.direction) for m in res.modes] == [("autotune", "up"), ("autotune", "down")]
    assert [n.split(":")[0] for n in res.left_out] == ["up", "down"], res.left_out
    ran = run_transfer(
        "127.0.0.1", server.port, replace(opts, filled_lines=(("up", 1e9), ("down", 1e9)))
    )
    assert [m.mode for m in ran.modes] == ["autotune", "drs", "autotune", "drs"]
    assert ran.left_out == ()


def test_byte_count_download(server: Server) -> None:
    opts = TransferOptions(modes=("drs",), direction="down", duration_s=None, nbytes=30_000_000)
    (m,) = run_transfer("127.0.0.1", server.port, opts).modes
    assert m.error is None and m.bytes == 30_000_000 and m.bytes_sent == 30_000_000


@pytest.mark.parametrize(
    "patch",
    [
        {"streams": 17},
        {"streams": True},
        {"mode": "bogus"},
        {"direction": "sideways"},
        {"bytes": 1000},  # together with duration_s
        {"duration_s": -1},
        {"mode": "static", "static_request": None},
    ],
)
def test_bad_requests_get_an_error(server: Server, patch: dict[str, object]) -> None:
    req: dict[str, object] = {
        "type": "transfer_start",
        "mode": "autotune",
        "direction": "up",
        "streams": 1,
        "duration_s": 0.2,
        **patch,
    }
    with ControlClient("127.0.0.1", server.port) as c, pytest.raises(ProtocolError):
        c.request(req)


def test_attach_to_unknown_session_is_refused(server: Server) -> None:
    s = raw_conn(server)
    try:
        send_line(s, {"type": "attach", "session": "0" * 32, "role": "data", "stream": 0})
        lines = read_lines(s)
    finally:
        s.close()
    assert lines and lines[0]["type"] == "error"


def test_client_vanishing_does_not_wedge_serve(server: Server) -> None:
    with ControlClient("127.0.0.1", server.port) as c:
        ready = c.request(
            {
                "type": "transfer_start",
                "mode": "autotune",
                "direction": "down",
                "streams": 1,
                "duration_s": 5.0,
                "stall_timeout_s": 1.0,
            }
        )
        d = c.open_attached(str(ready["session"]), "data", 0)
        assert c.recv(timeout=5)["type"] == "transfer_running"
        d.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\0\0\0\0\0\0\0")
        d.close()
        t0 = time.monotonic()
        msg = c.recv(timeout=5)
        assert time.monotonic() - t0 < 3
        assert msg["type"] == "transfer_result"
        assert msg["report"]["error"]  # type: ignore[index]
    # ...and serve still runs transfers.
    opts = TransferOptions(modes=("untuned",), duration_s=0.2)
    assert run_transfer("127.0.0.1", server.port, opts).modes[0].error is None


@pytest.mark.parametrize("direction", ["up", "down"])
def test_serve_killed_mid_transfer(direction: str) -> None:
    """A far end that disappears: a clear error and partial results within seconds."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "tcpwizard", "serve", "--bind", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "serve did not start"
                time.sleep(0.05)
        killer = threading.Timer(0.8, lambda: os.kill(proc.pid, signal.SIGKILL))
        killer.start()
        opts = TransferOptions(
            modes=("autotune", "drs"),
            direction=direction,  # type: ignore[arg-type]
            duration_s=4.0,
            stall_timeout_s=1.5,
        )
        t0 = time.monotonic()
        res = run_transfer("127.0.0.1", port, opts)
        took = time.monotonic() - t0
        killer.join()
    finally:
        proc.kill()
        proc.wait(timeout=5)
    assert took < 4.0  # did not wait for the full length, let alone hang
    first, second = res.modes
    assert first.error is not None
    assert first.bytes > 0 and first.samples  # what was measured before the loss
    assert second.error is not None and second.bytes == 0  # not attempted on a dead peer


def test_cli_json(server: Server, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["transfer", "127.0.0.1", "--port", str(server.port), "--modes", "untuned,drs"]
    rc = main([*argv, "--duration", "0.3", "--streams", "2", "--json"])
    out = capsys.readouterr().out
    assert rc == ExitCode.OK
    whole = json.loads(out)
    assert whole["schema_version"] and whole["tool"]["name"] == "tcpwizard"
    doc = whole["transfer"]
    assert [m["mode"] for m in doc["modes"]] == ["untuned", "drs"]
    assert doc["modes"][1]["samples"][0]["rcvbuf_bytes"] > 0


def test_cli_text(server: Server, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["transfer", "127.0.0.1", "--port", str(server.port), "--modes", "autotune"]
    assert main([*argv, "--bytes", "20MB", "--rtt", "1ms", "--bandwidth", "1gbit"]) == 0
    out = capsys.readouterr().out
    assert "autotune" in out and "Mbit/s" in out


@pytest.mark.parametrize(
    "extra",
    [
        ["--modes", "fast"],
        ["--streams", "17"],
        ["--duration", "0.01s"],
        ["--rtt", "50ms"],
        ["--bytes", "12 furlongs"],
    ],
)
def test_cli_usage_errors(extra: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["transfer", "127.0.0.1", *extra]) == ExitCode.USAGE
    assert capsys.readouterr().err.startswith("tcpwizard: error:")


def test_cli_unreachable_is_unknown(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["transfer", "127.0.0.1", "--port", str(free_port()), "--modes", "autotune"])
    assert rc == ExitCode.UNKNOWN
    err = capsys.readouterr().err.strip()
    assert err.startswith("tcpwizard: error:") and "\n" not in err


def test_static_without_bdp_fails_alone(server: Server) -> None:
    opts = TransferOptions(modes=("static", "untuned"), duration_s=0.2)
    static, untuned = run_transfer("127.0.0.1", server.port, opts).modes
    assert static.error is not None and "BDP" in static.error
    assert untuned.error is None and untuned.bytes > 0


@pytest.mark.skipif(os.geteuid() != 0, reason="SO_RCVBUFFORCE needs root")
def test_force_buffers_go_past_rmem_max(server: Server) -> None:
    """The root what-if: buffers beyond net.core.rmem_max without changing any sysctl."""
    from tcpwizard.measure.engine.buffers import read_host_limits

    rmem_max = read_host_limits().rmem_max
    opts = TransferOptions(modes=("overprovisioned",), duration_s=0.2, force=True)
    (m,) = run_transfer("127.0.0.1", server.port, opts).modes
    assert m.error is None and m.forced
    assert m.max_buffer_bytes > 2 * rmem_max


def test_cancel_ends_a_running_transfer_early(server: Server) -> None:
    """A cancel (the TUI's esc) stops the running mode within a sample interval and skips
    the modes not yet started; what was measured is kept."""
    cancel = threading.Event()
    timer = threading.Timer(0.6, cancel.set)
    opts = TransferOptions(modes=("autotune", "drs"), duration_s=10.0)
    t0 = time.monotonic()
    timer.start()
    try:
        res = run_transfer("127.0.0.1", server.port, opts, TransferHooks(cancel=cancel))
    finally:
        timer.cancel()
    assert time.monotonic() - t0 < 5.0
    assert [m.mode for m in res.modes] == ["autotune"]
    assert res.modes[0].bytes > 0 and res.modes[0].seconds < 5.0
