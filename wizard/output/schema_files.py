"""`make schema`: every JSON Schema the tool ships, written into one folder as
NAME.schema.json (`python -m tcpwizard.output.schema_files docs`). Each schema is built
next to the code that writes its JSON; a test per schema fails when the committed file is
stale."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from tcpwizard.output import capture_json, conns_json, path_json, schema

SCHEMAS: dict[str, Callable[[], str]] = {
    "report": schema.schema_text,
    "conns": conns_json.schema_text,
    "capture": capture_json.schema_text,
    "path": path_json.schema_text,
}
EX_USAGE = 64  # sysexits.h: this is a build step, not a tcpwizard command


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m tcpwizard.output.schema_files FOLDER", file=sys.stderr)
        return EX_USAGE
    for name, text in SCHEMAS.items():
        (Path(argv[0]) / f"{name}.schema.json").write_text(text(), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
