"""The vocabularies, limits and defaults every layer shares, in one place: transfer modes,
the far ends' default ports, the streams a transfer may use, which modes run and how long
the tests take by default. The CLI, the pipeline, serve and the far-end clients read them
from here."""

from __future__ import annotations

from typing import get_args

from tcpwizard.measure.model import Mode

# Every transfer mode, in the order the tables and the CLI list them.
MODES: tuple[Mode, ...] = get_args(Mode)
SERVE_PORT = 5301  # tcpwizard serve: control, probes and transfers on one port
IPERF3_PORT = 5201  # iperf3's default
MIN_STREAMS = 1
# Parallel streams of one test transfer. The papers measured 1-8; a 100G data-transfer node
# needs more (one flow cannot fill 100 Gbit/s on one core), and 16 is also where the advice
# stops counting streams (advice/streams.py). Each stream is its own thread on both ends.
MAX_STREAMS = 16

# -- the tests' defaults: which modes, how long ----------------------------------------------
# The modes that answer "why slow, how fast could it be" fastest: what a stock application
# gets (untuned 64 KB), what an autotuning one gets, and a tuned one (DRS) for the gap.
DEFAULT_MODES: tuple[Mode, ...] = ("untuned", "autotune", "drs")
# check --quick measures only what applications get; a tuned mode needs a few seconds on a
# long path to mean anything, so the quick gap is predicted from the window law instead.
QUICK_MODES: tuple[Mode, ...] = ("autotune",)
# Without --direction, check measures both ways: every mode from here to the far end, and
# autotune back, which is enough to catch a limit only the way back has (this host's
# receive window, the far end's send buffer) for a few seconds more.
REVERSE_MODES: tuple[Mode, ...] = ("autotune",)
# Without --duration/--bytes each transfer of check ends once its rate is steady
# (measure/engine/steady.py); these are the caps, reached only by a path still ramping up.
STEADY_CAP_S = 5.0
QUICK_DURATION_S = 1.5  # check --quick, whether its transfers can end early or not
# A transfer that cannot end early runs this long: `transfer` without --duration, and
# check against a far end other than serve (iperf3).
FIXED_DURATION_S = 3.0
TRY_STREAMS_DURATION_S = 5.0  # check --try-streams: N streams beside the one stream
MIN_DURATION_S, MAX_DURATION_S = 0.2, 60.0  # what --duration accepts
# A byte-limited transfer has no length: this side gives up on it after this long (serve's
# --max-duration bounds it on the far side).
BYTE_LIMITED_MAX_S = 300.0
# Time budgets of the path probe (RTT, capacity): probe and check, check --quick, and the
# short probe `transfer` makes for the static mode's BDP.
PROBE_BUDGET_S = 3.0
QUICK_PROBE_BUDGET_S = 1.0
STATIC_PROBE_BUDGET_S = 2.0
MIN_PROBE_BUDGET_S, MAX_PROBE_BUDGET_S = 0.5, 60.0  # what --budget accepts
