"""`python -m benchmarks calibrate`: the emulator measured against its configuration with
tools nobody here wrote (ping, iperf3), plus the window/RTT law with a fixed receive buffer.

Every row is one lab built for it and removed after. A failing row is re-run (up to
RETRIES times) because other work on the same two cores can disturb a single run; the table
says how many attempts a row took. Prints the table and writes it as Markdown.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from typing import IO, cast

from benchmarks import buffer_maxima, script_argv
from tcpwizard.context import Context
from tcpwizard.exitcodes import ExitCode
from tcpwizard.lab.lab import DELAYLINE_MAX_RATE_BPS, Lab
from tcpwizard.lab.netns import LabError
from tcpwizard.lab.spec import LabSpec
from tcpwizard.lab.tools import iperf3_tcp, iperf3_udp, ping, rtt_tolerance_s

RETRIES = 3
# Up to 256 MB per socket inside the lab hosts (tcp_rmem/tcp_wmem are per namespace): the
# receiver advertises about 0.62 of its buffer (docs/bench-calibrate.md, fixed receive
# window), so 10 Gbit/s x 100 ms = 125 MB in flight needs ~200 MB.
BIG_BUFFERS = buffer_maxima(268435456, 268435456)
# The high-rate grid: the delay line with GSO super-packets (lab/gso.py).
GRID_RATES = (1e9, 2e9, 5e9, 10e9)
GRID_RTTS = (0.010, 0.050, 0.100)
RUN_ID = uuid.uuid4().hex[:6]


@dataclass(frozen=True)
class Row:
    test: str
    configured: str
    measured: str
    reference: str
    ratio: float
    ok: bool | None  # None: information only
    attempts: int = 1
    note: str = ""

    @property
    def verdict(self) -> str:
        return "info" if self.ok is None else ("pass" if self.ok else "FAIL")


_count = 0


def _lab(spec: LabSpec, max_rate_bps: float = DELAYLINE_MAX_RATE_BPS) -> Lab:
    global _count
    _count += 1
    return Lab(spec.with_name(f"twb-{RUN_ID}-{_count}"), max_rate_bps=max_rate_bps)


def _mbit(bps: float) -> str:
    return f"{bps / 1e6:.2f} Mbit/s"


def _rate_name(bps: float) -> str:
    return f"{bps / 1e9:g} Gbit/s" if bps >= 1e9 else f"{bps / 1e6:g} Mbit/s"


def row_ping(rtt_s: float, rate_bps: float = 100e6) -> Row:
    with _lab(LabSpec.symmetric(rate_bps, rtt_s), max_rate_bps=rate_bps) as lab:
        count = 40 if rtt_s < 0.1 else 15
        result = ping(lab, "a", count=count, interval_s=0.02)
    tolerance = rtt_tolerance_s(rtt_s)
    return Row(
        test="ping min RTT",
        configured=f"{rtt_s * 1e3:g} ms"
        + (f" at {_rate_name(rate_bps)}" if rate_bps != 100e6 else ""),
        measured=f"{result.min_s * 1e3:.3f} ms",
        reference=f"{rtt_s * 1e3:g} ms ± {tolerance * 1e3:.2g} ms",
        ratio=result.min_s / rtt_s,
        ok=abs(result.min_s - rtt_s) <= tolerance,
    )


def row_rate(rate_bps: float, seconds: float, skip: int, rtt_s: float = 0.050) -> Row:
    spec = LabSpec.symmetric(rate_bps, rtt_s, sysctls_a=BIG_BUFFERS, sysctls_b=BIG_BUFFERS)
    with _lab(spec, max_rate_bps=max(rate_bps, DELAYLINE_MAX_RATE_BPS)) as lab:
        # -R: the client (b) receives, so its per-second intervals are receiver-side.
        result = iperf3_tcp(lab, "b", seconds=seconds, extra=("-R",))
        line = lab.stats()["forward"]
    measured = result.steady_bps(skip)
    seconds_bps = sorted(b * 8 / s for b, s in result.intervals[skip:] if s > 0)
    median = seconds_bps[len(seconds_bps) // 2] if seconds_bps else float("nan")
    segs = line["packets_in"] / line["super_packets"] if line.get("super_packets") else 1.0
    ratio = measured / rate_bps
    return Row(
        test=f"iperf3 TCP, {rtt_s * 1e3:g} ms, large buffers",
        configured=_mbit(rate_bps),
        measured=_mbit(measured),
        reference=f"≥ 93% of {_mbit(rate_bps)}",
        ratio=ratio,
        ok=0.93 <= ratio <= 1.0,
        note=(
            f"receiver, seconds {skip}-{seconds:g}; median second {median / rate_bps:.3f}; "
            f"{result.retransmits} retransmits; {segs:.1f} segments per read"
        ),
    )


def row_unshaped(seconds: float) -> Row:
    """The delay line's own limit: no shaping to speak of, 10 ms RTT, large buffers."""
    rate = 20e9
    spec = LabSpec.symmetric(rate, 0.010, sysctls_a=BIG_BUFFERS, sysctls_b=BIG_BUFFERS)
    with _lab(spec, max_rate_bps=rate) as lab:
        result = iperf3_tcp(lab, "b", seconds=seconds, extra=("-R",))
    measured = result.steady_bps(1)
    return Row(
        test="delay line ceiling (unshaped)",
        configured="20 Gbit/s, 10 ms",
        measured=_mbit(measured),
        reference=f"accepts ≤ {_mbit(DELAYLINE_MAX_RATE_BPS)}",
        ratio=measured / DELAYLINE_MAX_RATE_BPS,
        ok=None,
        note="the emulator's own limit; rates above the accepted maximum are refused",
    )


