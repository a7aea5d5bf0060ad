"""`--format json`: the versioned documents (docs/json.md; schemas in docs/*.schema.json)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, TextIO

from tcpwizard.output.document import Format, RenderOptions, lazy

if TYPE_CHECKING:
    from tcpwizard.conns_report import ConnsReport
    from tcpwizard.documents import CaptureDocument, ErrorDocument, PathDocument, ProbeDocument
    from tcpwizard.report import Report


def _check(doc: Report, stream: TextIO, opts: RenderOptions) -> None:
    from tcpwizard.output import json_format

    json_format.render(doc, stream)


def _probe(doc: ProbeDocument, stream: TextIO, opts: RenderOptions) -> None:
    from tcpwizard.output.json_format import report_json

    print(json.dumps(report_json(doc.report), indent=2, allow_nan=False), file=stream)


def _path(doc: PathDocument, stream: TextIO, opts: RenderOptions) -> None:
    from tcpwizard.output.path_json import path_json

    print(json.dumps(path_json(doc.hops, doc.advice), indent=2, allow_nan=False), file=stream)


def _conns(doc: ConnsReport, stream: TextIO, opts: RenderOptions) -> None:
    from tcpwizard.output import conns_json

    conns_json.render(doc, stream, lines=opts.lines)


def _capture(doc: CaptureDocument, stream: TextIO, opts: RenderOptions) -> None:
    from tcpwizard.output import capture_json

    capture_json.render(doc.report, doc.exit_code, stream)


def _error(doc: ErrorDocument, stream: TextIO, opts: RenderOptions) -> None:
    from tcpwizard.output.errors import error_report

    doc_json = error_report(doc.host, doc.port, doc.message, doc.exit_code)
    stream.write(json.dumps(doc_json, indent=2) + "\n")


FORMAT = Format(
    "json",
    {
        "check": _check,
        "probe": _probe,
        "transfer": lazy("transfer_out:render_json"),
        "calc": lazy("calc_out:render_json"),
        "history": lazy("history_out:render_json"),
        "buffer": lazy("history_out:render_buffer_json"),
        "fix-plan": lazy("fix_out:render_plan_json"),
        "fix-result": lazy("fix_out:render_result_json"),
        "path": _path,
        "conns": _conns,
        "capture": _capture,
        "error": _error,
    },
)
