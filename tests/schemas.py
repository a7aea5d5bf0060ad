"""The committed JSON schemas under docs/, for tests that validate the documents the
commands emit against what users are promised."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema

ROOT = Path(__file__).resolve().parent.parent


def schema_path(name: str) -> Path:
    """docs/<name>.schema.json: the committed file its generator must reproduce."""
    return ROOT / "docs" / f"{name}.schema.json"


def committed_schema(name: str) -> dict[str, Any]:
    """docs/<name>.schema.json, parsed."""
    doc: dict[str, Any] = json.loads(schema_path(name).read_text())
    return doc


def valid_document(text: str, schema: str) -> dict[str, Any]:
    """`text` parsed as JSON; it must validate against docs/<schema>.schema.json."""
    doc: dict[str, Any] = json.loads(text)
    jsonschema.validate(doc, committed_schema(schema))
    return doc
