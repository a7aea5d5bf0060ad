"""The committed JSON schemas under docs/, for tests that validate the documents the
commands emit against what users are promised."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def committed_schema(name: str) -> dict[str, Any]:
    """docs/<name>.schema.json, parsed."""
    doc: dict[str, Any] = json.loads((ROOT / "docs" / f"{name}.schema.json").read_text())
    return doc
