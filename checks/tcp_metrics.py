"""The kernel's per-destination TCP metrics cache (`ip tcp_metrics`): a cached ssthresh from
an earlier lossy connection makes new connections leave slow start early (Tierney,
"ssthresh caching")."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass

_TIME_UNITS = {"us": 1e-3, "ms": 1.0, "sec": 1000.0, "s": 1000.0}


@dataclass(frozen=True)
class MetricsEntry:
    address: str
    age_s: float | None
    ssthresh: int | None
    cwnd: int | None
    rtt_ms: float | None
    source: str | None


def _ms(text: str) -> float | None:
    m = re.fullmatch(r"([0-9.]+)(us|ms|sec|s)?", text)
    if not m:
        return None
    return float(m.group(1)) * _TIME_UNITS[m.group(2) or "ms"]


def parse_tcp_metrics(text: str) -> tuple[MetricsEntry, ...]:
    """Parse `ip tcp_metrics show` lines, e.g.
    `10.0.0.2 age 12.5sec ssthresh 7 cwnd 10 rtt 51ms rttvar 2ms source 10.0.0.1`."""
    entries = []
    for line in text.splitlines():
        words = line.split()
        if not words:
            continue
        fields = dict(zip(words[1::2], words[2::2], strict=False))
        age = fields.get("age", "").removesuffix("sec")

        def as_int(name: str, f: dict[str, str] = fields) -> int | None:
            v = f.get(name)
            return int(v) if v is not None and v.isdigit() else None

        entries.append(
            MetricsEntry(
                address=words[0],
                age_s=float(age) if re.fullmatch(r"[0-9.]+", age) else None,
                ssthresh=as_int("ssthresh"),
                cwnd=as_int("cwnd"),
                rtt_ms=_ms(fields["rtt"]) if "rtt" in fields else None,
                source=fields.get("source"),
            )
        )
    return tuple(entries)


def _run_ip() -> str:
    ip = shutil.which("ip")
    if ip is None:
        raise FileNotFoundError("the `ip` command (iproute2) is not installed")
    out = subprocess.run(
        [ip, "tcp_metrics", "show"], capture_output=True, text=True, timeout=5, check=False
    )
    if out.returncode != 0:
        raise OSError(out.stderr.strip() or f"ip tcp_metrics exited {out.returncode}")
    return out.stdout


def read_tcp_metrics(
    run: Callable[[], str] = _run_ip,
) -> tuple[tuple[MetricsEntry, ...] | None, str]:
    try:
        return parse_tcp_metrics(run()), ""
    except (OSError, subprocess.SubprocessError) as exc:
        return None, f"cannot read tcp_metrics: {exc}"