def _loss_row(test: str, configured: str, measured: float, loss: float, note: str) -> Row:
    """A measured loss share against the configured `loss`: within 20 % of it passes."""
    ratio = measured / loss
    return Row(
        test=test,
        configured=configured,
        measured=f"{measured * 100:.3f}%",
        reference=f"{loss * 100:g}% ± 20% rel.",
        ratio=ratio,
        ok=abs(ratio - 1) <= 0.20,
        note=note,
    )


def row_tcp_loss(loss: float, seconds: float, rate_bps: float = 10e9) -> Row:
    """Random loss on TCP super-packets, from the delay line's own counters: lost per
    segment (a super-packet with a lost segment is split), not per super-packet."""
    spec = LabSpec.symmetric(rate_bps, 0.010, loss=loss)
    with _lab(spec, max_rate_bps=rate_bps) as lab:
        before = lab.stats()["forward"]
        # Eight streams: at 1 % loss one stream moves ~15 Mbit/s (Mathis), too few segments.
        iperf3_tcp(lab, "a", seconds=seconds, extra=("-P", "8"))
        after = lab.stats()["forward"]
    d = {k: after[k] - before[k] for k in after}
    return _loss_row(
        "random loss (TCP super-packets)",
        f"{loss * 100:g}% at {_rate_name(rate_bps)}",
        d["lost"] / d["packets_in"],
        loss,
        f"{d['lost']} of {d['packets_in']} segments lost (delay line counters); "
        f"{d['packets_in'] / max(1, d['super_packets']):.1f} segments per read, "
        f"{d['split']} of {d['super_packets']} super-packets split",
    )


