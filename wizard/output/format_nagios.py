"""`--format nagios`: one plugin status line with performance data (a check, or the
UNKNOWN line of a check that failed); `--warning/--critical` move the exit code."""

from __future__ import annotations

from typing import TYPE_CHECKING, TextIO

from tcpwizard.output.document import Format, RenderOptions

if TYPE_CHECKING:
    from tcpwizard.documents import ErrorDocument
    from tcpwizard.report import Report


def _check(doc: Report, stream: TextIO, opts: RenderOptions) -> None:
    from tcpwizard.output import nagios

    nagios.render(doc, stream, opts.warning, opts.critical)


def _error(doc: ErrorDocument, stream: TextIO, opts: RenderOptions) -> None:
    from tcpwizard.output.errors import error_report
    from tcpwizard.output.nagios import nagios_status

    line = nagios_status(error_report(doc.host, doc.port, doc.message, doc.exit_code))[1]
    stream.write(line + "\n")


FORMAT = Format("nagios", {"check": _check, "error": _error}, thresholds=True)
