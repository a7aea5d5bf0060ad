"""Time-sequence graphs of a real transfer: an upload into a far end whose receive buffer is
small (tcp_rmem max 128 KB on a 50 Mbit/s x 50 ms path), captured with tcpdump in host a.
The series show the data pressed against the receive window's right edge; `transfer --plot`
writes the PNG and SVG."""

from __future__ import annotations

import bisect
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tcpwizard.lab import LabSpec
from tcpwizard.lab.serving import serving
from tcpwizard.measure.observe.tsg import TsgSeries, series_from_capture
from tests.lab_fixtures import LabFactory

pytestmark = pytest.mark.lab
SMALL = (("net.ipv4.tcp_rmem", "4096 65536 131072"),)
SPEC = LabSpec.symmetric(50e6, 0.050, sysctls_b=SMALL)


def pressed_share(
    s: TsgSeries, mss: int = 1448, after_s: float = 0.5, bin_s: float = 0.02
) -> float:
    """Share of time bins (after the ramp) at whose end the highest byte sent is within
    2 MSS of the window edge the receiver had advertised by the bin's start: the sender
    filled the window and waited."""
    w_times = [t for t, _ in s.window]
    d_times = [t for t, _a, _e in s.data]
    high: list[int] = []
    for _t, _a, end in s.data:
        high.append(max(end, high[-1]) if high else end)
    start, stop = s.data[0][0] + after_s, s.data[-1][0]
    near = total = 0
    t = start
    while t + bin_s <= stop:
        wi = bisect.bisect_right(w_times, t) - 1
        di = bisect.bisect_right(d_times, t + bin_s) - 1
        if wi >= 0 and di >= 0:
            total += 1
            near += s.window[wi][1] - high[di] <= 2 * mss
        t += bin_s
    return near / total if total else 0.0


def test_small_window_transfer_is_pressed_against_the_window(
    lab_factory: LabFactory, tmp_path: Path
) -> None:
    lab = lab_factory(SPEC)
    pcap = tmp_path / "own.pcap"
    with serving(lab, "b"):
        dump = lab.popen(
            "a", ["tcpdump", "-i", "wan0", "-n", "-s", "128", "-U", "-w", str(pcap), "tcp"],
            stderr=subprocess.PIPE,
        )  # fmt: skip
        try:
            assert dump.stderr is not None and b"listening" in dump.stderr.readline()
            proc = lab.run(
                "a",
                [sys.executable, "-m", "tcpwizard", "transfer", lab.addr_b, "--modes",
                 "autotune", "--direction", "up", "--duration", "3s", "--plot",
                 str(tmp_path / "plots")],
                capture_output=True, text=True, timeout=120, check=False,
            )  # fmt: skip
            assert proc.returncode == 0, proc.stderr
            time.sleep(0.3)
        finally:
            dump.send_signal(2)
            dump.wait(timeout=10)
    flows = series_from_capture(str(pcap))
    up = next(s for s in flows if s.dst == lab.addr_b)
    assert up.bytes > 2_000_000 and up.window_scale is not None
    assert pressed_share(up) >= 0.7, pressed_share(up)
    # Never beyond the edge (the sender obeys the window), and nothing retransmitted.
    assert not up.retransmits
    files = sorted(os.listdir(tmp_path / "plots"))
    assert [f.rsplit(".", 1)[1] for f in files] == ["png", "svg"]
    assert files[0].startswith("tsg-01-up-")
    assert (tmp_path / "plots" / files[0]).read_bytes()[:4] == b"\x89PNG"
