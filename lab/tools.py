"""Reference measurements across a lab with tools nobody here wrote (ping, iperf3), and
tcpdump's capture of what crosses it.

Used by the calibration benchmark and by end-to-end tests; every call is bounded in time.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, cast

from tcpwizard.lab.lab import Lab
from tcpwizard.lab.netns import LabError, stop
from tcpwizard.lab.spec import Side

_TIME_RE = re.compile(r"time=([0-9.]+) ms")
_SUMMARY_RE = re.compile(r"rtt min/avg/max/mdev = ([0-9.]+)/")


@dataclass(frozen=True)
class PingResult:
    sent: int
    rtts_s: tuple[float, ...]
    summary_min_s: float | None = None  # from ping's summary line: µs resolution

    @property
    def min_s(self) -> float:
        if self.summary_min_s is not None:
            return self.summary_min_s
        return min(self.rtts_s) if self.rtts_s else float("nan")

    @property
    def loss(self) -> float:
        return 1.0 - len(self.rtts_s) / self.sent if self.sent else float("nan")


# How close ping's minimum comes to the configured RTT: the delay line's wakeups add 0.1 ms
# a round trip (docs/bench-calibrate.md), 0.24-0.27 ms on a slower VM (2026-12-07, 10 and
# 50 ms paths); 2 % on long paths, where a millisecond timer's slack shows.
RTT_FLOOR_S = 0.3e-3
RTT_SHARE = 0.02


def rtt_tolerance_s(rtt_s: float) -> float:
    """How far the lab's measured minimum RTT may stand from the configured `rtt_s`."""
    return max(RTT_FLOOR_S, RTT_SHARE * rtt_s)


def ping(
    lab: Lab, side: Side, count: int = 10, interval_s: float = 0.05, ipv6: bool = False
) -> PingResult:
    """ICMP echo from `side` to the other host; per-reply RTTs (iputils ping)."""
    other: Side = "b" if side == "a" else "a"
    dst = lab.addr6(other) if ipv6 else lab.addr(other)
    wait = max(1, round(lab.rtt_s * 3 + 1))
    argv = ["ping", "-n", "-c", str(count), "-i", f"{interval_s:g}", "-W", str(wait), dst]
    limit = count * interval_s + wait + 10
    proc = lab.run(side, argv, capture_output=True, text=True, check=False, timeout=limit)
    rtts = tuple(float(m.group(1)) / 1e3 for m in _TIME_RE.finditer(proc.stdout))
    # Per-reply times lose decimals above 100 ms ("time=200 ms"); the summary keeps 3.
    summary = _SUMMARY_RE.search(proc.stdout)
    best = float(summary.group(1)) / 1e3 if summary else None
    return PingResult(count, rtts, best)


@dataclass(frozen=True)
class TcpResult:
    sender_bps: float
    receiver_bps: float
    retransmits: int
    # (bytes, seconds) per interval as the client saw them: receiver side with -R.
    intervals: tuple[tuple[int, float], ...]

    def steady_bps(self, skip: int) -> float:
        """Goodput over the intervals after the first `skip` (slow start) ones."""
        rest = self.intervals[skip:]
        seconds = sum(s for _, s in rest)
        return sum(b for b, _ in rest) * 8 / seconds if seconds > 0 else float("nan")


@dataclass(frozen=True)
class UdpResult:
    sent: int
    lost: int

    @property
    def loss(self) -> float:
        return self.lost / self.sent if self.sent else float("nan")


# iperf3 (3.9-3.16) sometimes ends a good run with this on its control connection (a
# nonblocking read racing the server's last message); the run is repeated once.
IPERF3_EAGAIN = "Resource temporarily unavailable"


def _iperf3(
    lab: Lab, client: Side, args: list[str], seconds: float, nbytes: int | None = None
) -> dict[str, Any]:
    """A one-off iperf3 server on the other host, the client on `client`; the client's JSON.
    With nbytes, the run sends that many bytes (-n) and `seconds` only bounds the wait.
    A UDP run whose connect datagram or its answer the lab's random loss dropped stalls
    iperf3 3.12's client for 30 s (it does not send it again): such a run is bounded at
    UDP_CONNECT_GRACE_S past its length and tried once more."""
    udp = "-u" in args
    grace = UDP_CONNECT_GRACE_S if udp else TCP_GRACE_S
    try:
        return _iperf3_once(lab, client, args, seconds, nbytes, grace)
    except subprocess.TimeoutExpired:
        if not udp:
            raise
        return _iperf3_once(lab, client, args, seconds, nbytes, grace)
    except LabError as exc:
        if IPERF3_EAGAIN not in str(exc):
            raise
        return _iperf3_once(lab, client, args, seconds, nbytes, grace)


