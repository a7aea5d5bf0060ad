"""A rate limit in a host's own egress queue: the root qdisc that holds every packet the
interface sends to a rate (tbf's rate, cake's bandwidth, an htb tree's ceilings) or every
flow to one (fq's maxrate). Read from `tc -j qdisc show dev IF` and, for htb, `tc class
show dev IF` (its classes carry the rates; iproute2 prints them as text).

A shaper on the sending host is a limit no path measurement can see past: the probe's
trains leave through the same queue, so the capacity they show is the shaper's.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from tcpwizard.checks.hostread import HostReader
from tcpwizard.checks.model import Fix, HostAudit, HostRole
from tcpwizard.units import format_rate

# tc's rate units (tc(8), "RATES"): decimal prefixes on bits; "bps" is bytes per second.
_UNITS = {"bit": 1.0, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9, "tbit": 1e12, "bps": 8.0}
_RATE = re.compile(r"(\d+(?:\.\d+)?)([kmgt]?bit|bps)", re.IGNORECASE)
GUIDELINE = "tc(8); tc-tbf(8), tc-htb(8), tc-cake(8), tc-fq(8)"
_CLASS = re.compile(r"^class htb (\S+) root\b.*?\bceil (\S+)", re.IGNORECASE)


@dataclass(frozen=True)
class Shaper:
    kind: str  # the qdisc: tbf, cake, htb or fq
    rate_bps: float  # bits per second at the interface (L2 frames, headers included)
    per_flow: bool  # fq's maxrate: each flow is held to the rate, not the interface

    def describe(self) -> str:
        what = "every flow" if self.per_flow else "everything it sends"
        return f"{self.kind} holds {what} to {format_rate(self.rate_bps)}"


def tc_rate_bps(text: str) -> float | None:
    """`25Mbit`, `1Gbit`, `500Kbit`, `125000bps` -> bits per second."""
    m = _RATE.fullmatch(text.strip())
    return float(m.group(1)) * _UNITS[m.group(2).lower()] if m else None


def _bytes_rate(value: Any) -> float | None:
    """A rate tc's JSON gives in bytes per second (an integer; cake says "unlimited")."""
    return float(value) * 8 if isinstance(value, int | float) and value > 0 else None


def qdisc_objects(qdiscs_json: str) -> list[dict[str, Any]] | None:
    """The qdiscs `tc -j qdisc show` printed, or None when it is not tc's JSON."""
    try:
        items = json.loads(qdiscs_json or "[]")
    except ValueError:
        return None
    return [q for q in items if isinstance(q, dict)] if isinstance(items, list) else None


def root_qdisc(qdiscs: list[dict[str, Any]]) -> dict[str, Any] | None:
    return next((q for q in qdiscs if q.get("root")), None)


def parse_shaper(qdiscs_json: str, classes_text: str | None = None) -> Shaper | None:
    """The root limit of `tc -j qdisc show` (and, under an htb root, of `tc class show`):
    None when nothing caps the rate or the output cannot be read."""
    qdiscs = qdisc_objects(qdiscs_json)
    root = root_qdisc(qdiscs) if qdiscs is not None else None
    if qdiscs is None or root is None:
        return None
    kind = str(root.get("kind", ""))
    raw = root.get("options")
    opts: dict[str, Any] = raw if isinstance(raw, dict) else {}
    if kind == "tbf":
        rate = _bytes_rate(opts.get("rate"))
        return Shaper(kind, rate, False) if rate else None
    if kind == "cake":
        rate = _bytes_rate(opts.get("bandwidth"))
        return Shaper(kind, rate, False) if rate else None
    if kind == "htb":
        return _htb(opts, classes_text)
    fqs = [q for q in qdiscs if q.get("kind") == "fq"]
    if fqs and (kind == "fq" or kind == "mq"):
        rates = [_bytes_rate((q.get("options") or {}).get("maxrate")) for q in fqs]
        # A flow lands on one transmit queue: it is held only if every queue's fq holds it.
        if rates and all(r is not None for r in rates):
            return Shaper("fq", max(r for r in rates if r is not None), True)
    return None


def _htb(opts: dict[str, Any], classes_text: str | None) -> Shaper | None:
    """htb sends what no filter classifies to its default class, or unshaped when the
    default is 0: with one, the fastest root class's ceiling bounds what leaves."""
    if str(opts.get("default", "0")).lower() in ("0", "0x0") or not classes_text:
        return None
    ceilings = []
    for line in classes_text.splitlines():
        m = _CLASS.match(line.strip())
        rate = tc_rate_bps(m.group(2)) if m else None
        if rate:
            ceilings.append(rate)
    return Shaper("htb", max(ceilings), False) if ceilings else None


def _qdisc_argv(ifname: str) -> tuple[str, ...]:
    return ("tc", "-j", "qdisc", "show", "dev", ifname)


def _class_argv(ifname: str) -> tuple[str, ...]:
    return ("tc", "class", "show", "dev", ifname)


def read_shaper(host: HostReader, ifname: str) -> Shaper | None:
    """This host's egress limit on `ifname`, read with tc (recorded in the host's facts)."""
    text = host.command(*_qdisc_argv(ifname))
    if text is None:
        return None
    qdiscs = qdisc_objects(text)
    root = root_qdisc(qdiscs) if qdiscs else None
    htb = root is not None and root.get("kind") == "htb"
    classes = host.command(*_class_argv(ifname)) if htb else None
    return parse_shaper(text, classes)


def recorded_shaper(audit: HostAudit) -> Shaper | None:
    """The egress limit a host's audit recorded (its facts keep what tc printed), on the
    interface it audited: a far end's too, from the audit it sent."""
    if audit.interface is None:
        return None
    facts = dict(audit.host_facts)
    name = audit.interface.name
    text = facts.get("cmd:" + " ".join(_qdisc_argv(name)))
    return parse_shaper(text, facts.get("cmd:" + " ".join(_class_argv(name)))) if text else None


def removal_fix(ifname: str, host: HostRole, answers: tuple[str, ...]) -> Fix:
    """Take the limit out of `ifname`'s egress queue (printed, never applied by --fix)."""
    return Fix(
        id=f"interface_shaper:{ifname}",
        kind="other",
        host=host,
        key=f"qdisc {ifname}",
        value="no rate limit",
        command=f"tc qdisc del dev {ifname} root",
        why=(
            "back to the interface's default queue; if the limit is wanted (to stay under a "
            "provider's policer, to leave room for others), raise its rate to the path's instead"
        ),
        guideline=GUIDELINE,
        answers=answers,
    )
