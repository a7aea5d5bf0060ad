"""A local SQLite history of check results, so the trend of a path can be shown: the BDP of a
WAN moves through the day (drsFTP paper, Figure 1).

Rows keep the whole JSON report; a few columns are extracted for queries. Concurrent writers
(cron jobs overlapping an exporter) are serialised by SQLite's lock with a busy timeout; a row
that no longer parses is reported, never fatal.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Iterator, Mapping
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SCHEMA = """
CREATE TABLE IF NOT EXISTS checks (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    ts REAL NOT NULL,
    host TEXT NOT NULL,
    report TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS checks_host_ts ON checks (host, ts);
"""


def default_path() -> Path:
    explicit = os.environ.get("TCPWIZARD_HISTORY")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base, "tcpwizard", "history.sqlite3")


@dataclass(frozen=True)
class HistoryRow:
    id: int
    ts: float
    host: str
    rtt_min_ms: float | None
    capacity_mbps: float | None
    throughput_mbps: float | None
    limiting_factor: str | None
    exit_code: int | None


@dataclass(frozen=True)
class CorruptRow:
    id: int
    ts: float
    reason: str


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def summarize(row_id: int, ts: float, host: str, report: Mapping[str, Any]) -> HistoryRow:
    path = report.get("path") or {}
    rtt = path.get("rtt_ms") or {} if isinstance(path, dict) else {}
    modes = (report.get("transfer") or {}).get("modes") or []
    rates = [_num(m.get("throughput_mbps")) for m in modes if isinstance(m, dict)]
    rates_known = [r for r in rates if r is not None]
    verdict = report.get("verdict") or {}
    code = report.get("exit_code")
    return HistoryRow(
        row_id,
        ts,
        host,
        _num(rtt.get("min")) if isinstance(rtt, dict) else None,
        _num(path.get("capacity_mbps")) if isinstance(path, dict) else None,
        max(rates_known) if rates_known else None,
        verdict.get("limiting_factor") if isinstance(verdict, dict) else None,
        int(code) if isinstance(code, int) else None,
    )


class History:
    def __init__(self, path: Path | str | None = None, timeout_s: float = 30.0) -> None:
        self.path = Path(path) if path else default_path()
        self.timeout_s = timeout_s

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with closing(sqlite3.connect(self.path, timeout=self.timeout_s)) as db:
            db.execute("PRAGMA journal_mode=WAL")
            db.executescript(SCHEMA)
            with db:
                yield db

    def append(self, host: str, report: Mapping[str, Any], ts: float | None = None) -> int:
        with self._connect() as db:
            cur = db.execute(
                "INSERT INTO checks (ts, host, report) VALUES (?, ?, ?)",
                (time.time() if ts is None else ts, host, json.dumps(report, sort_keys=True)),
            )
            return int(cur.lastrowid or 0)

    def rows(
        self, host: str, since: float | None = None, limit: int = 1000
    ) -> tuple[list[HistoryRow], list[CorruptRow]]:
        good: list[HistoryRow] = []
        bad: list[CorruptRow] = []
        with self._connect() as db:
            cur = db.execute(
                "SELECT id, ts, host, report FROM checks WHERE host = ? AND ts >= ? "
                "ORDER BY ts DESC LIMIT ?",
                (host, since or 0.0, limit),
            )
            for row_id, ts, h, text in cur.fetchall():
                try:
                    data = json.loads(text)
                    if not isinstance(data, dict):
                        raise ValueError("not a JSON object")
                    good.append(summarize(row_id, ts, h, data))
                except (ValueError, TypeError, AttributeError) as exc:
                    bad.append(CorruptRow(row_id, ts, str(exc) or type(exc).__name__))
        good.reverse()
        return good, bad

    def hosts(self) -> list[str]:
        with self._connect() as db:
            return [h for (h,) in db.execute("SELECT DISTINCT host FROM checks ORDER BY host")]