# How long past its length an iperf3 client may take: its end-of-test exchange over a slow
# lossy path (TCP), or, for UDP, the answer to its connect datagram, which arrives within a
# round trip or never (one lost datagram stalls 3.12 for 30 s).
TCP_GRACE_S = 30.0
UDP_CONNECT_GRACE_S = 8.0


def _iperf3_once(
    lab: Lab,
    client: Side,
    args: list[str],
    seconds: float,
    nbytes: int | None,
    grace_s: float = TCP_GRACE_S,
) -> dict[str, Any]:
    server_side: Side = "b" if client == "a" else "a"
    server = lab.popen(
        server_side,
        ["iperf3", "-s", "-1", "--forceflush"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        fd = cast(IO[bytes], server.stdout).fileno()  # PIPE was requested just above
        seen = b""
        deadline = time.monotonic() + 5
        # Raw reads: a buffered reader would hide lines from select().
        while b"listening" not in seen and time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], 0.2)
            if ready:
                chunk = os.read(fd, 4096)
                if not chunk:
                    break
                seen += chunk
        if b"listening" not in seen:
            raise LabError(f"lab {lab.name}: iperf3 server on {server_side} did not start")
        length = ["-n", str(nbytes)] if nbytes else ["-t", f"{seconds:g}"]
        argv = ["iperf3", "-c", lab.addr(server_side), "-J", *length, *args]
        proc = lab.run(
            client, argv, capture_output=True, text=True, check=False, timeout=seconds + grace_s
        )
        try:
            data: dict[str, Any] = json.loads(proc.stdout)
        except ValueError as exc:
            raise LabError(f"iperf3 gave no JSON: {proc.stderr.strip()[:200]}") from exc
        if "error" in data:
            raise LabError(f"iperf3: {data['error']}")
        return data
    finally:
        try:
            server.wait(timeout=5)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        if server.stdout is not None:
            server.stdout.close()


def iperf3_tcp(
    lab: Lab,
    client: Side = "a",
    seconds: float = 3.0,
    extra: tuple[str, ...] = (),
    nbytes: int | None = None,
) -> TcpResult:
    data = _iperf3(lab, client, ["-i", "1", *extra], seconds, nbytes)
    end = data["end"]
    intervals = tuple(
        (int(i["sum"]["bytes"]), float(i["sum"]["seconds"])) for i in data.get("intervals", ())
    )
    return TcpResult(
        sender_bps=float(end["sum_sent"]["bits_per_second"]),
        receiver_bps=float(end["sum_received"]["bits_per_second"]),
        retransmits=int(end["sum_sent"].get("retransmits", 0)),
        intervals=intervals,
    )


def iperf3_udp(
    lab: Lab, client: Side = "a", rate_bps: float = 10e6, seconds: float = 2.0, length: int = 1000
) -> UdpResult:
    data = _iperf3(lab, client, ["-u", "-b", f"{rate_bps:.0f}", "-l", str(length)], seconds)
    # The receiver's view (lost = gaps in sequence numbers) is reported back to the client.
    summary = data["end"]["sum_received"] if "sum_received" in data["end"] else data["end"]["sum"]
    return UdpResult(sent=int(summary["packets"]), lost=int(summary["lost_packets"]))


@contextlib.contextmanager
def capturing(lab: Lab, path: Path) -> Iterator[None]:
    """Debian's tcpdump on a's WAN interface into `path`, headers only (enough for the
    analysis), for the block's duration."""
    dump = lab.popen(
        "a",
        ["tcpdump", "-i", lab.ifname, "-s", "128", "-U", "-Z", "root", "-w", str(path), "tcp"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert dump.stderr is not None
        line = dump.stderr.readline()  # "listening on ...": capturing from now on
        if "listening on" not in line:
            raise LabError(f"tcpdump did not start: {line.strip()}")
        yield
        time.sleep(0.3)  # the last segments reach the file before tcpdump stops
    finally:
        stop(dump)
