"""The output contract: a `Document` (what a command found, with its exit code) and a
`Format` (a name, the document kinds it renders, and how). The formats are listed in
`output/registry.py`; the CLI's `--format` choices come from there."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TextIO

from tcpwizard.exitcodes import ExitCode, UsageError


class Document(Protocol):
    """A command's result, ready to render: `kind` picks the renderer, `exit_code` is the
    code `outcome.exit_code` decided for it (the JSON documents carry it too)."""

    @property
    def kind(self) -> str: ...

    @property
    def exit_code(self) -> ExitCode: ...


@dataclass(frozen=True)
class RenderOptions:
    color: bool | None = None  # text: None lets rich decide, False is plain
    warning: str | None = None  # Nagios thresholds (`--warning`, `--critical`)
    critical: str | None = None
    lines: bool = False  # JSON: one document a line (`conns --watch`)


PLAIN = RenderOptions()

# A renderer takes the document of its own kind (typed by its module), so Any here.
Renderer = Callable[[Any, TextIO, RenderOptions], None]


def lazy(where: str) -> Renderer:
    """`module:function` of tcpwizard.output, imported on first use: a command loads only
    the renderer it prints with (JSON never loads rich)."""
    module, _, name = where.partition(":")

    def render(doc: Any, stream: TextIO, opts: RenderOptions) -> None:
        found: Renderer = getattr(importlib.import_module(f"tcpwizard.output.{module}"), name)
        found(doc, stream, opts)

    render.__name__ = name
    return render


@dataclass(frozen=True)
class Format:
    name: str
    renderers: Mapping[str, Renderer]  # document kind -> how this format renders it
    # A document on stdout even when the run fails (monitoring reads it); the text format
    # says the failure in one line on stderr instead.
    machine: bool = True
    # `--warning/--critical` move the exit code (the Nagios plugin convention).
    thresholds: bool = False

    @property
    def kinds(self) -> frozenset[str]:
        return frozenset(self.renderers)

    def render(self, doc: Document, stream: TextIO, opts: RenderOptions = PLAIN) -> None:
        renderer = self.renderers.get(doc.kind)
        if renderer is None:
            raise UsageError(f"--format {self.name} cannot show a {doc.kind} document")
        renderer(doc, stream, opts)
