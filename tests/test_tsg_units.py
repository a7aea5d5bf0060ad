"""Time-sequence series and plots from a synthetic capture (no network, no root): a flow
with its handshake (window scale 7), data pressed against a 64 KB window, one
retransmission; the PNG and SVG it draws."""

from __future__ import annotations

import socket
import struct
import sys
from pathlib import Path

import pytest

from tcpwizard.exitcodes import ExitCode
from tcpwizard.main import main
from tcpwizard.measure.observe.tsg import series_from_capture
from tcpwizard.output.tsg_plot import plot_all

A, B = "10.0.0.1", "10.0.0.2"
MSS = 1000


def _packet(src: str, dst: str, sport: int, dport: int, seq: int, ack: int, flags: int,
            window: int, payload: int, options: bytes = b"") -> bytes:  # fmt: skip
    hlen = 20 + len(options)
    tcp = struct.pack("!HHIIBBHHH", sport, dport, seq & 0xFFFFFFFF, ack & 0xFFFFFFFF,
                      (hlen // 4) << 4, flags, window, 0, 0) + options  # fmt: skip
    total = 20 + len(tcp) + payload
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, total, 0, 0x4000, 64, 6, 0,
                     socket.inet_aton(src), socket.inet_aton(dst))  # fmt: skip
    return ip + tcp  # captured without the payload (snaplen), as tcpdump -s 128 does


def write_pcap(path: Path, packets: list[tuple[float, bytes, int]]) -> None:
    with path.open("wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 101))  # raw IP
        for t, data, wire in packets:
            sec = int(t)
            f.write(struct.pack("<IIII", sec, int((t - sec) * 1e6), len(data), wire))
            f.write(data)


def synthetic(path: Path) -> None:
    wscale7 = bytes([2, 4, 0x05, 0xB4, 3, 3, 7, 0])  # MSS 1460, window scale 7
    pk: list[tuple[float, bytes, int]] = []

    def add(t: float, data: bytes, payload: int = 0) -> None:
        pk.append((t, data, len(data) + payload))

    isn_a, isn_b = 1000, 5000
    add(0.000, _packet(A, B, 40000, 5301, isn_a, 0, 0x02, 64240, 0, wscale7))
    add(0.050, _packet(B, A, 5301, 40000, isn_b, isn_a + 1, 0x12, 65535, 0, wscale7))
    add(0.100, _packet(A, B, 40000, 5301, isn_a + 1, isn_b + 1, 0x10, 502, 0))
    window = 64 * 1024
    t, sent, acked = 0.1, 0, 0
    for _rtt in range(40):  # each RTT: fill the window, then the ACKs open it again
        while sent + MSS <= acked + window:
            add(t, _packet(A, B, 40000, 5301, isn_a + 1 + sent, isn_b + 1, 0x18, 502, MSS), MSS)
            sent += MSS
        t += 0.05
        acked = sent
        add(t, _packet(B, A, 5301, 40000, isn_b + 1, isn_a + 1 + acked, 0x10, window >> 7, 0))
    # One segment sent again.
    add(t + 0.01, _packet(A, B, 40000, 5301, isn_a + 1, isn_b + 1, 0x18, 502, MSS), MSS)
    write_pcap(path, pk)


def test_series_from_a_synthetic_capture(tmp_path: Path) -> None:
    pcap = tmp_path / "flow.pcap"
    synthetic(pcap)
    (s,) = series_from_capture(str(pcap), min_bytes=10_000)
    assert (s.src, s.dst, s.window_scale) == (A, B, 7)
    assert s.data[0][1:] == (0, MSS)  # relative to the first byte after the SYN
    assert len(s.retransmits) == 1 and s.retransmits[0][1:] == (0, MSS)
    # The window edge is ACK + 64 KB (scaled by 2^7), and every round fills it: before the
    # next window update the data reaches the last edge (less than one segment short).
    assert all(w - a == 64 * 1024 for (_t, a), (_t2, w) in zip(s.acks, s.window, strict=True))
    for (t, edge), (t_next, _e) in zip(s.window, s.window[1:], strict=False):
        sent = max(end for ts, _a, end in s.data if ts < t_next)
        assert edge - MSS < sent <= edge, (t, edge, sent)
    assert s.bytes == len(s.data) * MSS


def test_plot_writes_png_and_svg(tmp_path: Path) -> None:
    pcap = tmp_path / "flow.pcap"
    synthetic(pcap)
    files = plot_all(series_from_capture(str(pcap), min_bytes=10_000), str(tmp_path / "out"), B)
    assert [Path(f).suffix for f in files] == [".png", ".svg"]
    assert Path(files[0]).read_bytes()[:4] == b"\x89PNG"
    svg = Path(files[1]).read_text()
    assert "receive window edge" in svg and "retransmission" in svg and "tsg-01-up-" in files[0]


@pytest.fixture
def no_matplotlib(monkeypatch: pytest.MonkeyPatch) -> None:
    """matplotlib is the `plot` extra: a wheel installed without it (None in sys.modules
    makes its import fail as a missing package's does)."""
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)


def test_plot_without_matplotlib_is_one_line_before_the_capture_is_read(
    tmp_path: Path, no_matplotlib: None, capsys: pytest.CaptureFixture[str]
) -> None:
    pcap = tmp_path / "flow.pcap"
    synthetic(pcap)
    out = tmp_path / "out"
    assert main(["check", "--pcap", str(pcap), "--plot", str(out)]) == ExitCode.UNKNOWN
    captured = capsys.readouterr()
    assert captured.out == "" and not out.exists()
    assert captured.err.startswith("tcpwizard: error: --plot needs matplotlib")
    assert "tcpwizard[plot]" in captured.err and captured.err.count("\n") == 1


def test_transfer_plot_without_matplotlib_fails_before_any_connection(
    tmp_path: Path, no_matplotlib: None, capsys: pytest.CaptureFixture[str]
) -> None:
    # Port 9 of a TEST-NET-1 address: were anything tried, it would fail differently.
    argv = ["transfer", "192.0.2.1", "--port", "9", "--plot", str(tmp_path), "--json"]
    assert main(argv) == ExitCode.UNKNOWN
    err = capsys.readouterr().err
    assert err.startswith("tcpwizard: error: --plot needs matplotlib") and err.count("\n") == 1
