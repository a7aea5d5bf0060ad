"""Parsing and formatting of durations, rates, sizes and percentages.

Network rates are decimal (1 mbit = 10^6 bit/s). Sizes follow the convention of the tuning
literature the tool quotes: KB/MB/GB are decimal, KiB/MiB/GiB binary; a bare number is bytes.
"""

from __future__ import annotations

import math
import re

from tcpwizard.exitcodes import UsageError

_NUM = r"([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)"

_TIME = {
    "": 1e-3,
    "ms": 1e-3,
    "us": 1e-6,
    "µs": 1e-6,
    "ns": 1e-9,
    "s": 1.0,
    "sec": 1.0,
    "m": 60.0,
    "min": 60.0,
}
_RATE = {
    "": 1.0,
    "bps": 1.0,
    "bit": 1.0,
    "b/s": 1.0,
    "k": 1e3,
    "kbit": 1e3,
    "kbps": 1e3,
    "kb/s": 1e3,
    "m": 1e6,
    "mbit": 1e6,
    "mbps": 1e6,
    "mb/s": 1e6,
    "g": 1e9,
    "gbit": 1e9,
    "gbps": 1e9,
    "gb/s": 1e9,
    "t": 1e12,
    "tbit": 1e12,
    "tbps": 1e12,
}
_SIZE = {
    "": 1,
    "b": 1,
    "byte": 1,
    "bytes": 1,
    "k": 1000,
    "kb": 1000,
    "m": 1000**2,
    "mb": 1000**2,
    "g": 1000**3,
    "gb": 1000**3,
    "kib": 1024,
    "mib": 1024**2,
    "gib": 1024**3,
}


def _split(text: str, what: str, example: str) -> tuple[float, str]:
    if text.strip().startswith("-"):
        raise UsageError(f"{what} must be positive, not {text!r} (example: {example})")
    m = re.fullmatch(_NUM + r"\s*([a-zA-Zµ/%]*)", text.strip())
    if not m:
        raise UsageError(f"cannot read {what} {text!r} (example: {example})")
    value = float(m.group(1))
    if not math.isfinite(value):
        raise UsageError(f"cannot read {what} {text!r} (example: {example})")
    return value, m.group(2).lower()


def _finite(value: float, text: str, what: str) -> float:
    # 1e308 times a unit overflows to inf, which no later arithmetic survives.
    if not math.isfinite(value):
        raise UsageError(f"{what} {text!r} is too large")
    return value


def parse_duration(text: str, default_unit: str = "ms") -> float:
    """Seconds. A bare number is taken in `default_unit` (ms for RTTs, s for test lengths)."""
    value, unit = _split(text, "duration", "50ms, 800us, 0.2s")
    unit = unit or default_unit
    if unit not in _TIME:
        raise UsageError(f"unknown time unit {unit!r} in {text!r} (use ms, us or s)")
    return _finite(value * _TIME[unit], text, "duration")


def parse_rate(text: str) -> float:
    """Bits per second. Units are bits: 'mbit', 'mbps', 'gbit'... (a bare number is bit/s)."""
    value, unit = _split(text, "rate", "500mbit, 1gbit, 10mbps")
    if unit not in _RATE:
        raise UsageError(f"unknown rate unit {unit!r} in {text!r} (use kbit, mbit or gbit)")
    rate = _finite(value * _RATE[unit], text, "rate")
    if rate <= 0:
        raise UsageError(f"rate must be positive: {text!r}")
    return rate


def parse_size(text: str) -> int:
    """Bytes. KB/MB/GB decimal, KiB/MiB/GiB binary."""
    value, unit = _split(text, "size", "64KB, 128MB, 4MiB")
    if unit not in _SIZE:
        raise UsageError(f"unknown size unit {unit!r} in {text!r} (use KB, MB, GB, KiB, MiB)")
    return round(_finite(value * _SIZE[unit], text, "size"))


def parse_percent(text: str) -> float:
    """A fraction 0..1 from '0.5%' or '0.005'."""
    value, unit = _split(text, "percentage", "0.5%")
    if unit not in ("%", ""):
        raise UsageError(f"cannot read percentage {text!r} (example: 0.5%)")
    frac = value / 100.0 if unit == "%" else value
    if not 0.0 <= frac <= 1.0:
        raise UsageError(f"percentage out of range: {text!r}")
    return frac


def format_bytes(n: float) -> str:
    """Decimal units, as the tuning slides print them (9.4 MB, 625 KB)."""
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if abs(n) >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n:.0f} B"


def format_mbps(mbps: float | None, missing: str = "?") -> str:
    """A throughput in the verdict's style: one decimal in Mbit/s, two in Gbit/s from
    1 Gbit/s up (the output and the evidence print rates this one way)."""
    if mbps is None:
        return missing
    return f"{mbps / 1000:,.2f} Gbit/s" if mbps >= 999.95 else f"{mbps:.1f} Mbit/s"


def format_rate(bps: float) -> str:
    for unit, size in (("Gbit/s", 1e9), ("Mbit/s", 1e6), ("kbit/s", 1e3)):
        if abs(bps) >= size:
            return f"{bps / size:.3g} {unit}"
    return f"{bps:.0f} bit/s"
