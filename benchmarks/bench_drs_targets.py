"""DRS against autotune on the DRS targets' paths, every run reported (`python -m
benchmarks drs-targets`, also a section of `python -m benchmarks transfer`).

Per path (60 ms x 80, 100 ms x 100, 180 ms x 200 and 300 ms x 100 Mbit/s), per test length
(3 s and 8 s), per round and direction: both modes' goodput, DRS / autotune, their time to
90 % of the bottleneck, DRS's peak and steady receive buffer over the BDP, and both modes'
retransmits. The targets are judged on every single run, not on a median.

Two goodput ratios are reported. The transfer's own figure (bytes over the receiver's span)
lets each mode's span differ: the duration bounds how long the sender *writes*, and
autotune's 16 MB send buffer holds up to a second of data that it delivers at the full
rate after that, so a 3 s autotune test lasts ~4 s with its slow start averaged over more
time. "Same span" compares what each had received at the end of the shorter of the two
spans, the goodput of equal-length transfers.

Results are kept in `<out>/bench-drs-targets.json` by path, so the bench can run one path
at a time (`--rtt 100ms`) and the table covers every path measured so far. Builds and
removes its own labs (root).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from benchmarks.bench_transfer import (
    BIG_BUFFERS,
    TCP_GOODPUT_SHARE,
    BenchRow,
    bench_transfer,
    megabits_at,
)
from tcpwizard import argtypes
from tcpwizard.exitcodes import ExitCode
from tcpwizard.lab.lab import Lab
from tcpwizard.lab.spec import LabSpec

# (rate bit/s, RTT s): the targets' paths.
PATHS: tuple[tuple[float, float], ...] = (
    (80e6, 0.060),
    (100e6, 0.100),
    (200e6, 0.180),
    (100e6, 0.300),
)
TEST_SECONDS: tuple[float, ...] = (3.0, 8.0)
ROUNDS = 3
RATIO_TARGET = 0.95  # DRS's goodput at least this share of autotune's, every run
PEAK_TARGET = 3.0  # DRS's largest receive buffer at most this many BDPs
STEADY_TARGET = 2.5  # ...and over the second half of the run at most this many
RESULTS_NAME = "bench-drs-targets.json"
TABLE_NAME = "bench-drs-targets.md"


@dataclass(frozen=True)
class Pair:
    """One run: autotune and DRS on the same path, length and direction, back to back."""

    seconds: float  # the test's duration
    direction: str
    auto: BenchRow
    drs: BenchRow

    @property
    def ratio(self) -> float:
        return self.drs.mbps / self.auto.mbps if self.auto.mbps > 0 else 0.0

    @property
    def same_span_ratio(self) -> float:
        """What DRS had received over what autotune had, by the end of the shorter span."""
        span = min(self.drs.seconds, self.auto.seconds)
        got = megabits_at(self.auto.delivered, span)
        return megabits_at(self.drs.delivered, span) / got if got > 0 else 0.0


def _row_json(r: BenchRow) -> dict[str, Any]:
    return {
        "mbps": r.mbps,
        "seconds": r.seconds,
        "retransmits": r.retransmits,
        "t90_s": r.t90_s,
        "max_buffer_bytes": r.max_buffer_bytes,
        "steady_buffer_bytes": r.steady_buffer_bytes,
        "delivered": [list(p) for p in r.delivered],
        "error": r.error,
        "forced": r.forced,
    }


def _row_from(mode: str, direction: str, d: dict[str, Any]) -> BenchRow:
    return BenchRow(
        mode="drs" if mode == "drs" else "autotune",
        streams=1,
        mbps=float(d["mbps"]),
        max_buffer_bytes=int(d["max_buffer_bytes"]),
        mbps_per_mb=0.0,
        retransmits=int(d["retransmits"]),
        iperf_mbps=None,
        iperf_setting="",
        error=d.get("error"),
        forced=bool(d.get("forced")),
        direction=direction,
        t90_s=None if d.get("t90_s") is None else float(d["t90_s"]),
        seconds=float(d["seconds"]),
        steady_buffer_bytes=int(d["steady_buffer_bytes"]),
        delivered=tuple((float(t), float(m)) for t, m in d["delivered"]),
    )


def path_key(rate_bps: float, rtt_s: float, loss: float = 0.0, jitter_s: float = 0.0) -> str:
    key = f"{rtt_s * 1e3:g}ms x {rate_bps / 1e6:g}Mbit/s"
    if loss > 0:
        key = f"{key} at {loss * 100:g} % loss"
    return f"{key}, jitter {jitter_s * 1e3:g} ms" if jitter_s > 0 else key


def measure_path(
    rate_bps: float,
    rtt_s: float,
    rounds: int,
    seconds: Sequence[float] = TEST_SECONDS,
    say: Callable[[str], None] = lambda _m: None,
    loss: float = 0.0,
    jitter_s: float = 0.0,
) -> list[Pair]:
    """`rounds` rounds on one fresh lab: per test length, autotune then DRS, both ways;
    `loss`: random loss per packet on the path (a share, each way); `jitter_s`: each
    packet's one-way delay varies by up to this much either way (order kept)."""
    spec = LabSpec.symmetric(
        rate_bps,
        rtt_s,
        loss=loss,
        jitter_s=jitter_s,
        sysctls_a=BIG_BUFFERS,
        sysctls_b=BIG_BUFFERS,
        name=f"twdt-{uuid.uuid4().hex[:6]}",
    )
    pairs: list[Pair] = []
    with Lab(spec, owner_pid=os.getpid()) as lab:
        for i in range(rounds):
            for secs in seconds:
                say(f"  {path_key(rate_bps, rtt_s)}: round {i + 1}/{rounds}, {secs:g} s tests")
                rows = bench_transfer(lab, modes=("autotune", "drs"), seconds=secs, iperf=False)
                for d in ("up", "down"):
                    auto = next(r for r in rows if r.mode == "autotune" and r.direction == d)
                    drs = next(r for r in rows if r.mode == "drs" and r.direction == d)
                    pairs.append(Pair(secs, d, auto, drs))
    return pairs


