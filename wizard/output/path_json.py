"""`tcpwizard path --json`: the document and its JSON Schema (draft 2020-12), built here from
the frozen PathHops and PathAdvice. `make schema` writes the committed schema
(docs/path.schema.json); a test fails when it is stale."""

from __future__ import annotations

from typing import Any

from tcpwizard import TOOL_NAME, __version__
from tcpwizard.advice.path_advice import PathAdvice
from tcpwizard.measure.observe.synopts import SynOptions
from tcpwizard.measure.probes.hop_model import Hop, PathHops
from tcpwizard.measure.probes.syntrace_model import SynTrace
from tcpwizard.output.json_format import fields_json, finding_json, fix_json
from tcpwizard.output.schema import (
    BOOL,
    FINDING,
    FIX,
    INT,
    NUM,
    STR,
    Schema,
    arr,
    document,
    nullable,
    obj,
    text_of,
)

PATH_SCHEMA_VERSION = 1
Json = dict[str, Any]


def _r(x: float | None, digits: int = 3) -> float | None:
    return None if x is None else round(x, digits)


def hop_json(h: Hop) -> Json:
    return {
        "ttl": h.ttl,
        "address": h.address,
        "name": h.name,
        "other_addresses": list(h.other_addresses),
        "sent": h.sent,
        "received": h.received,
        "rtt_min_ms": _r(h.rtt_min_ms),
        "rtt_median_ms": _r(h.rtt_median_ms),
        "loss_pct": _r(h.loss_pct, 2),
        "real_loss_pct": _r(h.real_loss_pct, 2),
        "rate_limited": h.rate_limited,
        "destination": h.destination,
    }


def _opts(o: SynOptions | None) -> Json | None:
    return None if o is None else o.to_wire()


def syn_json(t: SynTrace | None) -> Json | None:
    """The SYN's options per hop and where they changed (measure/probes/syntrace.py)."""
    if t is None:
        return None
    f = t.finding
    return {
        "port": t.port,
        "sent": t.sent.to_wire(),
        "hops": [
            {
                "ttl": h.ttl,
                "address": h.address,
                "quote": h.quote,
                "seen": _opts(h.seen),
                "removed": list(h.removed),
                "changed": list(h.changed),
                "destination": h.destination,
            }
            for h in t.hops
        ],
        "finding": None
        if f is None
        else {
            "after_hop": f.after_hop,
            "after_address": f.after_address,
            "before_hop": f.before_hop,
            "before_address": f.before_address,
            "removed": list(f.removed),
            "changed": list(f.changed),
            "text": f.text,
        },
        "probes_sent": t.probes_sent,
        "notes": list(t.notes),
    }


def hops_json(p: PathHops, adv: PathAdvice) -> Json:
    """The hops section (also `check --hops` puts it in its report)."""
    return {
        "method": p.method,
        "port": p.port,
        "reached": p.reached,
        "hops": [hop_json(h) for h in p.hops],
        "rtt_jump": None
        if p.rtt_jump_hop is None
        else {"hop": p.rtt_jump_hop, "ms": _r(p.rtt_jump_ms)},
        "loss_start": None
        if p.loss_start_hop is None
        else {"hop": p.loss_start_hop, "loss_pct": _r(p.end_loss_pct, 2)},
        "rate_limited_hops": list(p.rate_limited_hops),
        "mtu": None if p.mtu is None else fields_json(p.mtu),
        "findings": [finding_json(f) for f in adv.findings],
        "fixes": [fix_json(x) for f in adv.findings for x in f.fixes],
        "probes_sent": p.probes_sent,
        "elapsed_s": _r(p.elapsed_s, 2),
        "notes": list(p.notes),
        "syn_options": syn_json(p.syn),
    }


def path_json(p: PathHops, adv: PathAdvice) -> Json:
    return {
        "schema_version": PATH_SCHEMA_VERSION,
        "tool": {"name": TOOL_NAME, "version": __version__},
        "target": {"host": p.host, "address": p.address, "family": p.family},
        **hops_json(p, adv),
        "exit_code": int(adv.exit_code),
    }


HOP = obj(
    {
        "ttl": INT,
        "address": nullable(STR),
        "name": nullable(STR),
        "other_addresses": arr(STR),
        "sent": INT,
        "received": INT,
        "rtt_min_ms": nullable(NUM),
        "rtt_median_ms": nullable(NUM),
        "loss_pct": NUM,
        "real_loss_pct": NUM,
        "rate_limited": BOOL,
        "destination": BOOL,
    }
)
MTU = obj(
    {
        "local_mtu": INT,
        "path_mtu": nullable(INT),
        "hop": nullable(INT),
        "hop_address": nullable(STR),
        "blackhole": BOOL,
        "blackhole_hop": nullable(INT),
        "blackhole_address": nullable(STR),
        "probes": INT,
        "note": STR,
    }
)
SYN_OPTS = obj(
    {
        "mss": nullable(INT),
        "wscale": nullable(INT),
        "sack_permitted": BOOL,
        "timestamps": BOOL,
        "nops": INT,
    }
)
SYN_HOP = obj(
    {
        "ttl": INT,
        "address": nullable(STR),
        "quote": {"enum": ["full", "short", "none"]},
        "seen": nullable(SYN_OPTS),
        "removed": arr(STR),
        "changed": arr(STR),
        "destination": BOOL,
    }
)
SYN_FINDING = obj(
    {
        "after_hop": INT,
        "after_address": nullable(STR),
        "before_hop": nullable(INT),
        "before_address": nullable(STR),
        "removed": arr(STR),
        "changed": arr(STR),
        "text": STR,
    }
)
SYN_SECTION = obj(
    {
        "port": INT,
        "sent": SYN_OPTS,
        "hops": arr(SYN_HOP),
        "finding": nullable(SYN_FINDING),
        "probes_sent": INT,
        "notes": arr(STR),
    }
)
HOPS_PROPS: dict[str, Schema] = {
    "method": {"enum": ["icmp", "udp", "tcp"]},
    "port": nullable(INT),
    "reached": BOOL,
    "hops": arr(HOP),
    "rtt_jump": nullable(obj({"hop": INT, "ms": NUM})),
    "loss_start": nullable(obj({"hop": INT, "loss_pct": NUM})),
    "rate_limited_hops": arr(INT),
    "mtu": nullable(MTU),
    "findings": arr(FINDING),
    "fixes": arr(FIX),
    "probes_sent": INT,
    "elapsed_s": NUM,
    "notes": arr(STR),
    "syn_options": nullable(SYN_SECTION),
}
HOPS_SECTION = obj(HOPS_PROPS)


def path_schema() -> Schema:
    body = obj(
        {
            "schema_version": {"const": PATH_SCHEMA_VERSION},
            "tool": obj({"name": {"const": "tcpwizard"}, "version": STR}),
            "target": obj({"host": STR, "address": STR, "family": {"enum": [4, 6]}}),
            **HOPS_PROPS,
            "exit_code": INT,
        }
    )
    return document(
        "path",
        "tcpwizard path",
        "Output of `tcpwizard path --json` "
        f"(schema_version {PATH_SCHEMA_VERSION}); docs/path.md explains each field.",
        body,
    )


def schema_text() -> str:
    return text_of(path_schema())
