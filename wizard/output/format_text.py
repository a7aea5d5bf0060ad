"""`--format text`: for people at a terminal (rich where there are tables). Each renderer
imports its module when called, so a machine format never loads rich."""

from __future__ import annotations

from typing import TYPE_CHECKING, TextIO

from tcpwizard.output.document import Format, RenderOptions, lazy

if TYPE_CHECKING:
    from tcpwizard.conns_report import ConnsReport
    from tcpwizard.documents import CaptureDocument, ErrorDocument, PathDocument
    from tcpwizard.report import Report


def _check(doc: Report, stream: TextIO, opts: RenderOptions) -> None:
    from tcpwizard.output import text

    text.render(doc, stream, opts.color)


def _conns(doc: ConnsReport, stream: TextIO, opts: RenderOptions) -> None:
    from tcpwizard.output import conns_text

    conns_text.render(doc, stream)


def _capture(doc: CaptureDocument, stream: TextIO, opts: RenderOptions) -> None:
    from tcpwizard.output import capture_text

    capture_text.render(doc.report, stream)


def _path(doc: PathDocument, stream: TextIO, opts: RenderOptions) -> None:
    from tcpwizard.output import path_text

    path_text.render(doc.hops, doc.advice, stream)


def _error(doc: ErrorDocument, stream: TextIO, opts: RenderOptions) -> None:
    """The one line a failure prints on stderr (nothing for a closed pipe)."""
    if doc.line:
        print(doc.line, file=stream)


FORMAT = Format(
    "text",
    {
        "check": _check,
        "probe": lazy("probe_text:render"),
        "transfer": lazy("transfer_out:render"),
        "calc": lazy("calc_out:render"),
        "history": lazy("history_out:render"),
        "buffer": lazy("history_out:render_buffer"),
        "fix-plan": lazy("fix_out:render_plan"),
        "fix-result": lazy("fix_out:render_result"),
        "path": _path,
        "conns": _conns,
        "capture": _capture,
        "error": _error,
    },
    machine=False,
)
