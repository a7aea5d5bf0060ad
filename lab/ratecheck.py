"""Every rate a JSON report shows, against the line rate the lab configured: no figure a
user reads may exceed what the emulated link carries (advice/guard.py bounds them).

    over_line(doc, lab.line_rate_mbps)   # [] when every *_mbps field is within 1 %
"""

from __future__ import annotations

from typing import Any

# A rate may sit at the line rate; 1 % covers rounding of a figure computed at the bound.
TOLERANCE = 1.01
# Not rates of the path: what a host's settings would allow (the window law's ceilings)
# and the speed a NIC's driver claims. Both may rightly exceed the lab's line rate.
NOT_RATES = ("ceilings", "interface")


def rate_fields(doc: Any, path: str = "") -> list[tuple[str, float]]:
    """(JSON path, value) of every number under a key ending in `_mbps`, at any depth,
    outside NOT_RATES."""
    out: list[tuple[str, float]] = []
    if isinstance(doc, dict):
        for key, value in doc.items():
            where = f"{path}.{key}" if path else str(key)
            if key in NOT_RATES:
                continue
            if str(key).endswith("_mbps") and isinstance(value, (int, float)):
                if not isinstance(value, bool):
                    out.append((where, float(value)))
            else:
                out += rate_fields(value, where)
    elif isinstance(doc, list):
        for i, value in enumerate(doc):
            out += rate_fields(value, f"{path}[{i}]")
    return out


def over_line(doc: Any, line_mbps: float, tolerance: float = TOLERANCE) -> list[str]:
    """The rate fields above line_mbps x tolerance, as "path = value"."""
    return [f"{p} = {v:g}" for p, v in rate_fields(doc) if v > line_mbps * tolerance]
