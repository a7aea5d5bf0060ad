"""Benchmarks of `tcpwizard path`, the available bandwidth and the time-sequence graphs on
the lab (tables for docs/path.md, not timed tests):

    python -m benchmarks path hops      # hop naming over 20 varied topologies
    python -m benchmarks path defaults  # where loss begins, at `path`'s defaults, 10 runs
    python -m benchmarks path avail     # available bandwidth at 3 cross-traffic loads
    python -m benchmarks path tsg       # graphs of a capture of a 1 GB transfer

Each prints a markdown table on stdout. Needs root, iperf3 and tcpdump.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

from tcpwizard.lab.lab import Lab
from tcpwizard.lab.spec import HopSpec, LabSpec
from tcpwizard.lab.traffic import CrossTraffic

PREFIX = f"twb{os.getpid() % 10000}"


def _topology(rng: random.Random) -> tuple[tuple[HopSpec, ...], int, int, int | None]:
    """(hops, RTT-jump hop, loss-start hop, rate-limited hop or None)."""
    n = rng.randint(3, 6)
    jump = rng.randint(2, n)
    loss_at = rng.randint(2, n + 1)  # n + 1: the link into b (carried by router n's link)
    loss_at = min(loss_at, n)
    limited = rng.choice([None, *[k for k in range(2, n + 1) if k != loss_at]])
    hops = []
    for k in range(1, n + 1):
        hops.append(
            HopSpec(
                rtt_s=rng.choice([0.02, 0.04, 0.06]) if k == jump else 0.0,
                loss=rng.choice([0.01, 0.02, 0.03]) if k == loss_at else 0.0,
                icmp_ratelimit_ms=1000 if k == limited else 0,
            )
        )
    return tuple(hops), jump, loss_at, limited


def _path_json(lab: Lab, *args: str) -> dict[str, Any]:
    proc = lab.run(
        "a", [sys.executable, "-m", "tcpwizard", "path", lab.addr_b, "--json", "-n", *args],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    doc: dict[str, Any] = json.loads(proc.stdout)
    return doc


def bench_hops(count: int = 20, seed: int = 20) -> str:
    rng = random.Random(seed)
    rows = ["| # | hops | jump (set/named) | loss start (set/named) | rate limited (set/named) "
            "| probes | s |", "|---:|---:|---|---|---|---:|---:|"]  # fmt: skip
    ok_jump = ok_loss = ok_limit = 0
    for i in range(1, count + 1):
        hops, jump, loss_at, limited = _topology(rng)
        spec = LabSpec.symmetric(100e6, 0.002, name=f"{PREFIX}-{i}", hops=hops)
        with Lab(spec, owner_pid=os.getpid()) as lab:
            doc = _path_json(lab, "--count", "1000", "--interval", "1ms", "--no-mtu")
        named_jump = (doc["rtt_jump"] or {}).get("hop")
        named_loss = (doc["loss_start"] or {}).get("hop")
        named_limited = [h for h in doc["rate_limited_hops"] if h != len(hops) + 1]
        ok_jump += named_jump == jump
        ok_loss += named_loss == loss_at
        want = [limited] if limited else []
        ok_limit += named_limited == want
        rows.append(
            f"| {i} | {len(hops)} | {jump} / {named_jump} | {loss_at} / {named_loss} | "
            f"{limited or '-'} / {','.join(map(str, named_limited)) or '-'} | "
            f"{doc['probes_sent']} | {doc['elapsed_s']:.1f} |"
        )
    rows.append(
        f"\nRTT jump named right in {ok_jump}/{count}, loss start in {ok_loss}/{count}, "
        f"rate-limited hops exactly in {ok_limit}/{count}."
    )
    return "\n".join(rows)


def bench_defaults(runs: int = 10, losses: tuple[float, ...] = (0.0, 0.02, 0.03, 0.04)) -> str:
    """`path` at its defaults (no --count: 10 per hop, then more where loss is not yet
    placed, within 30 s) on 4 routers, a 40 ms jump on hop 2 and `loss` from hop 3 on."""
    rows = ["| loss from hop 3 | runs | loss start named (hop: runs) | right | loss % named, "
            "median | probes, median | s, median (max) |",
            "|---:|---:|---|---:|---:|---:|---|"]  # fmt: skip
    for loss in losses:
        hops = (HopSpec(), HopSpec(rtt_s=0.040), HopSpec(loss=loss), HopSpec())
        spec = LabSpec.symmetric(100e6, 0.002, name=f"{PREFIX}-d{int(loss * 1000)}", hops=hops)
        docs = []
        with Lab(spec, owner_pid=os.getpid()) as lab:
            for _ in range(runs):
                docs.append(_path_json(lab, "--no-mtu"))
        named = [(d["loss_start"] or {}).get("hop") for d in docs]
        want = 3 if loss else None
        seen = ", ".join(f"{h or 'none'}: {named.count(h)}" for h in sorted(set(named), key=str))
        pct = sorted((d["loss_start"] or {}).get("loss_pct", 0.0) for d in docs)
        secs = sorted(d["elapsed_s"] for d in docs)
        probes = sorted(d["probes_sent"] for d in docs)
        rows.append(
            f"| {loss:.0%} | {runs} | {seen} | {named.count(want)}/{runs} | "
            f"{pct[runs // 2]:.1f} | {probes[runs // 2]} | {secs[runs // 2]:.1f} ({secs[-1]:.1f}) |"
        )
    return "\n".join(rows)


AVAIL_SCRIPT = """
import json, sys
from tcpwizard.measure.probes.availbw import measure_available
from tcpwizard.measure.wire.control import ControlClient
c = ControlClient(sys.argv[1], 5301)
s = c.udp_socket()
r = measure_available(c, s, float(sys.argv[2]), float(sys.argv[3]))
print(json.dumps([r.estimate_bps, r.low_bps, r.high_bps, r.elapsed_s]))
"""


def bench_avail(runs: int = 10, loads: tuple[float, ...] = (60e6, 120e6, 160e6)) -> str:
    cap, rtt = 200e6, 0.020
    rows = ["| cross traffic (iperf3 UDP) | expected free | runs | median | min-max | "
            "within 15 Mbit/s | mean time s |", "|---:|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
    spec = LabSpec.symmetric(cap, rtt, name=f"{PREFIX}-av")
    with Lab(spec, owner_pid=os.getpid()) as lab:
        serve = lab.popen("b", [sys.executable, "-m", "tcpwizard", "serve", "--port", "5301"],
                          stderr=subprocess.DEVNULL)  # fmt: skip
        time.sleep(1.0)
        try:
            for load in (0.0, *loads):
                # iperf3 counts UDP payload (1250 B): on the wire 1278 B per datagram.
                expected = cap - load * 1278 / 1250
                got: list[list[float]] = []
                traffic = CrossTraffic(lab, udp_bps=load, duration_s=300) if load else None
                if traffic:
                    traffic.up()
                try:
                    for _ in range(runs):
                        argv = [sys.executable, "-c", AVAIL_SCRIPT, lab.addr_b, str(cap), str(rtt)]
                        proc = lab.run("a", argv, capture_output=True, text=True, timeout=60)
                        out = proc.stdout
                        got.append(json.loads(out))
                finally:
                    if traffic:
                        traffic.down()
                est = sorted(g[0] / 1e6 for g in got)
                near = sum(abs(e - expected / 1e6) <= 15 for e in est)
                rows.append(
                    f"| {load / 1e6:g} Mbit/s | {expected / 1e6:.0f} | {len(est)} | "
                    f"{est[len(est) // 2]:.1f} | {est[0]:.1f}-{est[-1]:.1f} | {near}/{len(est)} | "
                    f"{sum(g[3] for g in got) / len(got):.2f} |"
                )
        finally:
            serve.kill()
            serve.wait()
    return "\n".join(rows)


def bench_tsg(nbytes: str = "1G") -> str:
    from tcpwizard.measure.observe.tsg import series_from_capture
    from tcpwizard.output.tsg_plot import plot_all

    spec = LabSpec.symmetric(400e6, 0.004, name=f"{PREFIX}-tsg")
    tmp = tempfile.mkdtemp(prefix="tw-tsg-")
    pcap = os.path.join(tmp, "1g.pcap")
    try:
        with Lab(spec, owner_pid=os.getpid()) as lab:
            server = lab.popen("b", ["iperf3", "-s", "-1"], stdout=subprocess.DEVNULL)
            time.sleep(0.5)
            dump = lab.popen("a", ["tcpdump", "-i", "wan0", "-n", "-s", "128", "-w", pcap,
                                   "tcp"], stderr=subprocess.DEVNULL)  # fmt: skip
            time.sleep(1.0)
            t0 = time.monotonic()
            lab.run("a", ["iperf3", "-c", lab.addr_b, "-n", nbytes], capture_output=True,
                    timeout=600)  # fmt: skip
            transfer_s = time.monotonic() - t0
            dump.send_signal(2)
            dump.wait(timeout=30)
            server.wait(timeout=30)
        size = os.path.getsize(pcap)
        t0 = time.monotonic()
        series = series_from_capture(pcap)
        read_s = time.monotonic() - t0
        t0 = time.monotonic()
        files = plot_all(series, os.path.join(tmp, "plots"))
        plot_s = time.monotonic() - t0
        s = series[0]
        return "\n".join([
            "| transfer | capture | flows | data points (drawn) | read s | draw s | total s |",
            "|---|---:|---:|---:|---:|---:|---:|",
            f"| {nbytes}B with iperf3 in {transfer_s:.0f} s | {size / 1e6:.0f} MB | "
            f"{len(series)} | {len(s.data)}{' (thinned)' if s.thinned else ''} | {read_s:.1f} | "
            f"{plot_s:.1f} | {read_s + plot_s:.1f} |",
            f"\n{len(files)} files written.",
        ])  # fmt: skip
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv: list[str]) -> int:
    what = argv[0] if argv else ""
    benches: dict[str, Callable[[], str]] = {
        "hops": bench_hops,
        "defaults": bench_defaults,
        "avail": bench_avail,
        "tsg": bench_tsg,
    }
    if what not in benches:
        print("usage: python -m benchmarks path hops|defaults|avail|tsg", file=sys.stderr)
        return 64
    print(benches[what]())
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
