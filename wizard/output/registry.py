"""The output formats, in the order `--format` lists them. A new format is one module
with a `FORMAT` (output/document.py: its name and a renderer per document kind) and one
line here; the CLI's choices for each command follow from the kinds it prints."""

from __future__ import annotations

from typing import TYPE_CHECKING, TextIO

from tcpwizard.exitcodes import ExitCode
from tcpwizard.output import format_json, format_nagios, format_prometheus, format_text
from tcpwizard.output.document import PLAIN, Document, Format, RenderOptions

if TYPE_CHECKING:
    from tcpwizard.outcome import Outcome

FORMATS: dict[str, Format] = {
    f.name: f
    for f in (
        format_text.FORMAT,
        format_json.FORMAT,
        format_prometheus.FORMAT,
        format_nagios.FORMAT,
    )
}


def names_for(*kinds: str) -> tuple[str, ...]:
    """The formats that render every one of these document kinds (a command's choices)."""
    return tuple(name for name, f in FORMATS.items() if f.kinds.issuperset(kinds))


def get(name: str) -> Format:
    from tcpwizard.exitcodes import UsageError

    try:
        return FORMATS[name]
    except KeyError:
        raise UsageError(f"unknown output format {name!r}") from None


def emit(doc: Document, fmt: str, stream: TextIO, opts: RenderOptions = PLAIN) -> ExitCode:
    """Render `doc` and return the process's exit code for it: the document's own, moved
    by the thresholds where the format takes them (Nagios)."""
    from tcpwizard.outcome import NO_THRESHOLDS, Thresholds, exit_code

    chosen = get(fmt)
    chosen.render(doc, stream, opts)
    thresholds = NO_THRESHOLDS
    if chosen.thresholds:
        thresholds = Thresholds.parse(opts.warning, opts.critical)
    return exit_code(_read_back(doc), thresholds)


def _read_back(doc: Document) -> Outcome:
    """The document's code, with the wizard gap a threshold is judged against."""
    from tcpwizard.outcome import Outcome
    from tcpwizard.report import Report

    if not isinstance(doc, Report):
        return Outcome(given=doc.exit_code)
    gap = doc.verdict.wizard_gap
    return Outcome(given=doc.exit_code, current_mbps=gap.current_mbps, tuned_mbps=gap.tuned_mbps)
