"""`--format prometheus`: the text exposition format, for node_exporter's textfile
collector (a check, or the error document of a check that failed: `tcpwizard_up 0`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, TextIO

from tcpwizard.output.document import Format, RenderOptions

if TYPE_CHECKING:
    from tcpwizard.documents import ErrorDocument
    from tcpwizard.report import Report


def _check(doc: Report, stream: TextIO, opts: RenderOptions) -> None:
    from tcpwizard.output import prometheus

    prometheus.render(doc, stream)


def _error(doc: ErrorDocument, stream: TextIO, opts: RenderOptions) -> None:
    from tcpwizard.output.errors import error_report
    from tcpwizard.output.prometheus import render_prometheus

    stream.write(render_prometheus(error_report(doc.host, doc.port, doc.message, doc.exit_code)))


FORMAT = Format("prometheus", {"check": _check, "error": _error})
