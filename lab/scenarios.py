"""The misconfiguration suite: each scenario builds a lab with one known cause, runs `check`
from host a against `serve` on host b, checks the verdict names that cause and the right
host, applies the printed fix with `tcpwizard fix` on that host, and re-measures.

Shared by the end-to-end tests (which assert) and `python -m benchmarks scenarios` (which
tabulates).

Why one module of this size: most of it is the table of scenarios, one entry of data per
cause, kept beside the one runner that reads every field of it.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tcpwizard.lab.lab import Lab
from tcpwizard.lab.netns import stop
from tcpwizard.lab.ratecheck import over_line
from tcpwizard.lab.serving import (
    SERVE_PORT,
    iperf3_serving,
    serving,
    tcpwizard_argv,
    wait_port,
)
from tcpwizard.lab.spec import LabSpec, LinkSpec, Side
from tcpwizard.measure.farends.interface import FarEndKind

RATE = 100e6
RTT = 0.050
RECHECK_SHARE = 0.80  # "measurably removes the limit": >= 80 % of the bottleneck rate


def _route_window_clamp(lab: Lab) -> None:
    """b's route back to a advertises at most 64 KB (`ip route ... window`)."""
    out = lab.run(
        "b",
        ["ip", "-4", "route", "show", "dev", lab.ifname, "proto", "kernel"],
        capture_output=True,
        text=True,
        check=True,
    )
    prefix = out.stdout.split()[0]
    lab.run(
        "b", ["ip", "route", "change", prefix, "dev", lab.ifname, "window", "65535"], check=True
    )


# The congested episode, then a clean stretch before the connection closes: Linux caches
# ssthresh only from a connection that ends in congestion avoidance with no loss being
# recovered (tcp_update_metrics, TCP_CA_Open); one closed mid-recovery caches its cwnd alone.
CONGESTED_S = 3.0
CLEAN_S = 1.5  # 30 round trips at the scenario's 50 ms: recovery ends, the window grows little


