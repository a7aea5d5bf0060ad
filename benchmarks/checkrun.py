"""One `check` run inside a lab host for the benchmarks, printed as one JSON line: the verdict,
the capacity the verdict used per direction (probe and transfers combined) beside the probe's
own estimates, and every mode's rate.

`python benchmarks/checkrun.py HOST [--quick] [--keep DIR]`. The JSON report of `check --json`
carries the probe's capacity but not the combined one, which is what a right-rate bench must
judge; with `--keep` the whole report goes to a file in DIR too, so a miss can be read later.
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from tcpwizard.advice.capacity_view import path_capacity
from tcpwizard.advice.diagnose import Evidence
from tcpwizard.context import Context
from tcpwizard.output.json_format import report_json
from tcpwizard.run import CheckRequest, run_check


def check_summary(host: str, quick: bool = False, keep: Path | None = None) -> dict[str, Any]:
    t0 = time.monotonic()
    ctx = Context()
    # As `tcpwizard check` runs it: as root, the tuned modes force their buffers past
    # net.core.rmem_max/wmem_max (wizard/commands/check.py).
    report = run_check(CheckRequest(host, quick=quick, force_buffers=ctx.is_root), ctx)
    seconds = time.monotonic() - t0
    kept = None
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        kept = keep / f"check-{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:4]}.json"
        kept.write_text(json.dumps(report_json(report)))
    ev = Evidence(report.host, report.peer, report.path, report.transfer)
    caps = path_capacity(ev)
    path = report.path
    v = report.verdict
    return {
        "factor": v.limiting_factor,
        "host": v.host_to_fix,
        "confidence": v.confidence,
        "capacity": {k: c for k, (c, _) in caps.items()},
        "capacity_note": {k: n for k, (_, n) in caps.items() if n},
        "probe": {
            "up": path.capacity.mbps if path and path.capacity else None,
            "up_limited_by": path.capacity.limited_by if path and path.capacity else None,
            "down": path.capacity_down.mbps if path and path.capacity_down else None,
            "up_method": path.capacity.method if path and path.capacity else None,
            "up_note": path.capacity.note if path and path.capacity else None,
        },
        "modes": [
            [m.mode, m.direction, round(m.throughput_mbps, 1)]
            for m in (report.transfer.modes if report.transfer else ())
            if m.error is None
        ],
        "evidence": list(v.evidence),
        "seconds": round(seconds, 1),
        "report": kept.name if kept is not None else None,
    }


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    rest = args[1:]
    keep = Path(rest[rest.index("--keep") + 1]) if "--keep" in rest[:-1] else None
    print(json.dumps(check_summary(args[0], quick="--quick" in rest, keep=keep)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
