"""Generated files are committed; these fail when they are stale (DESIGN.md rule 7), and
the JSON every format emits must validate against the committed schema."""

from __future__ import annotations

import dataclasses
import io
import json
from pathlib import Path

import jsonschema
import pytest

from tcpwizard.completion_gen import FILES, generate
from tcpwizard.context import Context
from tcpwizard.main import main
from tcpwizard.measure.model import (
    CapacityEstimate,
    ModeResult,
    TcpInfoSample,
    TransferResult,
    TransferSample,
)
from tcpwizard.output import json_format
from tcpwizard.output.schema import schema_text
from tcpwizard.report import Report, TargetInfo, local_report

from .fakes import make_tree
from .model_builders import far_path, host_audit
from .schemas import committed_schema, schema_path

ROOT = Path(__file__).resolve().parent.parent
SCHEMA_FILE = schema_path("report")


def test_schema_file_is_current() -> None:
    assert SCHEMA_FILE.read_text() == schema_text(), "run `make schema` and commit"


@pytest.mark.parametrize(("shell", "name"), sorted(FILES.items()))
def test_completions_are_current(shell: str, name: str) -> None:
    committed = (ROOT / "completions" / name).read_text()
    assert committed == generate(shell), "run `make completions` and commit"


def test_completions_cover_every_command() -> None:
    fish = (ROOT / "completions" / "tcpwizard.fish").read_text()
    for command in ("check", "calc", "probe", "transfer", "serve", "fix", "lab"):
        assert f"-a {command} " in fish


def validate(doc: object) -> None:
    jsonschema.validate(doc, committed_schema("report"))


def test_local_check_json_validates(tmp_path: Path) -> None:
    root = make_tree(tmp_path / "sys", {"net.ipv4.tcp_rmem": "4096 65536 262144"})
    out = io.StringIO()
    code = main(["check", "--json"], Context(sysctl_root=str(root), stdout=out))
    doc = json.loads(out.getvalue())
    validate(doc)
    assert doc["exit_code"] == code


def test_real_host_json_validates() -> None:
    out = io.StringIO()
    main(["check", "--json"], Context(stdout=out))
    validate(json.loads(out.getvalue()))


def full_report(tmp_path: Path) -> Report:
    """Every optional part filled, as later stages will."""
    host = host_audit(tmp_path, "sys", {})
    sample = TransferSample(
        0.5,
        95.0,
        2 << 20,
        1 << 20,
        96.0,
        50.2,
        TcpInfoSample(50200, 300, 420, 1, 96_000_000, 1, 0, 0, 1448),
    )
    mode = ModeResult(
        "drs", "up", 1, 60_000_000, 5.0, 95.5, 2 << 20, 1, (sample,), 0.0, 0.0, 1.0, "bbr"
    )
    path = far_path(CapacityEstimate(100.1, "capprobe-pairs+train", 0.9))
    base = local_report(host, TargetInfo("far.example", "198.51.100.7", 5301))
    return dataclasses.replace(base, peer=host, path=path, transfer=TransferResult((mode,)))


def test_full_report_json_validates(tmp_path: Path) -> None:
    doc = json_format.report_json(full_report(tmp_path))
    validate(doc)
    assert doc["transfer"]["direction"] == "up"
    assert doc["path"]["rtt_ms"]["min"] == 50.1


def test_schema_rejects_a_broken_document(tmp_path: Path) -> None:
    doc = json_format.report_json(full_report(tmp_path))
    doc["verdict"]["limiting_factor"] = "gremlins"
    with pytest.raises(jsonschema.ValidationError):
        validate(doc)


def test_docs_list_every_check() -> None:
    from tcpwizard.checks import check_ids

    audit_doc = (ROOT / "docs" / "audit.md").read_text()
    missing = [c for c in check_ids() if f"| `{c}` |" not in audit_doc]
    assert missing == [], "document these checks in docs/audit.md (Audit checks)"
