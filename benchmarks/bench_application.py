"""An application that holds the rate, made for real in the lab, judged by `conns` on both
hosts and by `check --pcap` on a capture taken in host a during the same transfer:

- reader-far: Debian's iperf3 uploads a -> b; b's `iperf3 -s` reads under a cgroup CPU
  quota (1 ms per 100 ms, 1 KB reads): a reader that does not read, at the far end;
- reader-near: the same with `iperf3 -R`, the reading client in a under the quota;
- scp, sftp: Debian's OpenSSH (sshd in b, keys made for the run) uploads a sparse file from a
  on a path whose bandwidth-delay product exceeds SSH's 2 MB channel window;
- healthy: the same iperf3 upload with no quota and iperf3's own 128 KB writes: nothing but
  the path holds it, the baseline the reader scenarios' capture shares are read against.

    python -m benchmarks application [--runs 3] [--rates 200M,300M]
        [--rtts 150ms,250ms] [--scenarios reader-far,reader-near,scp,sftp,healthy]

Each run prints one line; the table at the end counts, per scenario and view, the runs whose
verdict and host were both right. A second table gives, per scenario, the range of the
capture's reader shares (the share of the data acknowledged with the receiver's right edge
still, and under ACKs it held back; advice/observation.py STILL_SHARE and HELD_SHARE are
read against it).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks import buffer_maxima
from tcpwizard.lab.app_lab import (
    payload,
    sftp_batch,
    ssh_argv,
    sshd_serving,
)
from tcpwizard.lab.hostload import cpu_quota
from tcpwizard.lab.lab import Lab
from tcpwizard.lab.netns import LabError, stop
from tcpwizard.lab.serving import check_pcap, iperf3_serving, run_tcpwizard
from tcpwizard.lab.spec import LabSpec, Side
from tcpwizard.lab.tools import capturing
from tcpwizard.units import parse_duration, parse_rate

# The reader's CPU: 1 ms in every 250 ms (the kernel's smallest quota, over a period that
# makes its stalls long), reading 1 KB at a time so the system calls, not the copy, cost
# the time: ~40 Mbit/s here, far below every rate of the grid, whatever the machine's
# memory bandwidth.
READER_QUOTA_US, READER_PERIOD_US, READER_BLOCK = 1000, 250_000, "1K"
TRANSFER_S = 11  # long enough for slow start at 250 ms and both conns runs
WARMUP_S = 4.0  # past slow start: 2 MB at 250 ms takes ~9 round trips
CONNS_INTERVAL = "1.5s"
SSH_SETUP_RTTS = 12
# Room for 300 Mbit/s x 250 ms (9.4 MB) in both directions.
BIG_BUFFERS = buffer_maxima(33554432, 33554432)
SCENARIOS = ("reader-far", "reader-near", "scp", "sftp", "healthy")
VIEWS = ("conns a", "conns b", "pcap a")


def _application_at(*hosts: str) -> dict[str, tuple[str, str | None]]:
    """Every view names the application, each with its host (in the order of VIEWS)."""
    return {view: ("application", host) for view, host in zip(VIEWS, hosts, strict=True)}


# What each view must say: (limiting factor, host) for conns in a, conns in b, the capture.
EXPECTED: dict[str, dict[str, tuple[str, str | None]]] = {
    "reader-far": _application_at("peer", "local", "peer"),
    "reader-near": _application_at("local", "peer", "local"),
    "scp": _application_at("both", "both", "both"),
    "sftp": _application_at("both", "both", "both"),
    "healthy": {view: ("path-capacity", None) for view in VIEWS},
}
# The capture's figures a reader leaves (measure/observe/capture.py), kept per run.
READER_SHARES = ("edge_still_share", "held_ack_share", "window_full_share")


@dataclass(frozen=True)
class Timing:
    transfer_s: int = TRANSFER_S
    warmup_s: float = WARMUP_S


@dataclass
class Outcome:
    scenario: str
    rate_bps: float
    rtt_s: float
    views: dict[str, tuple[str | None, str | None]] = field(default_factory=dict)
    processes: dict[str, str | None] = field(default_factory=dict)
    mbps: dict[str, float] = field(default_factory=dict)
    evidence: dict[str, dict[str, Any]] = field(default_factory=dict)
    error: str = ""

    def right(self, view: str) -> bool:
        return self.views.get(view) == EXPECTED[self.scenario][view]


def spec_for(rate_bps: float, rtt_s: float) -> LabSpec:
    return LabSpec.symmetric(rate_bps, rtt_s, sysctls_a=BIG_BUFFERS, sysctls_b=BIG_BUFFERS)


def _busiest(doc: dict[str, Any]) -> dict[str, Any] | None:
    busy = [c for c in doc.get("connections", []) if c["verdict"] is not None]
    return max(busy, key=lambda c: max(c["send_mbps"], c["recv_mbps"]), default=None)


def _document(proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """The JSON document a tcpwizard run printed, or the end of its stderr when none."""
    try:
        doc: dict[str, Any] = json.loads(proc.stdout)
    except ValueError:
        return {"error": proc.stderr[-300:]}
    return doc


def conns_view(lab: Lab, side: Side, port: int) -> dict[str, Any]:
    args = ("conns", "--json", "--port", str(port), "--interval", CONNS_INTERVAL)
    return _document(run_tcpwizard(lab, side, *args, timeout=60))


def pcap_view(lab: Lab, path: Path) -> dict[str, Any]:
    return _document(check_pcap(lab, path, timeout=180))


def _views_during(lab: Lab, port: int, out: Outcome) -> None:
    """conns in both hosts at once, once the transfer is up to speed."""
    docs: dict[str, dict[str, Any]] = {}

    def one(side: Side) -> None:
        docs[side] = conns_view(lab, side, port)

    threads = [threading.Thread(target=one, args=(s,)) for s in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(90)
    for side in ("a", "b"):
        view = f"conns {side}"
        c = _busiest(docs.get(side, {}))
        if c is None:
            out.views[view] = (None, None)
            continue
        v = c["verdict"]
        out.views[view] = (v["limiting_factor"], v["host_to_fix"])
        out.processes[view] = c["process"]["name"] if c["process"] else None
        out.mbps[view] = max(c["send_mbps"], c["recv_mbps"])
        ti = c["tcp_info"]
        out.evidence[view] = {
            k: ti.get(k)
            for k in ("app_limited", "inflight_max", "zero_window_samples", "rqueue_max")
        }


def _reader(lab: Lab, near: bool | None, out: Outcome, t: Timing) -> None:
    """iperf3 a -> b (b -> a with `near`), its reader under the quota; None: no quota, and
    iperf3's own block size (the healthy baseline)."""
    with iperf3_serving(lab, "b") as server:
        argv = ["iperf3", "-c", lab.addr_b, "-t", str(t.transfer_s), "-J"]
        if near is not None:
            argv += ["-l", READER_BLOCK]
        client = lab.popen(
            "a", [*argv, *(["-R"] if near else [])], stdout=subprocess.PIPE, text=True
        )
        try:
            reader = client.pid if near else server.pid
            quota = (
                cpu_quota(reader, READER_QUOTA_US / READER_PERIOD_US, period_us=READER_PERIOD_US)
                if near is not None
                else contextlib.nullcontext()
            )
            with quota:
                time.sleep(t.warmup_s)
                _views_during(lab, 5201, out)
                client.wait(timeout=t.transfer_s + 60)
        finally:
            stop(client)