def _stale_ssthresh(lab: Lab) -> None:
    """A congested episode (3 % drops on b's input, nftables) leaves a small ssthresh in a's
    tcp_metrics cache for b; then the path is clean again."""
    table = ["nft", "-f", "-"]
    rules = (
        "table inet tcpwizard_scenario {\n chain input {\n"
        "  type filter hook input priority 0; policy accept;\n"
        f"  tcp dport {SERVE_PORT} numgen random mod 100 < 3 drop\n }}\n}}\n"
    )
    lab.run("b", table, input=rules, text=True, check=True)
    argv = tcpwizard_argv(
        "transfer", lab.addr_b, "--modes", "autotune", "--duration",
        f"{CONGESTED_S + CLEAN_S:g}", "--json",
    )  # fmt: skip
    proc = lab.popen("a", argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(CONGESTED_S)
    finally:
        lab.run("b", ["nft", "delete", "table", "inet", "tcpwizard_scenario"], check=False)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    shown = lab.run(
        "a", ["ip", "tcp_metrics", "show", lab.addr_b], capture_output=True, text=True, check=False
    ).stdout
    if "ssthresh" not in shown:
        raise RuntimeError(f"no ssthresh was cached for {lab.addr_b}: {shown.strip()!r}")


@dataclass(frozen=True)
class Scenario:
    name: str
    cause: str
    spec: LabSpec
    expect_factor: str
    expect_host: str | None
    check_args: tuple[str, ...] = ()
    setup: Callable[[Lab], None] | None = None
    fix_side: Side | None = "b"  # where the printed fix is applied (None: no fix expected)
    recheck_modes: str = "autotune"
    recheck_direction: str = "up"  # the way the limit shows (down: into host a)
    applies_automatically: bool = True  # False: a setsockopt fix the application makes
    # What runs on host b during the check: tcpwizard serve, a stock `iperf3 -s`, or only
    # a plain TCP port (a web server). The re-measure after the fix always uses serve.
    far_end: FarEndKind = "serve"


def _spec(**kw: Any) -> LabSpec:
    return LabSpec.symmetric(RATE, RTT, **kw)


SERVE_SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        "healthy",
        "a well-tuned path (kernel defaults are enough at 100 Mbit/s x 50 ms)",
        _spec(),
        "path-capacity",
        None,
        fix_side=None,
    ),
    Scenario(
        "receiver-rmem",
        "receiver's net.ipv4.tcp_rmem max is 256 KB",
        _spec(sysctls_b=(("net.ipv4.tcp_rmem", "4096 65536 262144"),)),
        "receiver-window",
        "peer",
    ),
    Scenario(
        "local-rmem",
        "this host's net.ipv4.tcp_rmem max is 256 KB (it downloads slowly, uploads fine)",
        _spec(sysctls_a=(("net.ipv4.tcp_rmem", "4096 65536 262144"),)),
        "receiver-window",
        "local",
        fix_side="a",
        recheck_direction="down",
    ),
    Scenario(
        "peer-wmem",
        "the far end's net.ipv4.tcp_wmem max is 256 KB (downloads from it are slow)",
        _spec(sysctls_b=(("net.ipv4.tcp_wmem", "4096 16384 262144"),)),
        "sender-buffer",
        "peer",
        fix_side="b",
        recheck_direction="down",
    ),
    Scenario(
        "asymmetric",
        "a healthy asymmetric path: 100 Mbit/s out, 10 Mbit/s back",
        LabSpec(LinkSpec(RATE, RTT / 2), LinkSpec(RATE / 10, RTT / 2)),
        "path-capacity",
        None,
        fix_side=None,
    ),
    Scenario(
        "sender-wmem",
        "sender's net.ipv4.tcp_wmem max is 128 KB",
        _spec(sysctls_a=(("net.ipv4.tcp_wmem", "4096 16384 131072"),)),
        "sender-buffer",
        "local",
        fix_side="a",
    ),
    Scenario(
        "window-scaling-off",
        "window scaling off at the receiver",
        _spec(sysctls_b=(("net.ipv4.tcp_window_scaling", "0"),)),
        "window-scaling",
        "peer",
    ),
    Scenario(
        "app-64k",
        "the applications at both ends fix SO_RCVBUF/SO_SNDBUF at 64 KB (stock FTP)",
        _spec(),
        "receiver-window",
        "both",  # measured both ways: each receiver's 64 KB holds its own way down
        check_args=("--modes", "untuned"),
        fix_side=None,
        recheck_modes="static",
        applies_automatically=False,
    ),
    Scenario(
        "loss-reno",
        "1 % random loss, sender runs Reno",
        _spec(loss=0.01, sysctls_a=(("net.ipv4.tcp_congestion_control", "reno"),)),
        "congestion",
        "local",
        fix_side="a",
    ),
    Scenario(
        "sack-off",
        "SACK off at this host, 0.5 % random loss (BBR both ways)",
        _spec(loss=0.005, sysctls_a=(("net.ipv4.tcp_sack", "0"),)),
        "congestion",
        "local",
        fix_side="a",
    ),
    Scenario(
        "route-window",
        "receiver's route back to the sender clamps the window (window 65535)",
        _spec(),
        "receiver-window",
        "peer",
        setup=_route_window_clamp,
    ),
    Scenario(
        "stale-ssthresh",
        "sender (Reno) caches a small ssthresh from a congested episode",
        _spec(
            sysctls_a=(
                ("net.ipv4.tcp_congestion_control", "reno"),
                ("net.ipv4.tcp_no_metrics_save", "0"),
                ("net.ipv4.tcp_no_ssthresh_metrics_save", "0"),
            )
        ),
        "cached-metrics",
        "local",
        setup=_stale_ssthresh,
        fix_side="a",
    ),
)


PORT_ONLY = 8080  # the plain TCP port of "port" scenarios (Python's http.server)

