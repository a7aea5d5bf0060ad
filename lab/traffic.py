"""Cross traffic through a lab's bottleneck with real iperf3 flows (`tcpwizard lab traffic`).

    with CrossTraffic(lab, udp_bps=120e6):        # iperf3 -u -b 120M, a -> b
        ...measure...
    with CrossTraffic(lab, tcp_flows=4):          # iperf3 -P 4, a -> b

The server runs in b, the client in a, both for at most `duration_s` (iperf3 -t), and both
are ended when the block exits, also on errors.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from typing import Self

from tcpwizard.exitcodes import UsageError
from tcpwizard.lab.lab import Lab
from tcpwizard.lab.netns import LabError, stop
from tcpwizard.lab.updown import UpDown

PORT = 5211


class CrossTraffic(UpDown):
    def __init__(
        self,
        lab: Lab,
        *,
        udp_bps: float = 0.0,
        tcp_flows: int = 0,
        duration_s: float = 60.0,
        port: int = PORT,
        reverse: bool = False,
    ) -> None:
        if (udp_bps > 0) == (tcp_flows > 0):
            raise UsageError("cross traffic: give either a UDP rate or a number of TCP flows")
        if not 0 <= tcp_flows <= 32:
            raise UsageError("cross traffic: 1-32 TCP flows")
        if not 1 <= duration_s <= 3600:
            raise UsageError("cross traffic: 1 s to 1 h")
        if shutil.which("iperf3") is None:
            raise UsageError("cross traffic needs iperf3 (apt-get install iperf3)")
        self.lab = lab
        self.udp_bps = udp_bps
        self.tcp_flows = tcp_flows
        self.duration_s = duration_s
        self.port = port
        self.reverse = reverse
        self.server: subprocess.Popen[bytes] | None = None
        self.client: subprocess.Popen[bytes] | None = None

    def argv(self) -> list[str]:
        argv = ["iperf3", "-c", self.lab.addr_b, "-p", str(self.port),
                "-t", str(round(self.duration_s)), "--connect-timeout", "3000"]  # fmt: skip
        if self.udp_bps:
            # 1250-byte datagrams fit any lab MTU; pacing every 1 ms keeps the rate smooth.
            argv += ["-u", "-b", str(round(self.udp_bps)), "-l", "1250",
                     "--pacing-timer", "1000"]  # fmt: skip
        else:
            argv += ["-P", str(self.tcp_flows)]
        if self.reverse:
            argv.append("-R")
        return argv

    def up(self) -> Self:
        quiet = subprocess.DEVNULL
        self.server = self.lab.popen(
            "b", ["iperf3", "-s", "-1", "-p", str(self.port)], stdout=quiet, stderr=quiet
        )
        deadline = time.monotonic() + 5
        while True:
            out = self.lab.run("b", ["ss", "-Hltn", f"sport = :{self.port}"],
                               capture_output=True, text=True, check=False).stdout  # fmt: skip
            if out.strip():
                break
            if time.monotonic() > deadline:
                self.down()
                raise LabError("cross traffic: iperf3 -s did not start in b")
            time.sleep(0.05)
        self.client = self.lab.popen("a", self.argv(), stdout=quiet, stderr=quiet)
        time.sleep(0.5)  # let it reach its rate (TCP: slow start on a short path)
        if self.client.poll() is not None:
            self.down()
            raise LabError("cross traffic: iperf3 -c ended at once")
        return self

    def down(self) -> None:
        for proc in (self.client, self.server):
            if proc is not None and proc.poll() is None:
                stop(proc, grace_s=2.0)
        self.client = self.server = None
