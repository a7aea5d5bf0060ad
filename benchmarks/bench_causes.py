"""`python -m benchmarks causes`: causes outside the hosts' settings, each made for real in
the lab, at two rates and two RTTs; `check` judged on every run (verdict and host), the
policer's measured rate against the configured one, and the RTT under load against a `ping`
run beside a transfer.

- policer: an nftables token bucket (lab/policer.py) at the far end of the bottleneck, at a
  fifth of the line rate; the hosts keep the kernel's congestion control (BBR here).
- bufferbloat: a drop-tail queue of 8 BDP at the bottleneck; both hosts run Reno, a loss-
  based sender like the cubic most hosts run (this kernel builds reno and bbr only): BBR
  keeps a deep queue nearly empty, so a bloated buffer hurts only loss-based traffic.

Each case holds the lab for about 10 runs x 15 s; results are appended to
OUT/causes.jsonl, and the table (OUT/bench-causes.md) is rebuilt from every case there, so
the cases can run one at a time (`--only policer-100m-30ms`), each under the lab lock.
Every check's whole JSON report is kept in OUT/reports, named in its run's row.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import statistics
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tcpwizard.context import Context
from tcpwizard.exitcodes import ExitCode, UsageError
from tcpwizard.lab.lab import Lab
from tcpwizard.lab.netns import stop
from tcpwizard.lab.serving import serving, tcpwizard_argv
from tcpwizard.lab.spec import LabSpec
from tcpwizard.lab.traffic import CrossTraffic

RUNS = 10
PING_RUNS = 3
TRANSFER_S = 6.0  # the ping-beside transfer: its second half is what both are judged on
PING_INTERVAL_S = 0.05
RENO = (("net.ipv4.tcp_congestion_control", "reno"),)


@dataclass(frozen=True)
class Case:
    name: str
    cause: str
    rate_bps: float
    rtt_s: float
    expect_factor: str
    expect_host: str | None
    policer_bps: float | None = None
    queue_bdps: float | None = None
    sysctls: tuple[tuple[str, str], ...] = ()
    loss: float = 0.0  # random, each way
    jitter_s: float = 0.0  # each packet's one-way delay varied by up to this, order kept
    policed_way_back_only: bool = False  # the policer on b -> a alone
    direction: str = "up"  # the way the check's transfer runs (down: b -> a)
    # Others' traffic through the bottleneck all through the runs (iperf3, lab/traffic.py):
    # UDP at this rate or this many TCP flows, b -> a when cross_way_back.
    cross_udp_bps: float = 0.0
    cross_tcp_flows: int = 0
    cross_way_back: bool = False

    def cross(self, lab: Lab, seconds: float) -> contextlib.AbstractContextManager[object]:
        """Others' traffic for `seconds` (nothing when the case has none)."""
        if not (self.cross_udp_bps or self.cross_tcp_flows):
            return contextlib.nullcontext()
        return CrossTraffic(
            lab,
            udp_bps=self.cross_udp_bps,
            tcp_flows=self.cross_tcp_flows,
            duration_s=seconds,
            reverse=self.cross_way_back,
        )

    def spec(self) -> LabSpec:
        queue = round(self.queue_bdps * self.rate_bps * self.rtt_s / 8) if self.queue_bdps else None
        spec = LabSpec.symmetric(
            self.rate_bps,
            self.rtt_s,
            loss=self.loss,
            jitter_s=self.jitter_s,
            queue_bytes=queue,
            sysctls_a=self.sysctls,
            sysctls_b=self.sysctls,
            policer_bps=self.policer_bps,
        )
        if self.policed_way_back_only:
            spec = replace(spec, forward=replace(spec.forward, policer_bps=None))
        return spec


def _grid(factor: str, rates: tuple[float, ...], cause: Callable[[float], str]) -> list[Case]:
    """The `factor` case at each rate and each RTT, named after the three; the path is the
    host to fix."""
    return [
        Case(
            f"{factor}-{rate / 1e6:.0f}m-{rtt * 1e3:.0f}ms", cause(rate), rate, rtt, factor, "path"
        )
        for rate in rates
        for rtt in (0.030, 0.080)
    ]


