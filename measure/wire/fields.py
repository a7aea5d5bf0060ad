"""Reading the fields of a decoded control message (measure/wire/protocol.py: decode) for the
typed messages of measure/wire*.py: strict readers that raise the ProtocolError serve
answers with (`bad-request` unless said otherwise), and lenient ones for what the client
takes from serve as it comes."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from tcpwizard.measure.wire.protocol import ProtocolError


def message_type(msg: Mapping[str, object]) -> str:
    """The message's type ("" when it has none: decode never lets such a line through)."""
    kind = msg.get("type")
    return kind if isinstance(kind, str) else ""


def typed_field(
    msg: Mapping[str, object], where: str, key: str, kind: type, required: bool = True
) -> Any:
    """msg[key] as `kind` (an int is taken for a float), None when absent and not required."""
    val = msg.get(key)
    if val is None and not required:
        return None
    # bool is an int in Python; a JSON true must not pass for a count.
    if kind in (int, float) and isinstance(val, bool):
        raise ProtocolError(f"{where}: {key!r} must be a number")
    if kind is float and isinstance(val, int):
        val = float(val)
    if not isinstance(val, kind):
        raise ProtocolError(f"{where}: {key!r} must be {kind.__name__}")
    if isinstance(val, float) and not math.isfinite(val):
        raise ProtocolError(f"{where}: {key!r} must be finite")
    return val


def int_in(msg: Mapping[str, object], key: str, default: int, lo: int, hi: int) -> int:
    """msg[key] (default when absent), an integer in lo..hi."""
    value = msg.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
        raise ProtocolError(f"{key} must be an integer in {lo}..{hi}")
    return value


def opt_float(v: object) -> float | None:
    ok = isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
    return float(v) if ok else None  # type: ignore[arg-type]


def opt_int(v: object) -> int | None:
    return int(v) if isinstance(v, int) and not isinstance(v, bool) else None