def row_window(seconds: float, rcvbuf: int = 65536, rtt_s: float = 0.050) -> Row:
    with _lab(LabSpec.symmetric(100e6, rtt_s)) as lab:
        base = script_argv("windowtest")
        recv = lab.popen(
            "b",
            [*base, "recv", "--bind", lab.addr_b, "--rcvbuf", str(rcvbuf), "--seconds",
             f"{seconds:g}", "--warmup", "1.5"],
            stdout=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        try:
            out = cast(IO[str], recv.stdout)  # PIPE was requested just above
            if out.readline().strip() != "listening":
                raise LabError("window test receiver did not start")
            sent = lab.run(
                "a",
                [*base, "send", "--to", lab.addr_b, "--seconds", f"{seconds:g}"],
                capture_output=True, text=True, check=True, timeout=seconds + 40,
            )  # fmt: skip
            got = json.loads(out.read())
        finally:
            recv.wait(timeout=40)
            if recv.stdout is not None:
                recv.stdout.close()
    window = int(json.loads(sent.stdout)["max_snd_wnd"])
    reference = window * 8 / rtt_s
    measured = float(got["steady_bps"])
    ratio = measured / reference
    return Row(
        test="fixed receive window",
        configured=f"SO_RCVBUF {rcvbuf // 1024} KiB, {rtt_s * 1e3:g} ms",
        measured=_mbit(measured),
        reference=f"{window} B / {rtt_s * 1e3:g} ms = {_mbit(reference)}",
        ratio=ratio,
        ok=abs(ratio - 1) <= 0.10,
        note=(
            f"granted {got['rcvbuf_granted']} B = 2 x SO_RCVBUF; advertised window "
            f"{window} B = {window / got['rcvbuf_granted']:.3f} x granted "
            "(tcpi_snd_wnd at the sender)"
        ),
    )


def row_loss(loss: float, seconds: float) -> Row:
    with _lab(LabSpec.symmetric(100e6, 0.010, loss=loss)) as lab:
        result = iperf3_udp(lab, "a", rate_bps=50e6, seconds=seconds, length=1000)
    return _loss_row(
        "random loss (iperf3 UDP)",
        f"{loss * 100:g}%",
        result.loss,
        loss,
        f"{result.lost} of {result.sent} datagrams lost",
    )


def _once(make: Callable[[], Row]) -> Row:
    try:
        return make()
    except (LabError, subprocess.SubprocessError, ValueError, KeyError) as exc:
        return Row("error", "", "", "", float("nan"), False, note=str(exc)[:120])


def _attempt(make: Callable[[], Row], progress: Callable[[str], None]) -> Row:
    attempt = 0
    while True:
        attempt += 1
        row = replace(_once(make), attempts=attempt)
        progress(f"  {row.test} {row.configured}: {row.measured} ({row.verdict})")
        if row.ok is not False or attempt >= RETRIES:
            return row


def plan(quick: bool) -> list[Callable[[], Row]]:
    secs = 6.0 if quick else 10.0
    rows: list[Callable[[], Row]] = [
        partial(row_ping, r) for r in (0.001, 0.010, 0.050, 0.100, 0.200)
    ]
    rows += [partial(row_rate, r, secs, 2) for r in (10e6, 50e6, 100e6)]
    # Above 1 Gbit/s slow start and the recovery from its overshoot take seconds at 50-100
    # ms (Cubic regains a halved 10 Gbit/s x 50 ms window over ~25 s without a queue): the
    # steady rate is read after 5 of 15 seconds.
    for rate in GRID_RATES:
        for rtt in GRID_RTTS:
            rows.append(partial(row_ping, rtt, rate))
            fast = rate > 1e9
            rows.append(partial(row_rate, rate, 15.0 if fast else secs, 5 if fast else 3, rtt))
    rows.append(partial(row_unshaped, 6.0))
    rows.append(partial(row_tcp_loss, 0.01, 4.0))
    rows.append(partial(row_window, 8.0))
    rows.append(partial(row_loss, 0.01, 4.0 if quick else 8.0))
    return rows


NOTES = """\
How to read it:

- **ping**: minimum of 15-40 echoes; the delay line adds about 0.1 ms per round trip (two
  wakeups of the emulator; 0.24-0.27 ms on a slower VM), inside the max(0.3 ms, 2 %)
  tolerance (lab/tools.py rtt_tolerance_s).
- **iperf3 TCP**: goodput measured at the receiver (`iperf3 -R`), after slow start, with
  `tcp_rmem`/`tcp_wmem` up to 256 MB inside the lab hosts (per namespace; nothing global is
  changed). The delay line counts IP bytes, so goodput tops out at 1448/1500 = 96.5 % of the
  rate (52 bytes of IP + TCP headers with timestamps per 1500-byte packet); the 93 % bound
  is 96.3 % of that ceiling. "median second" is the middle one-second goodput: Cubic at
  50-100 ms overshoots the 1-BDP drop-tail queue now and then and loses a second to the
  recovery (packet by packet too: 1 Gbit/s x 100 ms read 303 Mbit/s in one second), which
  the mean over 10 seconds carries and the median does not.
- **above 1 Gbit/s** the delay line moves the kernel's TCP super-packets whole ("segments
  per read"; docs/lab.md): 1 Gbit/s and below it reads one packet at a time as before. Each
  rate's ping row is an idle lab at that rate.
- **ceiling**: the same transfer with no real shaping shows what the emulator itself carries
  on this machine; `lab up` refuses delay-line rates above the accepted maximum, set from
  the grid's rows that pass with other work on the cores.
- **random loss (TCP super-packets)**: 1 % per direction at 10 Gbit/s x 10 ms, eight iperf3
  streams a->b, read from the delay line's counters: the loss is drawn per segment, and a
  super-packet with a lost segment is split so only that segment is dropped.
- **fixed receive window**: the receiver sets `SO_RCVBUF = 65536` before `listen()`. Linux
  doubles the request (`sk_rcvbuf` = 131072, room for sk_buff overhead) and advertises
  window = sk_rcvbuf x scaling_ratio, where scaling_ratio = skb->len / skb->truesize of the
  received segments (Linux >= 6.6; older kernels used 1 - 2^-tcp_adv_win_scale = 1/2). Here
  1448-byte segments sit in ~2360-byte buffers: 0.614 x 131072 = 80,480 B, read back as
  `tcpi_snd_wnd` at the sender. Throughput = window / RTT = 80,480 x 8 / 0.050 s = 12.9
  Mbit/s; the naive 65,536 B / RTT = 10.5 Mbit/s would be 18 % low.
- **loss**: iperf3 UDP, 50 Mbit/s of 1000-byte datagrams a->b; the lab drops 1 % per
  direction at random (before the queue, like netem).
"""


def markdown(rows: list[Row], header: list[str]) -> str:
    lines = [*header, ""]
    lines.append("| test | configured | measured | reference | ratio | result | runs | notes |")
    lines.append("|---|---|---|---|---:|---|---:|---|")
    for r in rows:
        lines.append(
            f"| {r.test} | {r.configured} | {r.measured} | {r.reference} | {r.ratio:.3f} "
            f"| {r.verdict} | {r.attempts} | {r.note} |"
        )
    return "\n".join(lines) + "\n\n" + NOTES


def text_table(rows: list[Row]) -> str:
    cols = [("test", 33), ("configured", 24), ("measured", 15), ("reference", 32), ("ratio", 6)]
    out = ["  ".join(name.ljust(w) for name, w in cols) + "  result"]
    for r in rows:
        cells = [r.test, r.configured, r.measured, r.reference, f"{r.ratio:.3f}"]
        out.append("  ".join(c.ljust(w) for c, (_, w) in zip(cells, cols, strict=True))
                   + f"  {r.verdict}")  # fmt: skip
    return "\n".join(out)


def run_calibrate(quick: bool, out_dir: str, ctx: Context) -> int:
    load = os.getloadavg()[0]
    cpus = os.cpu_count() or 1
    if load > 0.5 * cpus:
        ctx.progress(f"warning: load average {load:.2f} on {cpus} CPUs; results may be disturbed")
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    ctx.progress("calibrating the lab (about 10 minutes)...")
    rows = [_attempt(make, ctx.progress) for make in plan(quick)]
    iperf = subprocess.run(["iperf3", "--version"], capture_output=True, text=True, check=False)
    header = [
        "# Lab calibration (`python -m benchmarks calibrate`)",
        "",
        f"{started}; kernel {platform.release()}, {cpus} CPUs, load average {load:.2f} at "
        f"start; backend delayline; {iperf.stdout.splitlines()[0] if iperf.stdout else 'iperf3'}"
        f"{'; --quick' if quick else ''}.",
    ]
    print(text_table(rows), file=ctx.stdout)
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "bench-calibrate.md")
    with open(path, "w") as f:
        f.write(markdown(rows, header))
    ctx.progress(f"wrote {path}")
    failed = [r for r in rows if r.ok is False]
    return int(ExitCode.WARNING if failed else ExitCode.OK)
