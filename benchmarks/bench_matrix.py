"""`python -m benchmarks matrix N [--seed S] [--from K] [--replay ID] [--out DIR]`: a random
scenario matrix nobody can tune to.

Draws scenarios SEED.K .. SEED.K+N-1 (benchmarks/matrix_draw.py: the envelope, the causes,
and the truth each one's physics calls for, derived without the tool), a fresh seed each run
unless --seed gives one, always printed. Each scenario: a fresh lab, `tcpwizard serve` in b,
one `tcpwizard check B --json` (default modes) from a, the same command for every scenario
(with `--avail`, which `cross-traffic` needs: without it check never measures what is free),
so nothing in the run knows the cause. `--replay SEED.INDEX` runs that one scenario alone.

Every scenario appends one JSON line to DIR/matrix.jsonl as soon as it ends, so a run can be
chunked (`--from`) and its chunks combined: DIR/bench-matrix.md and DIR/bench-matrix.json
are rebuilt from every row there (the latest row per id).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import secrets
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

from benchmarks.bench_causes import isolated_env
from benchmarks.matrix_draw import Scenario, draw, parse_id, truth
from benchmarks.matrix_report import markdown, summary
from tcpwizard.context import Context
from tcpwizard.exitcodes import ExitCode, TcpWizardError, UsageError
from tcpwizard.lab.hostload import cpu_quota
from tcpwizard.lab.lab import Lab, require_root
from tcpwizard.lab.serving import serving, tcpwizard_argv
from tcpwizard.lab.traffic import CrossTraffic

CHECK_ARGS = ("--json", "--avail")
CHECK_TIMEOUT_S = 150.0
MAX_SCENARIOS = 1000
STORE = "matrix.jsonl"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("n", nargs="?", type=_count, default=None, metavar="N",
                   help="scenarios to draw and run (1-1000)")  # fmt: skip
    p.add_argument("--seed", type=_seed, help="the drawing's seed (default: a fresh one)")
    p.add_argument("--from", dest="first", type=_index, default=0, metavar="K",
                   help="first scenario index (chunks of one seed: --from 10 ...)")  # fmt: skip
    p.add_argument("--replay", type=_replay, metavar="ID", help="run scenario SEED.INDEX alone")
    p.add_argument("--out", default="results", help="folder for matrix.jsonl and the tables")


def _count(text: str) -> int:
    n = _int(text, "N")
    if not 1 <= n <= MAX_SCENARIOS:
        raise argparse.ArgumentTypeError(f"use 1-{MAX_SCENARIOS} scenarios")
    return n


def _seed(text: str) -> int:
    n = _int(text, "seed")
    if not 0 <= n < 10**18:
        raise argparse.ArgumentTypeError("use a seed of 0-18 digits")
    return n


def _index(text: str) -> int:
    n = _int(text, "index")
    if not 0 <= n < 10**6:
        raise argparse.ArgumentTypeError("use an index 0-999999")
    return n


def _int(text: str, what: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{what} {text!r} is not a whole number") from None


def _replay(text: str) -> tuple[int, int]:
    try:
        return parse_id(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def plan(args: argparse.Namespace) -> tuple[int, list[Scenario]]:
    """(seed, scenarios) the arguments ask for; a usage error when they ask for none."""
    if args.replay is not None:
        if args.n is not None or args.seed is not None or args.first:
            raise UsageError("matrix: --replay ID runs one scenario: give no N, --seed or --from")
        seed, index = args.replay
        return seed, [draw(seed, index)]
    if args.n is None:
        raise UsageError("matrix: give N (scenarios to run) or --replay ID")
    seed = args.seed if args.seed is not None else secrets.randbelow(10**9)
    return seed, [draw(seed, i) for i in range(args.first, args.first + args.n)]


@contextlib.contextmanager
def _cross(lab: Lab, s: Scenario) -> Iterator[None]:
    seconds, back = CHECK_TIMEOUT_S + 30, s.way_back
    if s.cross_udp_bps > 0:
        with CrossTraffic(lab, udp_bps=s.cross_udp_bps, duration_s=seconds, reverse=back):
            yield
    elif s.cross_tcp_flows > 0:
        with CrossTraffic(lab, tcp_flows=s.cross_tcp_flows, duration_s=seconds, reverse=back):
            yield
    else:
        yield


def _starved(pid: int, share: float | None) -> contextlib.AbstractContextManager[object]:
    return contextlib.nullcontext() if share is None else cpu_quota(pid, share)


def _verdict(doc: dict[str, Any]) -> dict[str, Any]:
    v = doc["verdict"]
    modes = (doc.get("transfer") or {}).get("modes") or []
    return {
        "factor": v["limiting_factor"],
        "host": v["host_to_fix"],
        "confidence": v["confidence"],
        # The rule's own, before the calibration table weighed it (advice/calibration.py).
        "rule_confidence": (v.get("calibration") or {}).get("rule_confidence", v["confidence"]),
        "explanation": str(v.get("explanation", ""))[:300],
        "modes": [
            [m["mode"], m["direction"], m.get("throughput_mbps")]
            for m in modes
            if not m.get("error")
        ],
        "capacity_mbps": (doc.get("path") or {}).get("capacity_mbps"),
    }


def run_one(s: Scenario, keep: Path | None = None) -> dict[str, Any]:
    """One scenario on a fresh lab; a failure is a row with factor `error`, not an abort.
    With `keep`, the check's whole JSON report is written there as ID.json."""
    t0 = time.monotonic()
    lab = Lab(s.spec().with_name(f"twmx-{uuid.uuid4().hex[:6]}"))
    verdict: dict[str, Any]
    check_s: float | None = None
    try:
        with (
            tempfile.TemporaryDirectory(prefix="tw-matrix-") as tmp,
            lab,
            serving(lab, "b") as serve,
            _starved(serve.pid, s.cpu_share_b),
            _cross(lab, s),
        ):
            c0 = time.monotonic()
            proc = lab.run(
                "a", tcpwizard_argv("check", lab.addr6_b if s.ipv6 else lab.addr_b, *CHECK_ARGS),
                env=isolated_env(tmp),
                capture_output=True, text=True, timeout=CHECK_TIMEOUT_S, check=False,
            )  # fmt: skip
            check_s = round(time.monotonic() - c0, 1)
        if keep is not None and proc.stdout:
            (keep / f"{s.id}.json").write_text(proc.stdout)
        try:
            verdict = _verdict(json.loads(proc.stdout))
        except (ValueError, KeyError):
            verdict = _error(f"no JSON verdict (exit {proc.returncode}): {proc.stderr[-300:]}")
    except (TcpWizardError, OSError, subprocess.SubprocessError) as exc:
        verdict = _error(f"{type(exc).__name__}: {exc}")
    factor, host = truth(s)
    return {
        "id": s.id,
        "seed": s.seed,
        "index": s.index,
        "scenario": asdict(s),
        "describe": s.describe(),
        "truth": {"factor": factor, "host": host},
        "verdict": verdict,
        "seconds": check_s,
        "wall_s": round(time.monotonic() - t0, 1),
        "check_args": list(CHECK_ARGS),
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }


def _error(text: str) -> dict[str, Any]:
    return {"factor": "error", "host": None, "confidence": 0.0, "explanation": text[:300]}


def load_rows(store: Path) -> list[dict[str, Any]]:
    """Every row of the store, the latest per id, in (seed, index) order."""
    rows: dict[str, dict[str, Any]] = {}
    if store.exists():
        for line in store.read_text().splitlines():
            if line.strip():
                row = json.loads(line)
                rows[row["id"]] = row
    return sorted(rows.values(), key=lambda r: (r["seed"], r["index"]))


def write_tables(out_dir: Path, rows: list[dict[str, Any]]) -> str:
    text = markdown(rows)
    first = min((r["when"] for r in rows), default="-")
    last = max((r["when"] for r in rows), default="-")
    page = [
        "# Scenario matrix (`python -m benchmarks matrix`)",
        "",
        f"{first} - {last}; kernel {platform.release()}, {os.cpu_count()} CPUs. Each scenario: "
        "a fresh lab, `tcpwizard serve` in b, one `tcpwizard check B "
        + " ".join(CHECK_ARGS)
        + "` from a; truth derived from the scenario's physics (benchmarks/matrix_draw.py).",
        "",
        text,
        "",
    ]
    (out_dir / "bench-matrix.md").write_text("\n".join(page))
    (out_dir / "bench-matrix.json").write_text(
        json.dumps({"summary": summary(rows), "rows": rows}, indent=1) + "\n"
    )
    return text


ALLOWED_CC = "sys/net/ipv4/tcp_allowed_congestion_control"
AVAILABLE_CC = "sys/net/ipv4/tcp_available_congestion_control"


@contextlib.contextmanager
def allowing(needed: set[str], proc: Path = Path("/proc")) -> Iterator[list[str]]:
    """Let the lab's namespaces choose every congestion control in `needed` the kernel has:
    a namespace may only pick from the initial namespace's allowed list (net.ipv4.
    tcp_allowed_congestion_control, often "reno bbr" or "reno cubic"), so the run adds what
    it needs there and puts the list back as it was. Yields the ones still missing."""
    allowed_file, available_file = proc / ALLOWED_CC, proc / AVAILABLE_CC
    was = allowed_file.read_text().split()
    available = set(available_file.read_text().split())
    extra = sorted((needed - set(was)) & available)
    if extra:
        allowed_file.write_text(" ".join([*was, *extra]))
    try:
        yield sorted(needed - set(was) - available)
    finally:
        if extra:
            allowed_file.write_text(" ".join(was))


def run(args: argparse.Namespace, ctx: Context) -> int:
    seed, scenarios = plan(args)
    require_root()
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    store = out_dir / STORE
    reports = out_dir / "reports"  # each check's whole report, to read a miss from
    reports.mkdir(exist_ok=True)
    ctx.progress(f"matrix seed {seed}: {len(scenarios)} scenarios -> {store}")
    needed = {cc for s in scenarios for cc in (s.cc_a, s.cc_b)}
    with allowing(needed) as missing:
        if missing:
            ctx.progress(f"this kernel has no {', '.join(missing)}: those scenarios fail")
        _run_all(scenarios, reports, store, ctx)
    text = write_tables(out_dir, load_rows(store))
    print(f"seed {seed}\n\n{text}", file=ctx.stdout)
    ctx.progress(f"wrote {out_dir}/bench-matrix.md and .json (seed {seed})")
    return int(ExitCode.OK)


def _run_all(scenarios: list[Scenario], reports: Path, store: Path, ctx: Context) -> None:
    for s in scenarios:
        ctx.progress(f"{s.id} {s.cause}: {s.describe()} ...")
        row = run_one(s, reports)
        with store.open("a") as f:
            f.write(json.dumps(row) + "\n")
        v, t = row["verdict"], row["truth"]
        mark = "ok" if (v["factor"], v["host"]) == (t["factor"], t["host"]) else "WRONG"
        ctx.progress(
            f"{s.id} truth {t['factor']} ({t['host'] or '-'}) verdict {v['factor']} "
            f"({v['host'] or '-'}) {v['confidence']:.2f} {mark} {row['seconds']} s"
        )