CASES = (
    *(
        replace(c, policer_bps=c.rate_bps / 5)
        for c in _grid(
            "policer", (50e6, 100e6), lambda r: f"policed at {r / 5e6:.0f} of {r / 1e6:.0f} Mbit/s"
        )
    ),
    *(
        replace(c, queue_bdps=8.0, sysctls=RENO)
        for c in _grid(
            "bufferbloat",
            (20e6, 50e6),
            lambda r: f"8 BDP drop-tail queue at {r / 1e6:.0f} Mbit/s, Reno",
        )
    ),
    # Two readings of one transfer: Reno with a handful of segments a window, a tenth of
    # them lost, near the loss bound of that share; a bucket drops them only above its
    # rate, random loss drops the idle probes too (advice/idle_loss.py).
    Case(
        "small-bucket-9m-30ms", "policed at 3 of 9 Mbit/s, Reno", 9e6, 0.030, "policer", "path",
        policer_bps=3e6, queue_bdps=1.5, sysctls=RENO,
    ),
    Case(
        "random-loss-9m-30ms", "5 % random loss each way at 9 Mbit/s, Reno", 9e6, 0.030,
        "congestion", "local", queue_bdps=1.5, sysctls=RENO, loss=0.05,
    ),
    # Delay jitter (order kept, as netem with a rate): every flow carries the top of its
    # range with no queue anywhere (advice/path_jitter.py). The same three readings on it.
    Case(
        "policer-jitter-100m-40ms", "policed at 20 of 100 Mbit/s, +-8 ms jitter", 100e6, 0.040,
        "policer", "path", policer_bps=20e6, jitter_s=0.008,
    ),
    # A bucket one way only: the upload sees the line, the download the policed rate; BBR's
    # startup queue stands in front of the bucket while it drops (advice/rules/policer.py).
    Case(
        "policer-way-back-100m-40ms", "policed at 20 of 100 Mbit/s, b -> a only", 100e6, 0.040,
        "policer", "path", policer_bps=20e6, policed_way_back_only=True, direction="down",
    ),
    Case(
        "policer-way-back-reno-100m-40ms", "policed at 20 of 100 Mbit/s, b -> a only, Reno",
        100e6, 0.040, "policer", "path", policer_bps=20e6, policed_way_back_only=True,
        direction="down", sysctls=RENO,
    ),
    # Others' traffic on the way back only, the download checked: the streams serve sends
    # back find it shared (measure/probes/availbw_down.py).
    Case(
        "udp-way-back-100m-50ms", "60 Mbit/s of others' UDP on 100 Mbit/s, b -> a only",
        100e6, 0.050, "cross-traffic", None, direction="down", cross_udp_bps=60e6,
        cross_way_back=True,
    ),
    Case(
        "tcp-flows-way-back-100m-50ms", "2 TCP flows of others on 100 Mbit/s, b -> a only",
        100e6, 0.050, "cross-traffic", None, direction="down", cross_tcp_flows=2,
        cross_way_back=True,
    ),
    Case(
        "healthy-jitter-100m-40ms", "1 BDP queue at 100 Mbit/s, +-8 ms jitter", 100e6, 0.040,
        "path-capacity", None, queue_bdps=1.0, jitter_s=0.008,
    ),
    Case(
        "random-loss-jitter-100m-60ms", "0.5 % random loss each way, Reno, +-5 ms jitter",
        100e6, 0.060, "congestion", "local", queue_bdps=1.0, sysctls=RENO, loss=0.005,
        jitter_s=0.005,
    ),
)  # fmt: skip


def isolated_env(tmp: str) -> dict[str, str]:
    """The environment a bench's tcpwizard runs in: its state, history and sysctl files
    under `tmp`, never the host's."""
    return {
        **os.environ,
        "TCPWIZARD_SYSCTL_DIR": str(Path(tmp, "sysctl.d")),
        "TCPWIZARD_STATE_DIR": str(Path(tmp, "state")),
        "TCPWIZARD_HISTORY": str(Path(tmp, "history.sqlite3")),
    }


def json_report(lab: Lab, argv: list[str], env: dict[str, str]) -> dict[str, Any]:
    """Run a tcpwizard command in host a; its JSON document."""
    out = lab.run("a", argv, capture_output=True, text=True, env=env, timeout=180)
    try:
        doc: dict[str, Any] = json.loads(out.stdout)
    except ValueError:
        raise RuntimeError(f"no JSON (exit {out.returncode}): {out.stderr[-300:]}") from None
    return doc


def _autotune(doc: dict[str, Any], direction: str = "up") -> dict[str, Any] | None:
    modes = (doc.get("transfer") or {}).get("modes") or []
    return next((m for m in modes if m["mode"] == "autotune" and m["direction"] == direction), None)


