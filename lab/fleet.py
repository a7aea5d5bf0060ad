"""A site's fleet on one machine: a Mesh of N hosts, each running `tcpwizard serve --lock` and
`tcpwizard exporter --mesh` (a full mesh in round-robin slots), and a real Prometheus in the
hub namespace scraping every exporter and evaluating contrib/prometheus's rules.

    python -m tcpwizard.lab.fleet --rules contrib/prometheus/tcpwizard.rules.yml

runs 3 intervals of a 4-host mesh whose host 3 has a small tcp_rmem and prints the table of
docs/fleet.md (checks run, collisions, predictions, busy waits, the alerts that fired). The
end-to-end test (tests/test_fleet_lab.py) runs the same thing. Prometheus listens on the hub's
own loopback only; its HTTP API is queried from a thread switched into the hub namespace.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tcpwizard.lab import netns
from tcpwizard.lab.mesh import Mesh, MeshSpec
from tcpwizard.lab.tun import in_netns
from tcpwizard.mesh import rounds

SERVE_PORT = 5301
EXPORTER_PORT = 9788
PROMETHEUS_LISTEN = "127.0.0.1:9090"
SMALL_RMEM = "4096 16384 32768"  # a far end that cannot receive fast on a 40 ms path


@dataclass(frozen=True)
class CheckRecord:
    near: str
    far: str
    started: float
    finished: float
    measured: bool
    verdict: str
    host_to_fix: str
    busy_waits: int
    exit_code: int
    ran: bool = True  # False: gave up waiting for busy hosts, nothing was sent


@dataclass
class Fleet:
    mesh: Mesh
    workdir: Path
    interval_s: float
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    prometheus: subprocess.Popen[bytes] | None = None

    def target(self, i: int) -> str:
        return f"{self.mesh.addr(i)}:{SERVE_PORT}"

    def exporter(self, i: int) -> str:
        return f"{self.mesh.addr(i)}:{EXPORTER_PORT}"

    # -- Prometheus's HTTP API, from inside the hub ---------------------------------------
    def api(self, path: str, **params: str) -> Any:
        url = f"http://{PROMETHEUS_LISTEN}/api/v1/{path}"
        if params:
            url += "?" + urllib.parse.urlencode(params)
        with in_netns(self.mesh.hub), urllib.request.urlopen(url, timeout=5) as resp:
            doc = json.load(resp)
        if doc.get("status") != "success":
            raise RuntimeError(f"prometheus: {doc}")
        return doc["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        data = self.api("query", query=expr)
        return list(data["result"])

    def alerts(self, state: str = "firing") -> list[dict[str, str]]:
        return [a["labels"] for a in self.api("alerts")["alerts"] if a["state"] == state]

    def wait_prometheus(self, timeout_s: float = 20.0) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                self.api("status/buildinfo")
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError("prometheus did not start") from None
                if self.prometheus is not None and self.prometheus.poll() is not None:
                    log = (self.workdir / "prometheus.log").read_text()[-500:]
                    raise RuntimeError(f"prometheus exited: {log}") from None
                time.sleep(0.3)

    # -- what the exporters recorded ------------------------------------------------------
    def records(self) -> list[CheckRecord]:
        out = []
        for i in range(self.mesh.spec.hosts):
            db = self.workdir / f"h{i}.sqlite3"
            if not db.exists():
                continue
            with contextlib.closing(sqlite3.connect(db)) as conn:
                rows = conn.execute("SELECT report FROM checks ORDER BY ts").fetchall()
            for (text,) in rows:
                doc = json.loads(text)
                mesh = doc.get("mesh") or {}
                verdict = doc.get("verdict") or {}
                target = doc.get("target") or {}
                out.append(
                    CheckRecord(
                        near=self.target(i),
                        far=f"{target.get('host')}:{target.get('port') or SERVE_PORT}",
                        started=float(mesh.get("started", 0.0)),
                        finished=float(mesh.get("finished", 0.0)),
                        measured=bool(doc.get("measured")),
                        verdict=str(verdict.get("limiting_factor")),
                        host_to_fix=str(verdict.get("host_to_fix") or ""),
                        busy_waits=int(doc.get("busy_waits") or 0),
                        exit_code=int(doc.get("exit_code", 3)),
                        ran=bool(mesh.get("ran", True)),
                    )
                )
        return out


def collisions(records: list[CheckRecord]) -> list[tuple[CheckRecord, CheckRecord]]:
    """Pairs of checks through a common host whose run times overlapped."""
    hits = []
    for a, b in itertools.combinations([r for r in records if r.ran], 2):
        if {a.near, a.far} & {b.near, b.far} and a.started < b.finished and b.started < a.finished:
            hits.append((a, b))
    return hits


def _prometheus_config(fleet: Fleet, rules: Path) -> str:
    targets = ", ".join(f'"{fleet.exporter(i)}"' for i in range(fleet.mesh.spec.hosts))
    return (
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        f"rule_files:\n  - {rules}\n"
        "scrape_configs:\n  - job_name: tcpwizard\n    scrape_timeout: 900ms\n"
        f"    static_configs:\n      - targets: [{targets}]\n"
    )


@contextlib.contextmanager
def running_fleet(
    spec: MeshSpec,
    name: str,
    interval_s: float,
    rules: Path | None,
    workdir: Path | None = None,
) -> Iterator[Fleet]:
    """The mesh built, serve and an exporter on every host, Prometheus in the hub (with
    `rules`); everything removed on the way out, also on failure."""
    own_tmp = workdir is None
    work = Path(tempfile.mkdtemp(prefix="tcpwizard-fleet-")) if workdir is None else workdir
    mesh = Mesh(spec, name, owner_pid=os.getpid())
    fleet = Fleet(mesh, work, interval_s)
    try:
        mesh.up()
        # Start everything just after a slot boundary, so the burst of nine programs starting
        # on a small machine is over before the first slot (a real site starts them apart).
        slot = interval_s / len(rounds([str(i) for i in range(spec.hosts)]))
        time.sleep((slot - time.time() % slot + 0.2) % slot)
        n = spec.hosts
        (work / "mesh.txt").write_text("".join(f"{fleet.target(i)} node=h{i}\n" for i in range(n)))
        py = sys.executable
        for i in range(n):
            lock = str(work / f"h{i}.lock")
            serve = [py, "-m", "tcpwizard", "serve", "--bind", mesh.addr(i), "--lock", lock]
            exporter = [
                py, "-m", "tcpwizard", "exporter", "--mesh", str(work / "mesh.txt"),
                "--self", fleet.target(i), "--lock", lock, "--listen", fleet.exporter(i),
                "--interval", f"{interval_s:g}s", "--quick", "--direction", "up",
            ]  # fmt: skip
            env = {**os.environ, "TCPWIZARD_HISTORY": str(work / f"h{i}.sqlite3")}
            for argv, log in ((serve, f"serve-h{i}.log"), (exporter, f"exporter-h{i}.log")):
                with open(work / log, "wb") as f:
                    fleet.procs.append(
                        mesh.popen(i, argv, env=env, stdout=subprocess.DEVNULL, stderr=f)
                    )
        if rules is not None:
            cfg = work / "prometheus.yml"
            cfg.write_text(_prometheus_config(fleet, rules))
            with open(work / "prometheus.log", "wb") as f:
                fleet.prometheus = mesh.popen(
                    "hub",
                    [
                        "prometheus",
                        f"--config.file={cfg}",
                        f"--storage.tsdb.path={work / 'tsdb'}",
                        f"--web.listen-address={PROMETHEUS_LISTEN}",
                        "--log.level=warn",
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=f,
                )
            fleet.wait_prometheus()
        yield fleet
    finally:
        procs = [*fleet.procs, *([fleet.prometheus] if fleet.prometheus else [])]
        for proc in procs:  # all at once: each may take a moment to finish its check
            with contextlib.suppress(OSError):
                proc.terminate()
        for proc in procs:
            with contextlib.suppress(Exception):
                netns.stop(proc, grace_s=5.0)
        mesh.down()
        if own_tmp:
            shutil.rmtree(work, ignore_errors=True)


def until_next_interval(interval_s: float, now: float | None = None) -> float:
    now = time.time() if now is None else now
    return interval_s - now % interval_s


def table(fleet: Fleet, records: list[CheckRecord], fired: list[dict[str, str]]) -> str:
    n = fleet.mesh.spec.hosts
    pairs = {(r.near, r.far) for r in records if r.measured}
    lines = [
        "| checks run | pairs measured | collisions | predictions | busy waits | failed |",
        "|---:|---:|---:|---:|---:|---:|",
        f"| {len(records)} | {len(pairs)}/{n * (n - 1)} | {len(collisions(records))} "
        f"| {sum(not r.measured for r in records)} | {sum(r.busy_waits for r in records)} "
        f"| {sum(r.exit_code == 3 for r in records)} |",
        "",
        "| path | checks | verdicts | alert |",
        "|---|---:|---|---|",
    ]
    alerting = {
        (a.get("instance", "").replace(f":{EXPORTER_PORT}", ""), a.get("target")) for a in fired
    }
    for near, far in sorted({(r.near, r.far) for r in records}):
        mine = [r for r in records if (r.near, r.far) == (near, far)]
        verdicts = ", ".join(
            f"{r.verdict}" + (f"@{r.host_to_fix}" if r.host_to_fix else "") for r in mine
        )
        alert = "TcpwizardPathLimited" if (near.split(":")[0], far) in alerting else ""
        lines.append(f"| {near} -> {far} | {len(mine)} | {verdicts} | {alert} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tcpwizard.lab.fleet")
    p.add_argument(
        "--rules", type=Path, required=True, help="contrib/prometheus/tcpwizard.rules.yml"
    )
    p.add_argument("--hosts", type=int, default=4)
    p.add_argument("--interval", type=float, default=30.0, help="seconds")
    p.add_argument("--intervals", type=int, default=3)
    p.add_argument("--name", default=f"twf-{os.getpid()}")
    args = p.parse_args(argv)
    spec = MeshSpec(hosts=args.hosts, sysctls=((args.hosts - 1, "net.ipv4.tcp_rmem", SMALL_RMEM),))
    with running_fleet(spec, args.name, args.interval, args.rules.resolve()) as fleet:
        # Whole intervals only: from the first boundary a slot from now (every exporter is
        # in its loop by then), then the last check's run time, a scrape and an evaluation.
        slot = args.interval / len(rounds([str(i) for i in range(args.hosts)]))
        soon = time.time() + slot
        begin = soon + until_next_interval(args.interval, soon)
        end = begin + args.intervals * args.interval
        time.sleep(end + 8 - time.time())
        records = [r for r in fleet.records() if begin <= r.started < end]
        fired = [a for a in fleet.alerts() if a.get("alertname") == "TcpwizardPathLimited"]
        print(
            f"{args.hosts} hosts, full mesh, {args.intervals} intervals of {args.interval:g} s "
            f"({len(records)} checks), host {args.hosts - 1} with tcp_rmem {SMALL_RMEM}\n"
        )
        print(table(fleet, records, fired))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
