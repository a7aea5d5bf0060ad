"""The vocabularies and limits every layer shares, in one place: transfer modes, the far
ends' default ports, the streams a transfer may use. The CLI, the pipeline, serve and the
far-end clients read them from here."""

from __future__ import annotations

from typing import get_args

from tcpwizard.measure.model import Mode

# Every transfer mode, in the order the tables and the CLI list them.
MODES: tuple[Mode, ...] = get_args(Mode)
SERVE_PORT = 5301  # tcpwizard serve: control, probes and transfers on one port
IPERF3_PORT = 5201  # iperf3's default
MIN_STREAMS = 1
MAX_STREAMS = 8  # parallel streams of one test transfer (1-8, as the papers measured)
