"""One transfer seen three ways: `check` uploading to Debian's iperf3 on host b, `conns`
watching that upload's connection while it runs, and tcpdump capturing it for
`check --pcap`. For each cause all three can see from host a, the three should name the same
factor and host to fix.

The causes: the far end's receive buffer (b's tcp_rmem), this host's send buffer (a's
tcp_wmem), SACK off in a on a lossy path, a token-bucket policer on the path (Reno hosts, so
the bucket's drops are the sender's only signal), window scaling off at the far end, and a
healthy path (both hosts stock, the bottleneck the limit). Each adapter fills its own
evidence (the check's report, one connection's TCP_INFO over an interval, a capture's
packet headers), so one verdict across them says the three judges read the same physics.
tests/test_three_ways_lab.py runs the first four (the suite's time); the bench runs all of
them N times and prints every run:

    python -m benchmarks three-ways [--runs N] [--only CAUSE] [--out DIR]

Output: DIR/bench-three-ways.md (docs/conns.md keeps the latest).
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.bench_causes import RENO
from tcpwizard import argtypes
from tcpwizard.context import Context
from tcpwizard.exitcodes import ExitCode
from tcpwizard.lab.lab import Lab
from tcpwizard.lab.serving import check_pcap, iperf3_serving, tcpwizard_argv
from tcpwizard.lab.spec import LabSpec
from tcpwizard.lab.tools import capturing

IPERF3_PORT = 5201
RATE, RTT = 80e6, 0.060  # BDP 600 KB: every buffer below holds one connection to a fraction
SECONDS = 5  # the upload: past slow start (~10 round trips here) with room for 3 conns samples
Named = tuple[Any, Any]


@dataclass(frozen=True)
class Case:
    what: str
    spec: LabSpec
    expect: Named


CASES = {
    "receiver-window": Case(
        "b's tcp_rmem max 256 KB",
        LabSpec.symmetric(RATE, RTT, sysctls_b=(("net.ipv4.tcp_rmem", "4096 65536 262144"),)),
        ("receiver-window", "peer"),
    ),
    "sender-buffer": Case(
        "a's tcp_wmem max 128 KB",
        LabSpec.symmetric(RATE, RTT, sysctls_a=(("net.ipv4.tcp_wmem", "4096 16384 131072"),)),
        ("sender-buffer", "local"),
    ),
    # SACK off in a, Reno under 0.5 % random loss: check reads a's audit, conns a's own
    # setting and TCP_INFO's options, the capture a's SYN.
    "sack-off": Case(
        "SACK off in a, Reno, 0.5 % random loss",
        LabSpec.symmetric(RATE, RTT, loss=0.005, sysctls_a=(*RENO, ("net.ipv4.tcp_sack", "0"))),
        ("congestion", "local"),
    ),
    "policer": Case(
        "a 20 Mbit/s bucket on 100 Mbit/s x 30 ms, Reno hosts",
        LabSpec.symmetric(100e6, 0.030, policer_bps=20e6, sysctls_a=RENO, sysctls_b=RENO),
        ("policer", "path"),
    ),
    # The far end's SYN-ACK carries no window scale: the check reads iperf3's handshake,
    # conns TCP_INFO's scales, the capture the SYN-ACK.
    "window-scaling": Case(
        "window scaling off in b",
        LabSpec.symmetric(RATE, RTT, sysctls_b=(("net.ipv4.tcp_window_scaling", "0"),)),
        ("window-scaling", "peer"),
    ),
    "healthy": Case("both hosts stock", LabSpec.symmetric(RATE, RTT), ("path-capacity", None)),
}
SUITE_CASES = ("receiver-window", "sender-buffer", "sack-off", "policer")


def _named(verdict: dict[str, Any] | None) -> Named:
    v = verdict or {}
    return v.get("limiting_factor"), v.get("host_to_fix")


def _conns_sample(lab: Lab) -> list[Named]:
    """`conns --json` over one second in a: the verdict of each busy sending connection to
    iperf3's port (the upload; its control connection is idle, so it has no verdict)."""
    run = lab.run(
        "a",
        tcpwizard_argv("conns", "--json", "--port", str(IPERF3_PORT), "--interval", "1s"),
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    doc = json.loads(run.stdout)
    return [
        _named(c["verdict"])
        for c in doc["connections"]
        if c["role"] == "sending" and c["verdict"] is not None
    ]


def _upload_in_capture(doc: dict[str, Any], sender: str) -> Named:
    """The capture's verdict of the largest flow from `sender` to iperf3's port."""
    flows = [d for d in [doc["diagnosis"], *doc["others"]] if d is not None]
    ours = [
        d
        for d in flows
        if d["flow"]["sender"]["address"] == sender and d["flow"]["receiver"]["port"] == IPERF3_PORT
    ]
    if not ours:
        return (None, None)
    return _named(max(ours, key=lambda d: d["flow"]["bytes"])["verdict"])


def seen_three_ways(lab: Lab, pcap: Path) -> dict[str, Named]:
    """One upload from a to b's iperf3 driven by `check` (kernel autotuning only: one
    connection, the one whose verdict the check gives), watched by `conns` until the check
    ends and captured by tcpdump: each way's (factor, host). conns' reading is the one most
    of its samples gave after the first (which may still see slow start)."""
    argv = tcpwizard_argv(
        "check", lab.addr_b, "--direction", "up", "--modes", "autotune",
        "--duration", f"{SECONDS}s",
        "--json", "--no-history",
    )  # fmt: skip
    samples: list[list[Named]] = []
    # The report goes to a file: a pipe nobody reads until the check ends holds 64 KB, and a
    # lossy upload's report is larger (the check then blocked on its write until the deadline).
    report_file = pcap.with_suffix(".json")
    with capturing(lab, pcap), iperf3_serving(lab, "b"), report_file.open("w") as sink:
        check = lab.popen("a", argv, stdout=sink, stderr=subprocess.DEVNULL, text=True)
        deadline = time.monotonic() + 120
        while check.poll() is None and time.monotonic() < deadline:
            samples.append(_conns_sample(lab))
        check.wait(timeout=60)
    report = json.loads(report_file.read_text())
    pcap_run = check_pcap(lab, pcap)
    busy = [named for sample in samples for named in sample]
    conns = Counter(busy[1:] or busy).most_common(1)
    return {
        "check": _named(report["verdict"]),
        "conns": conns[0][0] if conns else (None, None),
        "pcap": _upload_in_capture(json.loads(pcap_run.stdout), lab.addr_a),
    }


def _cell(named: Named, expect: Named) -> str:
    factor, host = named
    text = f"{factor or '-'} ({host or '-'})"
    return text if named == expect else f"**{text}**"


def table(rows: list[tuple[str, int, dict[str, Named]]]) -> str:
    lines = [
        "| cause | what | run | check | conns | --pcap | one verdict, the expected one |",
        "|---|---|---:|---|---|---|---|",
    ]
    for name, run, seen in rows:
        case = CASES[name]
        cells = " | ".join(_cell(seen[k], case.expect) for k in ("check", "conns", "pcap"))
        agree = "yes" if set(seen.values()) == {case.expect} else "no"
        lines.append(f"| {name} | {case.what} | {run} | {cells} | {agree} |")
    lines.append("")
    for name in dict.fromkeys(n for n, _, _ in rows):
        runs = [s for n, _, s in rows if n == name]
        right = sum(set(s.values()) == {CASES[name].expect} for s in runs)
        lines.append(f"- {name}: {right}/{len(runs)} runs with one verdict, the expected one")
    return "\n".join(lines)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--runs", type=argtypes.int_range(1, 20), default=3, metavar="N", help="runs per cause"
    )
    p.add_argument("--only", action="append", choices=list(CASES), metavar="CAUSE")
    p.add_argument("--out", default="results", help="folder for bench-three-ways.md")


def run(args: argparse.Namespace, ctx: Context) -> int:
    names = args.only or list(CASES)
    rows: list[tuple[str, int, dict[str, Named]]] = []
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    for name in names:
        with Lab(CASES[name].spec.with_name(f"tw3w-{uuid.uuid4().hex[:6]}")) as lab:
            for i in range(1, args.runs + 1):
                seen = seen_three_ways(lab, out / f"three-ways-{name}-{i}.pcap")
                ctx.progress(f"{name} run {i}: {seen}")
                rows.append((name, i, seen))
    head = (
        f"{started}; kernel {platform.release()}; `check --direction up --modes autotune` "
        f"({SECONDS} s) to Debian's iperf3 on b, `conns` in a every second, tcpdump for "
        "`check --pcap`; 80 Mbit/s x 60 ms unless said. Bold: a reading that is not the "
        "cause's."
    )
    text = f"{head}\n\n{table(rows)}\n"
    (out / "bench-three-ways.md").write_text(text)
    print(text, file=ctx.stdout)
    return int(ExitCode.OK)
