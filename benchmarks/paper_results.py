"""Results of `python -m benchmarks paper`: per-cell repetitions, kept in one JSON file that is
rewritten after every run, so an interrupted benchmark resumes where it stopped."""

from __future__ import annotations

import json
import os
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from benchmarks.paper_matrix import Cell, Plan
from tcpwizard.exitcodes import UsageError

SCHEMA = 1
MAX_TRACE_POINTS = 200  # a 128 MB untuned run samples ~1600 times; the plot needs fewer
TRACED_TUNINGS = ("drs", "autotune-raised")  # buffer-over-time plot: DRS against the kernel


@dataclass(frozen=True)
class Run:
    mbps: float  # whole transfer, slow start included: the papers' metric
    steady_mbps: float  # after warm-up (slow start), for the window/RTT law
    max_buffer_bytes: int  # receiver's largest SO_RCVBUF, summed over streams
    mbps_per_mb: float
    retransmits: int
    seconds: float
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "mbps": round(self.mbps, 3),
            "steady_mbps": round(self.steady_mbps, 3),
            "max_buffer_bytes": self.max_buffer_bytes,
            "mbps_per_mb": round(self.mbps_per_mb, 3),
            "retransmits": self.retransmits,
            "seconds": round(self.seconds, 3),
            "error": self.error,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Run:
        err = d.get("error")
        return cls(
            float(d["mbps"]),
            float(d["steady_mbps"]),
            int(d["max_buffer_bytes"]),
            float(d["mbps_per_mb"]),
            int(d["retransmits"]),
            float(d["seconds"]),
            None if err is None else str(err),
        )


@dataclass(frozen=True)
class CellResult:
    cell: Cell
    runs: tuple[Run, ...] = ()
    iperf3_mbps: float | None = None
    iperf3_error: str | None = None
    # (t_s, receive buffer bytes) of the first repetition, for TRACED_TUNINGS
    trace: tuple[tuple[float, int], ...] = ()

    @property
    def good_runs(self) -> tuple[Run, ...]:
        return tuple(r for r in self.runs if r.error is None)

    @property
    def median_mbps(self) -> float:
        good = [r.mbps for r in self.good_runs]
        return statistics.median(good) if good else float("nan")

    @property
    def median_steady_mbps(self) -> float:
        good = [r.steady_mbps for r in self.good_runs]
        return statistics.median(good) if good else float("nan")

    @property
    def spread(self) -> float:
        """Largest distance of a repetition from the median, as a share of the median."""
        med = self.median_mbps
        good = self.good_runs
        if not good or not med > 0:
            return float("nan")
        return max(abs(r.mbps - med) for r in good) / med

    @property
    def max_buffer_bytes(self) -> int:
        return max((r.max_buffer_bytes for r in self.good_runs), default=0)

    @property
    def mbps_per_mb(self) -> float:
        good = [r.mbps_per_mb for r in self.good_runs]
        return statistics.median(good) if good else float("nan")

    def to_json(self) -> dict[str, Any]:
        return {
            "tuning": self.cell.tuning,
            "rtt_ms": self.cell.rtt_ms,
            "streams": self.cell.streams,
            "median_mbps": _num(self.median_mbps),
            "spread": _num(self.spread, 4),
            "median_steady_mbps": _num(self.median_steady_mbps),
            "max_buffer_bytes": self.max_buffer_bytes,
            "mbps_per_mb": _num(self.mbps_per_mb),
            "iperf3_mbps": _num(self.iperf3_mbps),
            "iperf3_error": self.iperf3_error,
            "runs": [r.to_json() for r in self.runs],
            "trace": [[t, b] for t, b in self.trace],
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> CellResult:
        cell = Cell(str(d["tuning"]), float(d["rtt_ms"]), int(d["streams"]))
        ip = d.get("iperf3_mbps")
        ip_err = d.get("iperf3_error")
        return cls(
            cell,
            tuple(Run.from_json(r) for r in d.get("runs", ())),
            None if ip is None else float(ip),
            None if ip_err is None else str(ip_err),
            tuple((float(t), int(b)) for t, b in d.get("trace", ())),
        )


def _num(x: float | None, nd: int = 3) -> float | None:
    """JSON has no NaN: an unmeasured value is null."""
    return None if x is None or x != x else round(x, nd)


def steady_goodput(samples: Sequence[tuple[float, float]], warmup_s: float) -> float:
    """Mean goodput (Mbit/s) of the samples (t_s, goodput over the interval ending at t_s)
    after `warmup_s`, time-weighted; the last sample is left out because it covers the
    drain after the sender stopped. Falls back to all samples for a run too short."""
    spans: list[tuple[float, float]] = []
    prev = 0.0
    for t, mbps in samples:
        spans.append((t - prev, mbps))
        prev = t
    starts = [t - dt for (t, _), (dt, _) in zip(samples, spans, strict=True)]
    body = [s for s, start in zip(spans[:-1], starts[:-1], strict=True) if start >= warmup_s]
    if not body:
        body = spans
    seconds = sum(dt for dt, _ in body)
    return sum(dt * m for dt, m in body) / seconds if seconds > 0 else 0.0


def warmup_s(rtt_ms: float) -> float:
    """Slow start to a 64 KB-class window takes a few RTTs; skip 5 of them (+0.25 s)."""
    return 0.25 + 5 * rtt_ms / 1e3


def downsample(
    points: Sequence[tuple[float, int]], limit: int = MAX_TRACE_POINTS
) -> tuple[tuple[float, int], ...]:
    if len(points) <= limit:
        return tuple(points)
    step = len(points) / limit
    return tuple(points[int(i * step)] for i in range(limit))


@dataclass
class ResultStore:
    """The results file: the plan's config plus one CellResult per measured cell."""

    path: str
    config: dict[str, Any]
    cells: dict[str, CellResult] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def open(cls, path: str, plan: Plan) -> ResultStore:
        """Load earlier results for the same configuration; refuse a different one (its
        cells would mix two experiments in one table)."""
        store = cls(path, plan.config())
        if not os.path.exists(path):
            return store
        with open(path) as f:
            data = json.load(f)
        if data.get("schema") != SCHEMA or data.get("config") != store.config:
            raise UsageError(
                f"{path} holds results of another configuration; "
                "move it away or choose another --out"
            )
        store.meta = dict(data.get("meta", {}))
        for d in data.get("cells", ()):
            cr = CellResult.from_json(d)
            store.cells[cr.cell.key] = cr
        return store

    def get(self, cell: Cell) -> CellResult:
        return self.cells.get(cell.key, CellResult(cell))

    def runs_missing(self, cell: Cell, reps: int) -> int:
        return max(0, reps - len(self.get(cell).good_runs))

    def add_run(self, cell: Cell, run: Run, trace: Sequence[tuple[float, int]] = ()) -> None:
        old = self.get(cell)
        keep = old.trace or (downsample(trace) if cell.tuning in TRACED_TUNINGS else ())
        # A failed run is kept for the record but does not count towards the repetitions.
        self.cells[cell.key] = replace(old, runs=(*old.runs, run), trace=keep)

    def set_iperf3(self, cell: Cell, mbps: float | None, error: str | None) -> None:
        self.cells[cell.key] = replace(self.get(cell), iperf3_mbps=mbps, iperf3_error=error)

    def save(self) -> None:
        data = {
            "schema": SCHEMA,
            "config": self.config,
            "meta": self.meta,
            "cells": [c.to_json() for c in self.cells.values()],
        }
        os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(data, f, indent=1)
            f.write("\n")
        os.replace(tmp, self.path)  # atomic: an interrupt never leaves half a file