def _t(v: float | None) -> str:
    return "never" if v is None else f"{v:.2f}"


def _ok(good: int, total: int) -> str:
    return f"{good}/{total} {'✅' if good == total else '❌'}"


def render_path(
    rate_bps: float,
    rtt_s: float,
    pairs: Sequence[Pair],
    note: str = "",
    loss: float = 0.0,
    jitter_s: float = 0.0,
) -> str:
    bdp = rate_bps / 8 * rtt_s
    bottleneck = rate_bps / 1e6 * TCP_GOODPUT_SHARE
    lossy = f", {loss * 100:g} % random loss each way" if loss > 0 else ""
    if jitter_s > 0:
        lossy += f", delay jitter +-{jitter_s * 1e3:g} ms each way (order kept)"
    out = [
        f"### {rtt_s * 1e3:g} ms x {rate_bps / 1e6:g} Mbit/s{lossy} (BDP {bdp / 1e6:.2f} MB, "
        f"bottleneck TCP goodput {bottleneck:.1f} Mbit/s){note}",
        "",
    ]
    for secs in sorted({p.seconds for p in pairs}):
        runs = [p for p in pairs if p.seconds == secs]
        out += [
            f"{secs:g} s tests:",
            "",
            "| run | dir | autotune Mbit/s (span) | DRS Mbit/s (span) | DRS / autotune | "
            "same span | to 90 %: autotune / DRS | DRS peak / BDP | DRS steady / BDP | "
            "retransmits: autotune / DRS |",
            "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for i, p in enumerate(runs):
            err = "; ".join(e for e in (p.auto.error, p.drs.error) if e)
            out.append(
                f"| {i // 2 + 1} | {p.direction} | {p.auto.mbps:.1f} ({p.auto.seconds:.2f} s) | "
                f"{p.drs.mbps:.1f}{'*' if p.drs.forced else ''} ({p.drs.seconds:.2f} s) | "
                f"{p.ratio:.3f} | {p.same_span_ratio:.3f} | "
                f"{_t(p.auto.t90_s)} / {_t(p.drs.t90_s)} s | "
                f"{p.drs.max_buffer_bytes / bdp:.2f} | {p.drs.steady_buffer_bytes / bdp:.2f} | "
                f"{p.auto.retransmits} / {p.drs.retransmits} |" + (f" error: {err}" if err else "")
            )
        n = len(runs)
        same = sum(p.same_span_ratio >= RATIO_TARGET for p in runs)
        verdict = [
            f"same span >= {RATIO_TARGET} {_ok(same, n)}",
            f"own span >= {RATIO_TARGET} {_ok(sum(p.ratio >= RATIO_TARGET for p in runs), n)}",
            f"peak <= {PEAK_TARGET:g} BDP "
            f"{_ok(sum(p.drs.max_buffer_bytes <= PEAK_TARGET * bdp for p in runs), n)}",
            f"steady <= {STEADY_TARGET:g} BDP "
            f"{_ok(sum(p.drs.steady_buffer_bytes <= STEADY_TARGET * bdp for p in runs), n)}",
            "retransmits <= autotune's "
            f"{_ok(sum(p.drs.retransmits <= p.auto.retransmits for p in runs), n)}",
        ]  # fmt: skip
        if loss > 0:
            # The buffer targets are a clean path's: under recurring loss the window also
            # carries a repair's arrivals (docs/transfer.md), so memory is set beside
            # autotune's instead.
            most = max(p.drs.max_buffer_bytes / max(p.auto.max_buffer_bytes, 1) for p in runs)
            verdict = [*verdict[:2], f"DRS peak at most {most:.2f} of autotune's", verdict[-1]]
        out += ["", "Every run: " + "; ".join(verdict) + ".", ""]
    return "\n".join(out)


def header() -> list[str]:
    return [
        "## DRS against autotune on the targets' paths, every run",
        "",
        f"`python -m benchmarks drs-targets`; kernel {platform.release()}, {os.cpu_count()} "
        "CPUs; both hosts tcp_rmem/tcp_wmem max 16 MB (net.core.rmem_max is the host's); "
        "the transfer is given the path's RTT and rate, as a probe gives them to `check`. "
        "Each run: autotune then DRS, both ways (up: a -> b, down: b -> a). DRS / autotune is "
        "the transfers' own goodput (bytes over each one's span); same span is what each had "
        "received by the end of the shorter span (autotune's send buffer keeps delivering "
        "after the duration). To 90 %: when the goodput over an RTT (at least 0.3 s) first "
        "reached 90 % of the bottleneck's TCP goodput. Steady buffer: the largest over the "
        f"second half of the run. Targets, every run: DRS / autotune >= {RATIO_TARGET}, "
        f"peak <= {PEAK_TARGET:g} x BDP, steady <= {STEADY_TARGET:g} x BDP, retransmits no "
        "more than autotune's.",
        "",
    ]


def load_results(path: str) -> dict[str, Any]:
    try:
        with open(path) as f:
            doc = json.load(f)
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise SystemExit(f"bench-drs-targets: cannot read {path}: {exc}") from None
    return doc if isinstance(doc, dict) else {}


def pairs_from(entry: dict[str, Any]) -> list[Pair]:
    return [
        Pair(
            float(p["seconds"]),
            str(p["direction"]),
            _row_from("autotune", str(p["direction"]), p["autotune"]),
            _row_from("drs", str(p["direction"]), p["drs"]),
        )
        for p in entry["pairs"]
    ]


def render_all(results: dict[str, Any]) -> str:
    out = header()
    for rate, rtt in PATHS:
        for key, entry in results.items():
            loss = float(entry.get("loss", 0.0))
            jitter = float(entry.get("jitter_s", 0.0))
            if key != path_key(rate, rtt, loss, jitter):
                continue
            note = f" — {entry['when']}, load average {entry['load']:.2f} at start"
            out += [render_path(rate, rtt, pairs_from(entry), note, loss, jitter), ""]
    return "\n".join(out)


def run(
    out_dir: str,
    rounds: int = ROUNDS,
    rtts_ms: Sequence[float] = (),
    seconds: Sequence[float] = TEST_SECONDS,
    say: Callable[[str], None] = lambda _m: None,
    loss: float = 0.0,
    jitter_s: float = 0.0,
) -> str:
    """Measure the paths (those with these RTTs, or all; with `loss`, random loss each
    way; with `jitter_s`, delay jitter each way), merge them into the results file, and
    return (and write) the table of every path measured so far."""
    os.makedirs(out_dir, exist_ok=True)
    store = os.path.join(out_dir, RESULTS_NAME)
    results = load_results(store)
    for rate, rtt in PATHS:
        if rtts_ms and not any(abs(rtt * 1e3 - r) < 0.5 for r in rtts_ms):
            continue
        load = os.getloadavg()[0]
        when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        pairs = measure_path(rate, rtt, rounds, seconds, say, loss, jitter_s)
        results[path_key(rate, rtt, loss, jitter_s)] = {
            "when": when,
            "load": round(load, 2),
            "loss": loss,
            "jitter_s": jitter_s,
            "pairs": [
                {
                    "seconds": p.seconds,
                    "direction": p.direction,
                    "autotune": _row_json(p.auto),
                    "drs": _row_json(p.drs),
                }
                for p in pairs
            ],
        }
        with open(store, "w") as f:
            json.dump(results, f)
    text = render_all(results)
    with open(os.path.join(out_dir, TABLE_NAME), "w") as f:
        f.write(f"# DRS targets (`python -m benchmarks drs-targets`)\n\n{text}\n")
    return text


def _jitter_ms(text: str) -> float:
    try:
        value = float(text.strip().removesuffix("ms"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected milliseconds, not {text!r}") from None
    if not math.isfinite(value) or not 0.0 <= value <= 1000.0:
        raise argparse.ArgumentTypeError("must be from 0 to 1000 ms")
    return value


def add_path_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--loss",
        type=argtypes.percent(0.0, 50.0),
        default=0.0,
        metavar="PCT",
        help="random loss on the path, each way, e.g. 0.2",
    )
    parser.add_argument(
        "--jitter",
        type=_jitter_ms,
        default=0.0,
        metavar="MS",
        help="delay jitter each way: each packet's delay varies by up to this many ms",
    )


def _say(message: str) -> None:
    print(message, file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_drs_targets")
    parser.add_argument("--rounds", type=int, default=ROUNDS, choices=range(1, 21), metavar="1-20")
    parser.add_argument("--rtt", type=float, action="append", metavar="MS", default=[])
    parser.add_argument("--out", default="results")
    add_path_arguments(parser)
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        print("bench_drs_targets: the lab needs root", file=sys.stderr)
        return int(ExitCode.NO_PERMISSION)
    loss = args.loss / 100.0
    print(run(args.out, args.rounds, args.rtt, say=_say, loss=loss, jitter_s=args.jitter / 1e3))
    return 0


if __name__ == "__main__":
    sys.exit(main())