FAR_END_SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        "iperf3-receiver-rmem",
        "the far end runs iperf3 -s; its net.ipv4.tcp_rmem max is 256 KB",
        _spec(sysctls_b=(("net.ipv4.tcp_rmem", "4096 65536 262144"),)),
        "receiver-window",
        "peer",
        far_end="iperf3",
    ),
    Scenario(
        "iperf3-healthy",
        "the far end runs iperf3 -s on a well-tuned path",
        _spec(),
        "path-capacity",
        None,
        fix_side=None,
        far_end="iperf3",
    ),
    Scenario(
        "iperf3-window-scaling-off",
        "the far end runs iperf3 -s with window scaling off",
        _spec(sysctls_b=(("net.ipv4.tcp_window_scaling", "0"),)),
        "window-scaling",
        "peer",
        far_end="iperf3",
    ),
    Scenario(
        "port-window-scaling-off",
        "only a web server answers (no serve, no iperf3); window scaling off there",
        _spec(sysctls_b=(("net.ipv4.tcp_window_scaling", "0"),)),
        "window-scaling",
        "peer",
        check_args=("--tcp-port", str(PORT_ONLY), "--allow-predicted"),
        far_end="tcp-port",
    ),
)
# Every row: serve on the far end first, then the far ends that do not run serve.
SCENARIOS = SERVE_SCENARIOS + FAR_END_SCENARIOS


