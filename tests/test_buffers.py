"""Socket buffer sizing on this kernel: doubling, caps, FORCE, window clamp, host limits."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from tcpwizard.measure.engine import buffers
from tcpwizard.measure.engine.buffers import HostBufferLimits


def _fake_tree(root: Path, rmem: int, wmem: int) -> None:
    (root / "net/core").mkdir(parents=True)
    (root / "net/ipv4").mkdir(parents=True)
    (root / "net/core/rmem_max").write_text(f"{rmem}\n")
    (root / "net/core/wmem_max").write_text(f"{wmem}\n")
    (root / "net/ipv4/tcp_rmem").write_text("4096\t131072\t6291456\n")
    (root / "net/ipv4/tcp_wmem").write_text("4096\t16384\t4194304\n")


def test_read_host_limits_from_a_fake_tree(tmp_path: Path) -> None:
    _fake_tree(tmp_path, 212992, 425984)
    lim = buffers.read_host_limits(str(tmp_path))
    assert lim == HostBufferLimits(212992, 425984, (4096, 131072, 6291456), (4096, 16384, 4194304))
    assert lim.max_request(receive=True, force=False) == 212992
    assert lim.max_request(receive=True, force=True) == 6291456 // 2
    assert lim.max_request(receive=False, force=True) == 4194304 // 2
    small_ceiling = HostBufferLimits(
        8 << 20, 8 << 20, (4096, 131072, 6291456), (4096, 16384, 4194304)
    )
    assert small_ceiling.max_request(receive=True, force=True) == 8 << 20  # core cap is larger
    assert HostBufferLimits.from_json(lim.to_json()) == lim
    assert HostBufferLimits.from_json({"rmem_max": "x"}) is None


def test_linux_doubles_the_request() -> None:
    with socket.socket() as s:
        assert buffers.set_rcvbuf(s, 100_000) == 200_000
        assert buffers.set_sndbuf(s, 100_000) == 200_000


def test_plain_request_is_capped_at_rmem_max() -> None:
    lim = buffers.read_host_limits()
    with socket.socket() as s:
        granted = buffers.set_rcvbuf(s, lim.rmem_max * 4)
    assert granted == 2 * lim.rmem_max


@pytest.mark.skipif(os.geteuid() != 0, reason="SO_RCVBUFFORCE needs root")
def test_force_goes_past_rmem_max() -> None:
    lim = buffers.read_host_limits()
    with socket.socket() as s:
        g = buffers.apply_buffers(s, None, lim.rmem_max * 2, force=True)
    assert g.forced
    assert g.rcvbuf == 4 * lim.rmem_max


def test_accepted_socket_window_clamp_is_raised() -> None:
    ls = socket.create_server(("127.0.0.1", 0))
    c = socket.create_connection(ls.getsockname(), timeout=5)
    a, _ = ls.accept()
    try:
        before = buffers.window_clamp(a)
        assert before is not None
        buffers.set_rcvbuf(a, 2 << 20)
        # Setting SO_RCVBUF alone leaves the clamp where the accept put it...
        assert buffers.window_clamp(a) == before
        buffers.raise_window_clamp(a, 4 << 20)
        assert buffers.window_clamp(a) == 4 << 20
        buffers.raise_window_clamp(a, 1 << 20)  # never lowers it
        assert buffers.window_clamp(a) == 4 << 20
    finally:
        for s in (ls, c, a):
            s.close()
