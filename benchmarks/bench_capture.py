"""How fast `check --pcap` reads a large capture: a real one, taken by tcpdump (full packets)
on a veth pair between two throwaway namespaces during an iperf3 upload, until the file
holds SIZE bytes; then read_capture + the verdict, timed. Namespaces, processes and the file
are removed afterwards, also on failure.

    python -m benchmarks capture [--size 1GB] [--keep FILE]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
import uuid

from tcpwizard.advice.capture import judge_capture
from tcpwizard.lab.netns import ip, kill_ns_processes, ns_add, ns_del, stop
from tcpwizard.measure.observe.capture import read_capture
from tcpwizard.units import format_bytes, parse_size


def take_capture(path: str, size: int) -> float:
    """A real capture of at least `size` bytes; the seconds it took."""
    tag = uuid.uuid4().hex[:6]
    a, b = f"twbc-{tag}-a", f"twbc-{tag}-b"
    procs: list[subprocess.Popen[bytes]] = []
    try:
        ns_add(a)
        ns_add(b)
        ip("link", "add", "eth0", "netns", a, "type", "veth", "peer", "eth0", "netns", b)
        for ns, addr in ((a, "10.254.0.1/30"), (b, "10.254.0.2/30")):
            ip("addr", "add", addr, "dev", "eth0", ns=ns)
            ip("link", "set", "eth0", "up", ns=ns)
            ip("link", "set", "lo", "up", ns=ns)
            # Packets as a NIC puts them on the wire (1500 bytes), not 64 KB GSO chunks.
            subprocess.run(
                ["ip", "netns", "exec", ns, "ethtool", "-K", "eth0", "tso", "off", "gso", "off",
                 "gro", "off"],
                capture_output=True,
                check=False,
            )  # fmt: skip
        procs.append(
            subprocess.Popen(
                ["ip", "netns", "exec", b, "iperf3", "-s"],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
        dump = subprocess.Popen(
            ["ip", "netns", "exec", a, "tcpdump", "-i", "eth0", "-s", "0", "-B", "65536",
             "-Z", "root", "-w", path, "tcp"],
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        procs.append(dump)
        time.sleep(1.0)
        start = time.monotonic()
        client = subprocess.Popen(
            ["ip", "netns", "exec", a, "iperf3", "-c", "10.254.0.2", "-t", "600", "-b", "4G"],
            stdout=subprocess.DEVNULL,
        )
        procs.append(client)
        while os.path.getsize(path) < size and client.poll() is None:
            time.sleep(0.2)
        took = time.monotonic() - start
        for p in reversed(procs):
            stop(p)
        return took
    finally:
        for p in procs:
            stop(p)
        for ns in (a, b):
            kill_ns_processes(ns)
            ns_del(ns)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks capture", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--size", default="1GB")
    parser.add_argument("--keep", help="keep the capture here (default: removed)")
    args = parser.parse_args(argv)
    size = parse_size(args.size)
    with tempfile.TemporaryDirectory() as tmp:
        path = args.keep or os.path.join(tmp, "bench.pcap")
        took = take_capture(path, size)
        real = os.path.getsize(path)
        t0, c0 = time.monotonic(), time.process_time()
        summary = read_capture(path)
        report = judge_capture(summary, lambda _a: False)
        wall, cpu = time.monotonic() - t0, time.process_time() - c0
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        v = report.diagnosis.verdict.limiting_factor if report.diagnosis else "none"
        print(
            f"| {format_bytes(real)} | {summary.packets:,} | {took:.0f} s | {wall:.1f} s | "
            f"{cpu:.1f} s | {summary.packets / wall:,.0f} | {format_bytes(rss)} | {v} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