@contextlib.contextmanager
def _far_end(lab: Lab, kind: FarEndKind) -> Iterator[None]:
    """Host b runs what the scenario says during the check."""
    if kind == "serve":
        with serving(lab, "b"):
            yield
    elif kind == "iperf3":
        with iperf3_serving(lab, "b"):
            yield
    else:
        argv = [sys.executable, "-m", "http.server", "--bind", lab.addr_b, str(PORT_ONLY)]
        web = lab.popen("b", argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_port(lab, "b", PORT_ONLY)
            yield
        finally:
            stop(web)


@dataclass(frozen=True)
class ScenarioResult:
    name: str
    cause: str
    expect: str
    factor: str
    host: str | None
    confidence: float
    fixes: tuple[str, ...]
    before_mbps: float | None
    after_mbps: float | None
    rate_mbps: float
    check_s: float
    applied: tuple[str, ...] = ()
    skipped: tuple[str, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)
    far_end: str = "serve"
    measured: bool = True
    # Rate fields of the check's and the recheck's JSON above the lab's line rate (+1 %).
    over_line: tuple[str, ...] = ()

    @property
    def verdict_ok(self) -> bool:
        want_factor, _, want_host = self.expect.partition("@")
        return self.factor == want_factor and (self.host or "") == want_host

    @property
    def fixed_ok(self) -> bool:
        return self.after_mbps is not None and self.after_mbps >= RECHECK_SHARE * self.rate_mbps


def _json_run(lab: Lab, side: Side, argv: list[str], env: dict[str, str]) -> tuple[int, Any]:
    out = lab.run(side, argv, capture_output=True, text=True, env=env, timeout=120)
    try:
        return out.returncode, json.loads(out.stdout)
    except ValueError:
        raise RuntimeError(
            f"{' '.join(argv[2:5])} gave no JSON (exit {out.returncode}): {out.stderr[-400:]}"
        ) from None


def _current(doc: dict[str, Any]) -> float | None:
    gap = doc["verdict"]["wizard_gap"]
    value = gap.get("current_mbps")
    return float(value) if value is not None else None


def run_scenario(sc: Scenario, lab: Lab) -> ScenarioResult:
    """Runs on a fresh lab built from sc.spec (the fix changes the lab's hosts)."""
    with tempfile.TemporaryDirectory(prefix="tw-scenario-") as tmp:
        env = {
            **os.environ,
            "TCPWIZARD_SYSCTL_DIR": str(Path(tmp, "sysctl.d")),
            "TCPWIZARD_STATE_DIR": str(Path(tmp, "state")),
            "TCPWIZARD_HISTORY": str(Path(tmp, "history.sqlite3")),
        }
        with _far_end(lab, sc.far_end):
            if sc.setup is not None:
                sc.setup(lab)
            t0 = time.monotonic()
            _, doc = _json_run(
                lab, "a", tcpwizard_argv("check", lab.addr_b, "--json", *sc.check_args), env
            )
            check_s = time.monotonic() - t0
        verdict = doc["verdict"]
        with serving(lab, "b"):
            plan = Path(tmp, "report.json")
            plan.write_text(json.dumps(doc))
            applied: list[str] = []
            skipped: list[str] = []
            if sc.fix_side is not None:
                role = "local" if sc.fix_side == "a" else "peer"
                _, res = _json_run(
                    lab,
                    sc.fix_side,
                    tcpwizard_argv("fix", "--plan", str(plan), "--yes", "--for", role, "--json"),
                    env,
                )
                applied = [f"{a['target']}={a['new']}" for a in res["applied"]]
                skipped = [f"{s['target']}: {s['reason']}" for s in res["skipped"]]
            recheck_args = ["--modes", sc.recheck_modes, "--duration", "4"]
            recheck_args += ["--direction", sc.recheck_direction]
            _, after = _json_run(
                lab, "a", tcpwizard_argv("transfer", lab.addr_b, "--json", *recheck_args), env
            )
        modes = after["transfer"]["modes"]
        after_mbps = max((m["throughput_mbps"] for m in modes), default=None)
        return ScenarioResult(
            name=sc.name,
            cause=sc.cause,
            expect=f"{sc.expect_factor}@{sc.expect_host or ''}",
            factor=verdict["limiting_factor"],
            host=verdict["host_to_fix"],
            confidence=verdict["confidence"],
            fixes=tuple(f["command"] for f in doc["fixes"]),
            before_mbps=_current(doc),
            after_mbps=after_mbps,
            rate_mbps=RATE / 1e6,
            check_s=check_s,
            applied=tuple(applied),
            skipped=tuple(skipped),
            far_end=sc.far_end,
            measured=bool(doc.get("measured", True)),
            over_line=tuple(over_line([doc, after], lab.line_rate_mbps)),
        )


def results_table(results: list[ScenarioResult]) -> str:
    rows = [
        "| scenario | far end | cause | verdict (host) | expected | conf. | before Mbit/s | "
        "after fix Mbit/s | after / rate | check s | fixes printed |",
        "|---|---|---|---|---|---:|---:|---:|---:|---:|---|",
    ]
    for r in results:
        ok = "✅" if r.verdict_ok else "❌"
        fixed = "-" if r.after_mbps is None else f"{r.after_mbps / r.rate_mbps:.0%}"
        fixed += " ✅" if r.fixed_ok else " ❌"
        before = "-" if r.before_mbps is None else f"{r.before_mbps:.1f}"
        after = "-" if r.after_mbps is None else f"{r.after_mbps:.1f}"
        fixes = "<br>".join(f"`{c}`" for c in r.fixes) or "none"
        rows.append(
            f"| {r.name} | {r.far_end}{'' if r.measured else ' (predicted)'} | {r.cause} | "
            f"{ok} {r.factor} ({r.host or '-'}) | {r.expect} | "
            f"{r.confidence:.2f} | {before} | {after} | {fixed} | {r.check_s:.1f} | {fixes} |"
        )
    return "\n".join(rows) + "\n"


def run_all(make_lab: Callable[[LabSpec], Lab], only: tuple[str, ...] = ()) -> list[ScenarioResult]:
    results = []
    for sc in SCENARIOS:
        if only and sc.name not in only:
            continue
        with make_lab(sc.spec) as lab:
            results.append(run_scenario(sc, lab))
    return results


def run_subprocess_ok(argv: list[str]) -> bool:
    return subprocess.run(argv, capture_output=True, check=False).returncode == 0