def check_run(
    lab: Lab, env: dict[str, str], keep: Path | None = None, direction: str = "up"
) -> dict[str, Any]:
    """One `check --direction DIRECTION --modes autotune`: what the bench keeps of it (and
    the whole report, in `keep`, named in the row, so a miss can be read later)."""
    t0 = time.monotonic()
    argv = ("check", lab.addr_b, "--json", "--direction", direction, "--modes", "autotune")
    doc = json_report(lab, tcpwizard_argv(*argv), env)
    kept = None
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        kept = keep / f"check-{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:4]}.json"
        kept.write_text(json.dumps(doc))
    v = doc["verdict"]
    m = _autotune(doc, direction) or {}
    lat = m.get("latency_under_load") or {}
    return {
        "factor": v["limiting_factor"],
        "host": v["host_to_fix"],
        "confidence": v["confidence"],
        "plateau_mbps": m.get("rate_plateau_mbps"),
        "rtt_load_ms": lat.get("median_ms"),
        "rtt_p90_ms": lat.get("p90_ms"),
        "rtt_idle_ms": lat.get("idle_ms"),
        "rpm": lat.get("rpm"),
        "seconds": round(time.monotonic() - t0, 1),
        "report": kept.name if kept is not None else None,
    }


@contextlib.contextmanager
def _pinging(lab: Lab) -> Iterator[subprocess.Popen[str]]:
    argv = ["ping", "-n", "-D", "-i", str(PING_INTERVAL_S), lab.addr_b]
    proc = lab.popen("a", argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        yield proc
    finally:
        stop(proc)


def ping_rtts(text: str, since: float, until: float) -> list[float]:
    """RTTs (ms) of `ping -D` replies stamped within [since, until] (epoch seconds)."""
    out = []
    for line in text.splitlines():
        if not line.startswith("[") or "time=" not in line:
            continue
        stamp = float(line[1 : line.index("]")])
        if since <= stamp <= until:
            out.append(float(line.split("time=")[1].split()[0]))
    return out


def ping_run(lab: Lab, env: dict[str, str], direction: str = "up") -> dict[str, Any]:
    """A transfer with `ping` beside it: the transfer's RTT under load (its second half)
    against the median of the pings answered in the same second half."""
    with _pinging(lab) as ping:
        time.sleep(0.5)
        start = time.time()
        doc = json_report(
            lab,
            tcpwizard_argv(
                "transfer",
                lab.addr_b,
                "--json",
                "--modes",
                "autotune",
                "--direction",
                direction,
                "--duration",
                f"{TRANSFER_S:g}s",
            ),
            env,
        )
        end = time.time()
        time.sleep(0.3)
    text, _ = ping.communicate(timeout=10)
    m = _autotune(doc, direction) or {}
    lat = m.get("latency_under_load") or {}
    samples = m.get("samples") or []
    t_last = samples[-1]["t_s"] if samples else TRANSFER_S
    # The transfer's samples count from its first byte; that is `end - t_last` at the latest.
    first = end - t_last - 0.2
    pings = ping_rtts(text, first + t_last / 2, first + t_last)
    loaded = lat.get("median_ms")
    ping_ms = statistics.median(pings) if pings else None
    return {
        "rtt_load_ms": loaded,
        "ping_ms": ping_ms,
        "pings": len(pings),
        "ratio": round(loaded / ping_ms, 3) if loaded and ping_ms else None,
        "start": start,
    }


def run_case(
    case: Case, runs: int = RUNS, ping_runs: int = PING_RUNS, keep: Path | None = None
) -> dict[str, Any]:
    lab = Lab(case.spec().with_name(f"twca-{uuid.uuid4().hex[:6]}"))
    results: list[dict[str, Any]] = []
    pings: list[dict[str, Any]] = []
    t0 = time.monotonic()
    # Each run's check takes up to ~20 s, a ping run ~8 s: others' traffic outlasts them all
    # (within the hour lab/traffic.py allows a run of cross traffic).
    cross_s = min(3600.0, 30.0 * (runs + ping_runs) + 30.0)
    with (
        tempfile.TemporaryDirectory(prefix="tw-causes-") as tmp,
        lab,
        serving(lab, "b"),
        case.cross(lab, cross_s),
    ):
        env = isolated_env(tmp)
        for _ in range(runs):
            try:
                results.append(check_run(lab, env, keep, case.direction))
            except (RuntimeError, subprocess.TimeoutExpired) as exc:
                results.append({"factor": "error", "host": None, "error": str(exc)[:200]})
        for _ in range(ping_runs):
            try:
                pings.append(ping_run(lab, env, case.direction))
            except (RuntimeError, subprocess.TimeoutExpired) as exc:
                pings.append({"error": str(exc)[:200]})
    return {
        "case": case.name,
        "cause": case.cause,
        "rate_mbps": case.rate_bps / 1e6,
        "rtt_ms": case.rtt_s * 1e3,
        "expect": [case.expect_factor, case.expect_host],
        "policer_mbps": case.policer_bps / 1e6 if case.policer_bps else None,
        "queue_bdps": case.queue_bdps,
        "runs": results,
        "ping": pings,
        "seconds": round(time.monotonic() - t0),
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }


def _fmt(x: float | None, nd: int = 1) -> str:
    return "-" if x is None else f"{x:.{nd}f}"


def table(rows: list[dict[str, Any]]) -> str:
    head = (
        "| case | cause | right | verdicts | measured rate (median) | RTT idle / load median "
        "/ p90 (ms) | RPM | load vs ping (3 runs) |\n"
        "|---|---|---|---|---|---|---|---|"
    )
    lines = [head]
    for r in rows:
        runs = r["runs"]
        want = tuple(r["expect"])
        right = sum(1 for x in runs if (x["factor"], x["host"]) == want)
        seen: dict[str, int] = {}
        for x in runs:
            key = f"{x['factor']}@{x['host'] or '-'}"
            seen[key] = seen.get(key, 0) + 1
        plateaus = [x["plateau_mbps"] for x in runs if x.get("plateau_mbps")]
        plateau = statistics.median(plateaus) if plateaus else None
        rate = _fmt(plateau)
        if r["policer_mbps"] and plateau:
            rate += f" of {r['policer_mbps']:g} policed ({plateau / r['policer_mbps'] - 1:+.0%})"
        med = [x[k] for x in runs for k in ("rtt_load_ms",) if x.get(k)]
        p90 = [x["rtt_p90_ms"] for x in runs if x.get("rtt_p90_ms")]
        idle = [x["rtt_idle_ms"] for x in runs if x.get("rtt_idle_ms")]
        rpm = [x["rpm"] for x in runs if x.get("rpm")]
        ratios = [p["ratio"] for p in r["ping"] if p.get("ratio")]
        lines.append(
            f"| {r['case']} | {r['cause']} | {right}/{len(runs)} | "
            + ", ".join(f"{k} x{n}" for k, n in sorted(seen.items(), key=lambda kv: -kv[1]))
            + f" | {rate} | {_fmt(statistics.median(idle) if idle else None)} / "
            f"{_fmt(statistics.median(med) if med else None)} / "
            f"{_fmt(statistics.median(p90) if p90 else None)} | "
            f"{_fmt(statistics.median(rpm) if rpm else None, 0)} | "
            + (", ".join(f"{x:.2f}" for x in ratios) or "-")
            + " |"
        )
    return "\n".join(lines)


def run_causes(out_dir: str, only: tuple[str, ...], ctx: Context, quick: bool = False) -> int:
    unknown = set(only) - {c.name for c in CASES}
    if unknown:
        raise UsageError(
            f"unknown case {sorted(unknown)[0]!r}: use {', '.join(c.name for c in CASES)}"
        )
    os.makedirs(out_dir, exist_ok=True)
    store = Path(out_dir, "causes.jsonl")
    for case in CASES:
        if only and case.name not in only:
            continue
        ctx.progress(f"{case.name}: {case.cause} ...")
        row = run_case(
            case,
            runs=3 if quick else RUNS,
            ping_runs=1 if quick else PING_RUNS,
            keep=Path(out_dir, "reports"),
        )
        with store.open("a") as f:
            f.write(json.dumps(row) + "\n")
    rows: dict[str, dict[str, Any]] = {}
    if store.exists():
        for line in store.read_text().splitlines():
            row = json.loads(line)
            rows[row["case"]] = row  # the latest run of each case
    ordered = [rows[c.name] for c in CASES if c.name in rows]
    text = table(ordered)
    print(text, file=ctx.stdout)
    doc = [
        "# Causes beyond the hosts' settings (`python -m benchmarks causes`)",
        "",
        f"Kernel {platform.release()}, {os.cpu_count()} CPUs. Each case: a fresh lab, "
        "`tcpwizard serve` on b, then `tcpwizard check B --json --direction up --modes autotune` "
        "from a, 10 runs; *right* counts runs whose verdict and host to fix are the expected "
        "ones (policer@path, bufferbloat@path). *measured rate* is the autotune transfer's "
        "plateau (bytes delivered over its second half, IP layer) against the configured "
        "policer. RTT under load: the sender's smoothed RTT over the transfer's second half "
        "(median, p90) against the probe's idle RTT; RPM = 60 / median. *load vs ping*: "
        f"three {TRANSFER_S:g} s transfers with `ping -i {PING_INTERVAL_S}` beside them, the "
        "transfer's median RTT under load over the median ping in the same second half.",
        "",
        "Policer cases keep the kernel's congestion control (BBR); bufferbloat cases run Reno "
        "on both hosts (a loss-based sender fills a deep queue; BBR keeps it nearly empty).",
        "",
        text,
        "",
        "Runs per case: "
        + ", ".join(f"{r['case']} {r['when']} ({r['seconds']} s)" for r in ordered),
    ]
    page = Path(out_dir, "bench-causes.md")
    page.write_text("\n".join(doc) + "\n")
    ctx.progress(f"wrote {page}")
    return int(ExitCode.OK)
