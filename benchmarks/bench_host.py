"""Causes inside a host, measured: `python -m benchmarks host` (docs/bench-host.md).

Per lab configuration (rate x RTT) and cause, `tcpwizard check B --json` runs N times from
host a against serve on host b, and the table counts the runs whose verdict and host are
right:

- cpu-starved: serve's process in a cgroup with a CPU quota of CPU_SHARE (lab/hostload.py)
  → host-cpu at the peer;
- host-drops: host a's lab interface with a two-packet transmit queue → interface at the
  local host;
- healthy: neither → path-capacity (the control row: no false alarm from the new rules).

One configuration per invocation (`--rate`, `--rtt`), so a shared machine's lab lock is
held for minutes, not for the whole matrix; `--append` adds the rows to a table file.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

from tcpwizard.lab.hostload import cpu_quota, set_txqueuelen
from tcpwizard.lab.lab import TXQUEUELEN, Lab
from tcpwizard.lab.serving import serving, tcpwizard_argv
from tcpwizard.lab.spec import LabSpec

# Of one core per 1 s period. Not scaled with the rate: answering the control protocol has
# a fixed cost, and at 0.25 % serve no longer answered `check` at all (50 Mbit/s x 20 ms:
# `unknown`, with the note that serve accepted the connection but sent no hello).
CPU_SHARE = 0.005
TXQUEUE_PACKETS = 2
CAUSES = {
    "cpu-starved": ("host-cpu", "peer"),
    "host-drops": ("interface", "local"),
    "healthy": ("path-capacity", None),
}


@dataclass(frozen=True)
class Run:
    cause: str
    factor: str
    host: str | None
    confidence: float
    current_mbps: float | None
    seconds: float

    @property
    def right(self) -> bool:
        return (self.factor, self.host) == CAUSES[self.cause]


@contextlib.contextmanager
def _cause(lab: Lab, cause: str) -> Iterator[None]:
    with serving(lab, "b") as proc:
        if cause == "cpu-starved":
            with cpu_quota(proc.pid, CPU_SHARE):
                yield
        elif cause == "host-drops":
            set_txqueuelen(lab, "a", TXQUEUE_PACKETS)
            try:
                yield
            finally:
                set_txqueuelen(lab, "a", TXQUEUELEN)
        else:
            yield


def run_once(lab: Lab, cause: str, keep: str | None = None) -> Run:
    with _cause(lab, cause):
        t0 = time.monotonic()
        out = lab.run(
            "a",
            tcpwizard_argv("check", lab.addr_b, "--json"),
            capture_output=True,
            text=True,
            timeout=240,
        )
        seconds = time.monotonic() - t0
    if keep:
        os.makedirs(keep, exist_ok=True)
        with open(os.path.join(keep, f"{cause}-{uuid.uuid4().hex[:6]}.json"), "w") as f:
            f.write(out.stdout)
    try:
        doc = json.loads(out.stdout)
    except ValueError:
        return Run(cause, f"no JSON (exit {out.returncode})", None, 0.0, None, seconds)
    v = doc["verdict"]
    return Run(
        cause,
        v["limiting_factor"],
        v["host_to_fix"],
        float(v["confidence"]),
        v["wizard_gap"].get("current_mbps"),
        seconds,
    )


def table_rows(rate_mbps: float, rtt_ms: float, runs: list[Run]) -> list[str]:
    rows = []
    for cause, (factor, host) in CAUSES.items():
        mine = [r for r in runs if r.cause == cause]
        if not mine:
            continue
        right = sum(r.right for r in mine)
        wrong = sorted({f"{r.factor} ({r.host or '-'})" for r in mine if not r.right})
        rates = [r.current_mbps for r in mine if r.current_mbps is not None]
        rate = f"{min(rates):.1f}-{max(rates):.1f}" if rates else "-"
        rows.append(
            f"| {cause} | {rate_mbps:g} | {rtt_ms:g} | {factor} ({host or '-'}) | "
            f"{right}/{len(mine)} | {', '.join(wrong) or '-'} | {rate} | "
            f"{sum(r.seconds for r in mine) / len(mine):.0f} |"
        )
    return rows


HEADER = (
    "| cause | rate Mbit/s | RTT ms | expected verdict (host) | right | wrong verdicts | "
    "current Mbit/s | check s |\n|---|---:|---:|---|---:|---|---:|---:|"
)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks host")
    p.add_argument("--rate", type=float, default=100.0, help="Mbit/s")
    p.add_argument("--rtt", type=float, default=50.0, help="ms")
    p.add_argument("--runs", type=int, default=10)
    p.add_argument("--causes", default=",".join(CAUSES))
    p.add_argument("--append", help="add the rows to this Markdown file")
    p.add_argument("--keep", help="keep each run's JSON report in this folder")
    a = p.parse_args(argv)
    causes = [c for c in a.causes.split(",") if c]
    bad = [c for c in causes if c not in CAUSES]
    if bad or not 1 <= a.runs <= 50:
        print(f"error: unknown cause {bad[0]!r}" if bad else "error: runs 1-50", file=sys.stderr)
        return 2
    spec = LabSpec.symmetric(a.rate * 1e6, a.rtt / 1e3).with_name(f"twhb-{uuid.uuid4().hex[:6]}")
    runs: list[Run] = []
    lab = Lab(spec, owner_pid=os.getpid()).up()
    try:
        for i in range(a.runs):
            for cause in causes:
                r = run_once(lab, cause, a.keep)
                runs.append(r)
                print(
                    f"{i + 1:2} {cause:12} {r.factor} ({r.host or '-'}) {r.confidence:.2f} "
                    f"{'ok' if r.right else 'WRONG'} {r.seconds:.0f}s",
                    file=sys.stderr,
                    flush=True,
                )
    finally:
        lab.down()
    rows = table_rows(a.rate, a.rtt, runs)
    print(HEADER)
    print("\n".join(rows))
    if a.append:
        with open(a.append, "a") as f:
            f.write("\n".join(rows) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