def _ssh(lab: Lab, tool: str, out: Outcome, t: Timing) -> None:
    size = int(out.rate_bps / 8 * (t.transfer_s + 5))  # more than the path moves in time
    with sshd_serving(lab, "b") as srv, payload(size) as src:
        proc = lab.popen(
            "a",
            ssh_argv(tool, srv, src, t.transfer_s + round(SSH_SETUP_RTTS * lab.rtt_s + 0.5)),
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        try:
            assert proc.stdin is not None
            if tool == "sftp":
                proc.stdin.write(sftp_batch(src))
            proc.stdin.close()
            # SSH's own set-up (key exchange, auth, channel, sftp) takes ~12 round trips
            # before the first byte of the file: 3 s at 250 ms.
            time.sleep(t.warmup_s + SSH_SETUP_RTTS * lab.rtt_s)
            _views_during(lab, 22, out)
            proc.wait(timeout=t.transfer_s + 30)
        finally:
            stop(proc)


def run_once(
    lab: Lab, scenario: str, views: tuple[str, ...] = ("pcap a",), timing: Timing = Timing()
) -> Outcome:
    """One transfer of `scenario` in `lab`, judged by conns in both hosts (and check
    --pcap on the capture when "pcap a" is in `views`)."""
    out = Outcome(scenario, lab.spec.forward.rate_bps, lab.spec.rtt_s)
    with tempfile.TemporaryDirectory(prefix="tcpwizard-app-") as tmp:
        path = Path(tmp) / "run.pcap"
        cap = capturing(lab, path) if "pcap a" in views else contextlib.nullcontext()
        try:
            with cap:
                if scenario in ("reader-far", "reader-near", "healthy"):
                    near = None if scenario == "healthy" else scenario == "reader-near"
                    _reader(lab, near, out, timing)
                else:
                    _ssh(lab, scenario, out, timing)
        except (LabError, RuntimeError, OSError, subprocess.SubprocessError) as exc:
            out.error = str(exc)[:200]
            return out
        if "pcap a" in views:
            doc = pcap_view(lab, path)
            d = doc.get("diagnosis")
            if d:
                v = d["verdict"]
                out.views["pcap a"] = (v["limiting_factor"], v["host_to_fix"])
                out.mbps["pcap a"] = d["flow"]["steady_mbps"]
                out.evidence["pcap a"] = {
                    k: d["flow"][k]
                    for k in (
                        "zero_windows",
                        "window_p50",
                        "max_window",
                        "inflight_p50",
                        *READER_SHARES,
                    )
                }
            else:
                out.views["pcap a"] = (None, None)
    return out


def _fmt(view: tuple[str | None, str | None] | None) -> str:
    if view is None:
        return "-"
    return f"{view[0]}/{view[1]}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks application")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--rates", default="200M,300M")
    ap.add_argument("--rtts", default="150ms,250ms")
    ap.add_argument("--scenarios", default=",".join(SCENARIOS))
    ap.add_argument("--json", help="append each run as a JSON line to this file")
    a = ap.parse_args(argv)
    scenarios = [s for s in a.scenarios.split(",") if s]
    bad = [s for s in scenarios if s not in SCENARIOS]
    if bad:
        print(f"unknown scenario {bad[0]!r}: use {', '.join(SCENARIOS)}", file=sys.stderr)
        return 2
    rates = [parse_rate(r) for r in a.rates.split(",")]
    rtts = [parse_duration(r, default_unit="ms") for r in a.rtts.split(",")]
    outcomes: list[Outcome] = []
    for rate in rates:
        for rtt in rtts:
            spec = spec_for(rate, rtt)
            name = f"twba-{int(time.time()) % 100000}"
            with Lab(LabSpec(spec.forward, spec.reverse, name, sysctls_a=spec.sysctls_a,
                             sysctls_b=spec.sysctls_b)) as lab:  # fmt: skip
                for scenario in scenarios:
                    for i in range(a.runs):
                        o = run_once(lab, scenario)
                        outcomes.append(o)
                        views = "  ".join(
                            f"{k}={_fmt(o.views.get(k))}{'' if o.right(k) else '(!)'}"
                            f"[{o.processes.get(k) or ''}{o.mbps.get(k, 0):.0f}M]"
                            for k in EXPECTED[scenario]
                        )
                        print(
                            f"{rate / 1e6:.0f}M {rtt * 1e3:.0f}ms {scenario:<11} #{i + 1} "
                            f"{views} {o.error}",
                            flush=True,
                        )
                        if a.json:
                            with open(a.json, "a") as f:
                                f.write(json.dumps(o.__dict__) + "\n")
    print()
    print(table(outcomes))
    print()
    print(shares_table(outcomes))
    return 0


