"""A local SQLite history of check results, so the trend of a path can be shown: the BDP of a
WAN moves through the day (drsFTP paper, Figure 1).

Rows keep the whole JSON report; a few columns are extracted for queries. Concurrent writers
(cron jobs overlapping an exporter) are serialised by SQLite's lock with a busy timeout; a row
that no longer parses is reported, never fatal.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import stat
import time
import urllib.parse
from collections.abc import Iterator, Mapping
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tcpwizard.exitcodes import ExitCode, TcpWizardError

SCHEMA = """
CREATE TABLE IF NOT EXISTS checks (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    ts REAL NOT NULL,
    host TEXT NOT NULL,
    report TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS checks_host_ts ON checks (host, ts);
"""


SQLITE_MAGIC = b"SQLite format 3\x00"
SQLITE_HEADER_LEN = 100
SCHEMA_READ_TRIES = 5  # reads of a history's schema before it is called broken
SCHEMA_READ_PAUSE_S = 0.05  # times the try number, between them


def _schema_of(uri: str) -> tuple[set[str], set[str]]:
    with closing(sqlite3.connect(uri, uri=True)) as db:
        query = "SELECT name FROM sqlite_master WHERE type='table'"
        tables = {name for (name,) in db.execute(query)}
        columns = {row[1] for row in db.execute("PRAGMA table_info(checks)")}
    return tables, columns


# What a file must hold to be ours: the checks table with these columns, and nothing but
# SQLite's own bookkeeping besides.
_COLUMNS = frozenset({"id", "ts", "host", "report"})
_OWN_TABLES = frozenset({"checks", "sqlite_sequence"})


class HistoryError(TcpWizardError):
    """A history database that cannot be used; the file is left exactly as it was."""

    exit_code = ExitCode.DATA_ERROR


def _explicit_path() -> bool:
    return bool(os.environ.get("TCPWIZARD_HISTORY"))


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
    bdp_bytes: float | None = None  # capacity x min RTT as the check's probe measured it


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
        _num(path.get("bdp_bytes")) if isinstance(path, dict) else None,
    )


class History:
    """Reading never creates anything. Writing creates a database only at the default path
    (its directories too) or at an explicit path whose directory exists. A file that is not
    a tcpwizard history is refused before any statement that could change it."""

    def __init__(self, path: Path | str | None = None, timeout_s: float = 30.0) -> None:
        self.explicit = bool(path) or _explicit_path()
        self.path = Path(path) if path else default_path()
        self.timeout_s = timeout_s

    def exists(self) -> bool:
        try:
            os.stat(self.path)
        except FileNotFoundError:
            return False
        except OSError as exc:  # NotADirectoryError, EACCES on a parent...
            raise HistoryError(f"cannot use history {self.path}: {exc.strerror or exc}") from None
        return True

    def _check_ours(self) -> None:
        """Refuse anything but a tcpwizard history, reading only: no journal, no WAL switch."""
        where = str(self.path)
        try:
            st = os.stat(self.path)
            if not stat.S_ISREG(st.st_mode):
                raise HistoryError(f"history {where} is not a file")
            with open(self.path, "rb") as f:
                header = f.read(SQLITE_HEADER_LEN)
        except OSError as exc:
            raise HistoryError(f"cannot read history {where}: {exc.strerror or exc}") from None
        if len(header) < SQLITE_HEADER_LEN or not header.startswith(SQLITE_MAGIC):
            raise HistoryError(
                f"{where} is not a tcpwizard history (not an SQLite database); left unchanged"
            )
        tables, columns = self._read_schema()
        if "checks" not in tables or not columns >= _COLUMNS or not tables <= _OWN_TABLES:
            raise HistoryError(
                f"{where} is another program's database, not a tcpwizard history; left unchanged"
            )

    def _read_schema(self) -> tuple[set[str], set[str]]:
        """The tables and the checks table's columns, read without a lock. immutable: no
        -shm or -wal file is created beside a file that may not be ours (the schema of our
        own files is in the main file, checkpointed on close). Without a lock, a read can
        meet a page another writer is checkpointing and see the file as malformed for a
        moment: a few more tries tell that from a file that is broken."""
        uri = f"file:{urllib.parse.quote(str(self.path.absolute()))}?mode=ro&immutable=1"
        error: sqlite3.Error | None = None
        for attempt in range(SCHEMA_READ_TRIES):
            try:
                return _schema_of(uri)
            except sqlite3.Error as exc:
                error = exc
                if attempt + 1 < SCHEMA_READ_TRIES:
                    time.sleep(SCHEMA_READ_PAUSE_S * (attempt + 1))
        raise HistoryError(
            f"{self.path} is not a usable tcpwizard history ({error}); left unchanged"
        )

    def _create(self) -> None:
        """A complete database appears at the path in one step (a hard link of a finished
        temporary file), so a concurrent writer never sees a half-created file; if one
        beat us to it, theirs is used."""
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.{time.monotonic_ns()}")
        try:
            with closing(sqlite3.connect(tmp)) as db:
                db.execute("PRAGMA journal_mode=WAL")
                db.executescript(SCHEMA)
                db.commit()
            with contextlib.suppress(FileExistsError):
                os.link(tmp, self.path)
        finally:
            for leftover in (tmp, Path(f"{tmp}-wal"), Path(f"{tmp}-shm")):
                leftover.unlink(missing_ok=True)

    def _open(self, read_only: bool) -> sqlite3.Connection:
        if read_only:
            uri = f"file:{urllib.parse.quote(str(self.path.absolute()))}?mode=ro"
            try:
                return sqlite3.connect(uri, uri=True, timeout=self.timeout_s)
            except sqlite3.OperationalError:
                pass  # a WAL database without its -shm file opens only read-write
        return sqlite3.connect(self.path, timeout=self.timeout_s)

    @contextmanager
    def _connect(self, write: bool) -> Iterator[sqlite3.Connection]:
        new = not self.exists()
        if new:
            if not write:
                raise HistoryError(f"no history at {self.path}", ExitCode.UNKNOWN)
            parent = self.path.parent
            if self.explicit and not parent.is_dir():
                raise HistoryError(
                    f"history directory {parent} does not exist (create it, or leave out the "
                    "path for the default)",
                    ExitCode.USAGE,
                )
            try:
                parent.mkdir(parents=True, exist_ok=True)
                self._create()
            except (OSError, sqlite3.Error) as exc:
                raise HistoryError(
                    f"cannot create history {self.path}: {getattr(exc, 'strerror', None) or exc}",
                    ExitCode.UNKNOWN,
                ) from None
        self._check_ours()
        try:
            with closing(self._open(read_only=not write)) as db, db:
                yield db
        except sqlite3.Error as exc:
            raise HistoryError(f"history {self.path}: {exc}") from None

    def append(self, host: str, report: Mapping[str, Any], ts: float | None = None) -> int:
        with self._connect(write=True) as db:
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
        if not self.explicit and not self.exists():
            return good, bad
        with self._connect(write=False) as db:
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
        if not self.explicit and not self.exists():
            return []
        with self._connect(write=False) as db:
            return [h for (h,) in db.execute("SELECT DISTINCT host FROM checks ORDER BY host")]
