"""`python -m benchmarks scenarios --only gigabit`: verdict right-rate and capacity at
200 Mbit/s - 1 Gbit/s; `--only multigigabit`: the same at 2 and 5 Gbit/s x 50 ms over the
super-packet delay line (healthy, a small receive or send buffer, a CPU-starved far end).

Each case builds one lab, starts `serve` in host b and runs `check` from host a `runs` times
(through benchmarks/checkrun.py, which adds the capacity the verdict used: probe and transfers
combined). A run is right when the verdict names the expected factor and host. Capacity is
judged against the configured rate (IP packets, as the probes count them): within 10 %,
never above 1.5x. The delay line is a Python process that needs most of a core at 1 Gbit/s
on a 2-core machine shared with other work, so every row carries the load average before
and after it: a low rate under a high load is the emulator starved of CPU, not the tool.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import time
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any

from benchmarks import buffer_maxima, script_argv
from benchmarks.matrix_draw import STARVED_SHARE
from tcpwizard.exitcodes import UsageError
from tcpwizard.lab.hostload import cpu_quota
from tcpwizard.lab.lab import Lab
from tcpwizard.lab.serving import serving
from tcpwizard.lab.spec import LabSpec

RUNS = 20  # the targets' N; --quick runs QUICK_RUNS
QUICK_RUNS = 5
WITHIN = 0.10
TOO_HIGH = 1.5
RIGHT_SHARE = 19 / 20


@dataclass(frozen=True)
class GigaCase:
    name: str
    cause: str
    spec: LabSpec
    expect_factor: str
    expect_host: str | None
    cpu_share_b: float | None = None  # b's serve held to this share of a core

    @property
    def rate_mbps(self) -> float:
        return self.spec.forward.rate_bps / 1e6


def _spec(rate: float, rtt: float, **kw: Any) -> LabSpec:
    return LabSpec.symmetric(rate, rtt, **kw)


# Misconfigurations at 1 Gbit/s x 20 ms (BDP 2.5 MB), each well below the path:
# 1 MB receive buffer ~ 260 Mbit/s, 1 MB send buffer ~ 290 Mbit/s, no scaling 26 Mbit/s,
# Reno at 0.1 % loss ~ 22 Mbit/s (Mathis).
CASES: tuple[GigaCase, ...] = (
    GigaCase(
        "healthy-200", "healthy, 200 Mbit/s x 20 ms", _spec(200e6, 0.020), "path-capacity", None
    ),
    GigaCase(
        "healthy-500", "healthy, 500 Mbit/s x 40 ms", _spec(500e6, 0.040), "path-capacity", None
    ),
    GigaCase("healthy-1000", "healthy, 1 Gbit/s x 20 ms", _spec(1e9, 0.020), "path-capacity", None),
    GigaCase(
        "receiver-rmem-1000",
        "far end's tcp_rmem max 1 MB, 1 Gbit/s x 20 ms",
        _spec(1e9, 0.020, sysctls_b=(("net.ipv4.tcp_rmem", "4096 131072 1048576"),)),
        "receiver-window",
        "peer",
    ),
    GigaCase(
        "sender-wmem-1000",
        "this host's tcp_wmem max 1 MB, 1 Gbit/s x 20 ms",
        _spec(1e9, 0.020, sysctls_a=(("net.ipv4.tcp_wmem", "4096 16384 1048576"),)),
        "sender-buffer",
        "local",
    ),
    GigaCase(
        "window-scaling-off-1000",
        "window scaling off at the far end, 1 Gbit/s x 20 ms",
        _spec(1e9, 0.020, sysctls_b=(("net.ipv4.tcp_window_scaling", "0"),)),
        "window-scaling",
        "peer",
    ),
    GigaCase(
        "loss-reno-1000",
        "0.1 % random loss, this host runs Reno, 1 Gbit/s x 20 ms",
        _spec(1e9, 0.020, loss=0.001, sysctls_a=(("net.ipv4.tcp_congestion_control", "reno"),)),
        "congestion",
        "local",
    ),
)

MULTI_RTT = 0.050  # the probes' and the calibration's multigigabit RTT (bench-probes.md)
# Both hosts tuned as the scenario matrix tunes them, 4 x (BDP + the 1-BDP queue), so the
# healthy rows are the path's; a misconfigured host gets a 4 MB maximum instead, whose
# window (about half of it offered, tcp_adv_win_scale) bounds a 50 ms flow to ~0.3-0.6
# Gbit/s, a fifth of the slower line at most.
SMALL_BUFFER = 4 << 20


def _multi(rate: float) -> tuple[GigaCase, ...]:
    tuned = 8 * int(rate / 8 * MULTI_RTT)  # 4 x (BDP + 1 BDP of queue), in bytes
    both = buffer_maxima(tuned, tuned)
    small_r = (("net.ipv4.tcp_rmem", f"4096 131072 {SMALL_BUFFER}"),)
    small_w = (("net.ipv4.tcp_wmem", f"4096 16384 {SMALL_BUFFER}"),)
    g = f"{rate / 1e9:g} Gbit/s x {MULTI_RTT * 1e3:.0f} ms"
    n = f"{rate / 1e6:.0f}"
    return (
        GigaCase(
            f"healthy-{n}",
            f"healthy, both hosts tuned, {g}",
            _spec(rate, MULTI_RTT, sysctls_a=both, sysctls_b=both),
            "path-capacity",
            None,
        ),
        GigaCase(
            f"receiver-rmem-{n}",
            f"far end's tcp_rmem max 4 MB, {g}",
            _spec(rate, MULTI_RTT, sysctls_a=both, sysctls_b=(*both[1:], *small_r)),
            "receiver-window",
            "peer",
        ),
        GigaCase(
            f"sender-wmem-{n}",
            f"this host's tcp_wmem max 4 MB, {g}",
            _spec(rate, MULTI_RTT, sysctls_a=(both[0], *small_w), sysctls_b=both),
            "sender-buffer",
            "local",
        ),
        GigaCase(
            f"cpu-starved-{n}",
            f"far end's serve at {STARVED_SHARE:.1%} of a core, {g}",
            _spec(rate, MULTI_RTT, sysctls_a=both, sysctls_b=both),
            "host-cpu",
            "peer",
            cpu_share_b=STARVED_SHARE,
        ),
    )


MULTI_CASES: tuple[GigaCase, ...] = (*_multi(2e9), *_multi(5e9))


@dataclass(frozen=True)
class GigaRun:
    factor: str
    host: str | None
    capacity_up: float | None  # what the verdict used (probe and transfers combined)
    probe_up: float | None
    probe_down: float | None
    seconds: float
    error: str = ""
    # Kept for the JSON file: why a figure is what it is.
    capacity_note: str = ""
    probe_method: str = ""
    modes: tuple[tuple[str, str, float], ...] = ()
    report: str | None = None  # the whole report's file in the bench's reports/ folder


@dataclass(frozen=True)
class GigaRow:
    case: GigaCase
    runs: tuple[GigaRun, ...]
    load: tuple[float, float] = (0.0, 0.0)
    notes: tuple[str, ...] = field(default_factory=tuple)

    def right(self, r: GigaRun) -> bool:
        return r.factor == self.case.expect_factor and r.host == self.case.expect_host

    @property
    def n_right(self) -> int:
        return sum(self.right(r) for r in self.runs)

    def _caps(self, which: str) -> list[float]:
        got = [getattr(r, which) for r in self.runs]
        return [c for c in got if c is not None]

    def within(self, which: str = "capacity_up") -> int:
        rate = self.case.rate_mbps
        return sum(1 for c in self._caps(which) if abs(c / rate - 1) <= WITHIN)

    def over(self, which: str = "capacity_up") -> int:
        return sum(1 for c in self._caps(which) if c > TOO_HIGH * self.case.rate_mbps)

    @property
    def healthy(self) -> bool:
        return self.case.expect_factor == "path-capacity"


def run_case(
    case: GigaCase, runs: int, make_lab: Callable[[LabSpec], Lab], keep: str | None = None
) -> GigaRow:
    load0 = os.getloadavg()[0]
    results: list[GigaRun] = []
    with make_lab(case.spec) as lab, serving(lab, "b") as serve:
        starved = cpu_quota(serve.pid, case.cpu_share_b) if case.cpu_share_b else nullcontext()
        with starved:
            for _ in range(runs):
                results.append(_check_once(lab, keep))
    return GigaRow(case, tuple(results), (load0, os.getloadavg()[0]))


def _check_once(lab: Lab, keep: str | None = None) -> GigaRun:
    argv = [*script_argv("checkrun"), lab.addr_b, *(["--keep", keep] if keep else [])]
    out = lab.run("a", argv, capture_output=True, text=True, timeout=180)
    try:
        doc = json.loads(out.stdout)
    except ValueError:
        return GigaRun("error", None, None, None, None, 0.0, out.stderr.strip()[-200:])
    return GigaRun(
        doc["factor"],
        doc["host"],
        doc["capacity"].get("up"),
        doc["probe"]["up"],
        doc["probe"]["down"],
        float(doc["seconds"]),
        capacity_note=doc["capacity_note"].get("up", ""),
        probe_method=f"{doc['probe'].get('up_method')}: {doc['probe'].get('up_note')}",
        modes=tuple((str(m), str(d), float(r)) for m, d, r in doc["modes"]),
        report=doc.get("report"),
    )


def _ratio(x: float | None, rate: float) -> str:
    return "-" if x is None else f"{x:.0f} ({x / rate:.2f})"


def markdown(rows: Sequence[GigaRow]) -> str:
    lines = [
        "| case | expected | runs | right | verdicts seen | capacity used, median (x rate) | "
        "min - max (x rate) | within 10 % | > 1.5x | probe up median (x rate) | "
        "probe down median (x rate) | check s, median | load avg before/after |",
        "|---|---|---:|---:|---|---|---|---:|---:|---|---|---:|---|",
    ]
    for row in rows:
        rate = row.case.rate_mbps
        n = len(row.runs)
        seen = Counter(f"{r.factor}@{r.host or '-'}" for r in row.runs)
        caps = row._caps("capacity_up")
        med = statistics.median(caps) if caps else None
        spread = f"{_ratio(min(caps), rate)} - {_ratio(max(caps), rate)}" if caps else "-"
        pu, pd = row._caps("probe_up"), row._caps("probe_down")
        secs = [r.seconds for r in row.runs if not r.error]
        expect = f"{row.case.expect_factor}@{row.case.expect_host or '-'}"
        lines.append(
            f"| {row.case.name} | {expect} | {n} | {row.n_right}/{n} | "
            f"{', '.join(f'{k} x{v}' for k, v in seen.most_common())} | {_ratio(med, rate)} | "
            f"{spread} | {row.within()}/{len(caps)} | {row.over()} | "
            f"{_ratio(statistics.median(pu) if pu else None, rate)} | "
            f"{_ratio(statistics.median(pd) if pd else None, rate)} | "
            f"{statistics.median(secs) if secs else 0:.1f} | "
            f"{row.load[0]:.1f} / {row.load[1]:.1f} |"
        )
    return "\n".join(lines) + "\n"


def summary(rows: Sequence[GigaRow]) -> str:
    def pct(a: int, b: int) -> str:
        return f"{a}/{b} ({100 * a / b:.0f} %)" if b else "-"

    healthy = [r for r in rows if r.healthy]
    limits = [r for r in rows if not r.healthy]
    caps_healthy = sum(len(r._caps("capacity_up")) for r in healthy)
    out = [
        "- healthy paths named `path-capacity`: "
        + "; ".join(f"{r.case.name} {pct(r.n_right, len(r.runs))}" for r in healthy),
        "- misconfigurations named right (factor and host): "
        + "; ".join(f"{r.case.name} {pct(r.n_right, len(r.runs))}" for r in limits),
        "- capacity the verdict used, healthy paths, within 10 % of the rate: "
        f"{pct(sum(r.within() for r in healthy), caps_healthy)}; above 1.5x: "
        f"{sum(r.over() for r in rows)} of {sum(len(r._caps('capacity_up')) for r in rows)}",
        "- the probe alone (upload), healthy paths, within 10 %: "
        f"{pct(sum(r.within('probe_up') for r in healthy), caps_healthy)}; download "
        f"{pct(sum(r.within('probe_down') for r in healthy), caps_healthy)}; above 1.5x: "
        f"{sum(r.over('probe_up') + r.over('probe_down') for r in rows)}",
    ]
    return "\n".join(out) + "\n"


def passed(rows: Sequence[GigaRow]) -> bool:
    right = all(r.n_right >= RIGHT_SHARE * len(r.runs) for r in rows)
    healthy = [r for r in rows if r.healthy]
    n = sum(len(r._caps("capacity_up")) for r in healthy)
    within = sum(r.within() for r in healthy)
    return right and within >= 0.95 * n and sum(r.over() for r in rows) == 0


def select(only: Sequence[str]) -> list[GigaCase]:
    """`gigabit` or `multigigabit` (every case of the set) or `gigabit:NAME` /
    `multigigabit:NAME` (that case), repeatable."""
    chosen: list[GigaCase] = []
    for group, cases in (("gigabit", CASES), ("multigigabit", MULTI_CASES)):
        names = [o.partition(":")[2] for o in only if o.partition(":")[0] == group]
        if not names:
            continue
        if "" in names:
            chosen.extend(cases)
            continue
        known = {c.name for c in cases}
        unknown = [n for n in names if n not in known]
        if unknown:
            raise UsageError(
                f"unknown {group} case {unknown[0]!r} (one of {', '.join(sorted(known))})"
            )
        chosen.extend(c for c in cases if c.name in names)
    return chosen


def run_gigabit(
    only: Sequence[str],
    out_dir: str,
    quick: bool,
    stdout: Any = None,
    progress: Callable[[str], None] | None = None,
) -> int:
    cases = select(only)
    runs = QUICK_RUNS if quick else RUNS
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    load0 = os.getloadavg()
    t0 = time.monotonic()
    rows: list[GigaRow] = []

    def make_lab(spec: LabSpec) -> Lab:
        return Lab(spec.with_name(f"twgb-{uuid.uuid4().hex[:6]}"))

    for case in cases:
        if progress:
            progress(f"bench gigabit: {case.name} ({runs} checks)")
        rows.append(
            run_case(case, runs, make_lab, os.path.abspath(os.path.join(out_dir, "reports")))
        )
    text = summary(rows) + "\n" + markdown(rows)
    print(text, file=stdout)
    multi = any(o.partition(":")[0] == "multigigabit" for o in only)
    name = "multigigabit" if multi else "gigabit"
    span = "2 and 5 Gbit/s" if multi else "200 Mbit/s - 1 Gbit/s"
    doc = [
        f"# Verdicts at {span} (`python -m benchmarks scenarios --only {name}`)",
        "",
        f"{started}; kernel {platform.release()}, {os.cpu_count()} CPUs; load average "
        f"{load0[0]:.2f} / {load0[1]:.2f} / {load0[2]:.2f} at start; {runs} `check` runs per "
        f"case; {time.monotonic() - t0:.0f} s in all. Lab: user-space TUN delay line, "
        "drop-tail queue of 1 BDP.",
        "",
        text,
    ]
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, f"bench-{name}.md")
    with open(path, "w") as f:
        f.write("\n".join(doc))
    with open(os.path.join(out_dir, f"bench-{name}.json"), "w") as f:
        json.dump(
            [
                {"case": r.case.name, "load": r.load, "runs": [vars(x) for x in r.runs]}
                for r in rows
            ],
            f,
            indent=1,
        )
    if progress:
        progress(f"wrote {path}")
    return 0 if passed(rows) else 1