def table(outcomes: list[Outcome]) -> str:
    lines = ["| scenario | view | expected | right / runs |", "|---|---|---|---|"]
    for scenario in dict.fromkeys(o.scenario for o in outcomes):
        mine = [o for o in outcomes if o.scenario == scenario]
        for view, want in EXPECTED[scenario].items():
            ok = sum(o.right(view) for o in mine)
            lines.append(
                f"| {scenario} | {view} | {want[0]}, {want[1] or '-'} | {ok} / {len(mine)} |"
            )
    return "\n".join(lines)


def shares_table(outcomes: list[Outcome]) -> str:
    """Per scenario, the range (min-max over its runs) of each reader share the capture saw."""
    head = " | ".join(READER_SHARES)
    lines = [f"| scenario | captures | {head} |", "|---|---:|" + "---|" * len(READER_SHARES)]
    for scenario in dict.fromkeys(o.scenario for o in outcomes):
        seen = [
            o.evidence["pcap a"]
            for o in outcomes
            if o.scenario == scenario and "pcap a" in o.evidence
        ]
        cells = []
        for k in READER_SHARES:
            got = [float(e[k]) for e in seen if e.get(k) is not None]
            cells.append(f"{min(got):.2f}-{max(got):.2f}" if got else "-")
        lines.append(f"| {scenario} | {len(seen)} | {' | '.join(cells)} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
