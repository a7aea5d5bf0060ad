"""The scenario matrix's drawing and its truth: what `python -m benchmarks matrix` builds, and
the verdict the physics of that scenario calls for, derived without asking the tool.

Drawing. Scenario `SEED.INDEX` is drawn from its own generator (`random.Random` seeded with
the id's text), so any scenario can be drawn again from its id alone (`--replay`). The
envelope, per scenario: bottleneck rate log-uniform over 5 Mbit/s - 5 Gbit/s (the delay line's
ceiling, DELAYLINE_MAX_RATE_BPS: it refuses more; above 1 Gbit/s it moves the kernel's
super-packets whole, docs/lab.md); RTT log-uniform 2-400 ms; drop-tail queue
log-uniform 0.25-8 BDP (at least MIN_QUEUE_PACKETS packets); random loss 0 (half the draws)
or uniform 0-2 %; IPv4 or IPv6 (IPV6_SHARE, from a generator of its own, so the envelope and
cause of an id drawn before stay as they were); congestion control per host, Reno or BBR (the
loss-based and the model-based sender; then, once the envelope is drawn and from a
generator of its own, half the Reno hosts of the causes that do not name Reno run CUBIC,
most distributions' default (CUBIC_SHARE), where that leaves the truth as it was); and one
cause, uniformly, from ALL_CAUSES with its own parameters:

- small-rmem-a / -b: the receiver's tcp_rmem max set so its window is g = 1/8 - 1/4 of the
  BDP. The receive window the kernel offers from a buffer of r bytes is about r / 2 with the
  default tcp_adv_win_scale 1 (newer kernels scale by the measured payload/truesize ratio,
  which the lab sees between ~0.5 and ~0.8): the window law gives a rate of window / RTT, and
  RMEM_WINDOW bounds it at [0.45, 0.85] x r. With r = 2 g BDP the rate is at most
  0.85 x 2 x 1/4 = 0.43 of the line: the buffer binds.
- small-wmem-a / -b: the sender's tcp_wmem max = g BDP; its data in flight is about the
  buffer (WMEM_FLIGHT [0.5, 1.0] x w, skb overhead) plus up to one TSO segment: the kernel
  checks the buffer before it starts a new skb and then fills it to the size goal
  (SEND_OVERSHOOT, 64 KB). So it binds only where w + 64 KB is at most half the BDP.
- wscale-off-a / -b: net.ipv4.tcp_window_scaling 0 on one host: neither end scales, every
  window <= 65535 B. Binds when 64 KB / RTT is at most half the line (BDP >= 128 KB).
- loss-reno: the sender (a) runs Reno over 0.2-2 % random loss (b runs BBR, so only a's
  sending is held): Mathis et al.'s bound MSS / RTT x sqrt(1.5 / p) at most half the line.
- policer: a token bucket at 10-40 % of the line rate (LinkSpec.policer_bps).
- bufferbloat: both hosts Reno, a drop-tail queue of 4-8 BDP, no loss. A Reno window through
  a buffer of B BDPs swings between (1 + B)/2 and 1 + B BDPs, so the standing queue's median
  is about (3B - 1)/4 BDPs: at B >= 3 the loaded RTT is at least three times the idle one
  (BLOAT_MEDIAN_BDPS; CUBIC's window swings from 0.7 (1 + B), standing_queue_bdps), and the
  queue adds at least BLOAT_MIN_MS. The queue must fill within
  the check's transfer: slow start takes log2(BDP / initial window) rounds, then the queue
  grows at the line rate (B x RTT), within FILL_BUDGET_S.
- middlebox: a device on the wire strips the window-scale option from both handshake
  packets: every window <= 65535 B, so it binds where wscale-off does.
- cross-udp: iperf3 UDP a -> b at 50-80 % of the line, the line drawn up to 300 Mbit/s
  (CROSS_UDP_MAX_BPS: iperf3's UDP pair beside the delay line on 2 cores): the check's
  upload keeps the rest.
- cross-tcp: 2-4 iperf3 TCP flows a -> b: the check's flow gets about 1 / (N + 1) of the
  line (one flow beside it would leave half, on the edge of binding).
- one way: a third of the policer, cross-udp and cross-tcp draws act on b -> a alone
  (WAY_BACK_SHARE, from a generator of its own after the cause and envelope are drawn, so
  every id keeps both): the bucket on the way back only, or the cross traffic sent b -> a
  (iperf3 -R). The upload then has the line and the download the cause's limit.
- cpu-starved-b: b's serve in a cgroup held to 0.5 % of one core (STARVED_SHARE): it moves
  at most ~31 Mbit/s either way (STARVED_MAX_BPS, measured), so the line is drawn from
  100 Mbit/s up.
- healthy: nothing else; both hosts' buffers tuned (below).

Every host gets tuned buffers first (TUNED: 4 x (BDP + queue), at least the kernel's 4 MB
and at most 128 MB), so on a healthy draw neither window binds; a cause then overrides one.

Truth. `truth()` computes each direction's rate limits from the scenario (window law with the
  bounds above, Mathis for a loss-based sender — for CUBIC the larger of it and CUBIC's own
response function (RFC 8312 section 5.1) —, the policer, the cross traffic's share, a
loss-based sawtooth's utilisation through a shallow buffer) as an interval [lo, hi] of the
line's goodput. A limit
binds when hi <= BINDS (half the line); none binds when every lo >= FREE (0.9): then the
truth is `path-capacity` (no host), or `bufferbloat` (path) when a loss-based sender fills a
queue as above. A BBR sender queues up to BBR_QUEUE_BDPS (its cwnd gain and startup
overshoot, measured at ~2 BDP): more than 1 BDP of that is on the edge, so ambiguous.
Anything between, two binding limits that name different causes, or a bloated queue beside
another binding limit, is `ambiguous`: the drawing redraws the envelope (up to
MAX_DRAWS times, all from the scenario's own generator) until the truth is the drawn cause's,
so every scenario the matrix runs has one cause that really binds.
"""

from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass, replace

from tcpwizard.lab.lab import DELAYLINE_MAX_RATE_BPS
from tcpwizard.lab.spec import MIN_QUEUE_PACKETS, LabSpec, MiddleboxSpec

MTU = 1500
MSS = MTU - 52  # IPv4 + TCP with timestamps: the goodput share 1448/1500 (docs/lab.md)
GOODPUT = MSS / MTU
RATE_MIN_BPS, RATE_MAX_BPS = 5e6, DELAYLINE_MAX_RATE_BPS
RTT_MIN_S, RTT_MAX_S = 0.002, 0.400
QUEUE_MIN_BDPS, QUEUE_MAX_BDPS = 0.25, 8.0
LOSS_MAX = 0.02
CCS = ("reno", "bbr")
LOSS_BASED = frozenset({"reno", "cubic"})
# The share of a loss-based window kept at a loss: RFC 5681's 1/2 for Reno, RFC 8312's
# beta_cubic 0.7 for CUBIC (Linux: 717/1024).
BETA = {"reno": 0.5, "cubic": 717 / 1024}
# RFC 8312 section 5.1: CUBIC's average window (C (3 + b) / (4 (1 - b)))^(1/4) (RTT / p)^(3/4)
# segments, C = 0.4, b = 0.7.
CUBIC_C = 0.4
# Half of the Reno hosts become CUBIC (from a generator of their own: every id keeps the
# envelope and cause it was drawn with), except where the cause names Reno.
CUBIC_SHARE = 0.5
RENO_CAUSES = frozenset({"loss-reno", "bufferbloat"})

# Kernel defaults and the tuned buffers every host starts from.
DEFAULT_RMEM = (4096, 131072)  # tcp_rmem min, default
DEFAULT_WMEM = (4096, 16384)
TUNED_MIN, TUNED_MAX = 4 << 20, 128 << 20
TUNED_BDPS = 4.0  # of (BDP + queue): a Reno window through a full queue, with slack
# A buffer cause never goes below this: ~11 segments, so the window is a window and not a
# handful of packets stalled by delayed ACKs.
BUFFER_FLOOR = 16384
UNSCALED_WINDOW = 65535
# Window bounds as fractions of the buffer (see the module docstring).
RMEM_WINDOW = (0.45, 0.85)
WMEM_FLIGHT = (0.5, 1.0)
# One GSO skb (gso_max_size) beyond the send buffer: measured, a 16 KB tcp_wmem max carried
# ~31 KB in flight (36.9 Mbit/s at 6.8 ms, scenario 890509536.13).
SEND_OVERSHOOT = 65536
UNSCALED = (0.8, 1.0)  # of 65535 B: the receiver may advertise a little less than the cap

BINDS = 0.5  # a limit at most half the line's goodput binds
FREE = 0.9  # every limit at least 90 % of it: nothing but the path holds the transfer
# Reno through a queue of B < 1 BDP cannot keep the line busy (its window drops below the
# BDP after each halving): utilisation 1 - (1 - W/2)^2 / W with W = 1 + B (reno_utilisation).
# The median standing queue (standing_queue_bdps) of a bloated buffer: the loaded RTT at
# least 3 x idle (Reno: B >= 3); of a clean one: at most the classic buffer's 1 BDP (Reno:
# B <= 5/3).
BLOAT_MEDIAN_BDPS = 2.0
CLEAN_MEDIAN_BDPS = 1.0
BLOAT_MIN_MS = 20.0  # the standing queue adds at least this much delay
CLEAN_MAX_MS = 5.0
# BBR (v1, this kernel's) keeps inflight at up to cwnd_gain 2 x BDP, so up to 1 BDP queued
# in ProbeBW, and its startup (pacing gain 2/ln 2) overshoots further: a healthy BBR flow
# through a 3 BDP buffer was measured holding ~2 BDP of queue in the second half of check's
# transfer (scenario 728403270.13: 206 ms of queue at 104 ms RTT). A BBR queue of 1-2 BDP is
# neither clean nor the >= 2 BDP median of a bloated Reno queue: between.
BBR_QUEUE_BDPS = 2.0
INITIAL_WINDOW = 10 * MSS
FILL_BUDGET_S = 1.5  # half of check's 3 s transfer (measure/wire/spec.py FIXED_DURATION_S)
CROSS_UDP_MAX_BPS = 300e6  # iperf3's UDP pair beside the delay line on 2 cores
MAX_DRAWS = 2000
# A far end held to 0.5 % of a core (a cgroup quota over 1 s periods, lab/hostload.py): it
# reads or writes only in its few milliseconds per period, so a transfer moves at most about
# a buffer per period whatever the line. Measured at 50 and 100 Mbit/s x 20 and 50 ms
# (docs/bench-host.md): 0.2-31 Mbit/s. Drawn from 100 Mbit/s up, where that binds.
STARVED_SHARE = 0.005
STARVED_MAX_BPS = 31e6
STARVED_RATE_MIN_BPS = 100e6

CAUSES = (
    "healthy",
    "small-rmem-a",
    "small-rmem-b",
    "small-wmem-a",
    "small-wmem-b",
    "wscale-off-a",
    "wscale-off-b",
    "loss-reno",
    "policer",
    "bufferbloat",
    "middlebox",
    "cross-udp",
    "cross-tcp",
)
# Causes added later are drawn from a generator of their own (_cause), so every id drawn
# before they came keeps its scenario (and its `--replay`) unless it now draws a new cause.
LATER_CAUSES = ("cpu-starved-b",)
# Half the scenarios run over IPv6 (the lab gives both hosts both families).
IPV6_SHARE = 0.5
# The causes on the path that can act one way, and the share of their draws that do (on
# b -> a alone): a third, so the matrix keeps two thirds of them as every run before drew
# them and still meets a one-way cause every ~15 scenarios.
ONE_WAY_CAUSES = frozenset({"policer", "cross-udp", "cross-tcp"})
WAY_BACK_SHARE = 1 / 3
ALL_CAUSES = CAUSES + LATER_CAUSES

# What each cause's verdict must be: (limiting_factor, host_to_fix).
EXPECTED: dict[str, tuple[str, str | None]] = {
    "healthy": ("path-capacity", None),
    "small-rmem-a": ("receiver-window", "local"),
    "small-rmem-b": ("receiver-window", "peer"),
    "small-wmem-a": ("sender-buffer", "local"),
    "small-wmem-b": ("sender-buffer", "peer"),
    "wscale-off-a": ("window-scaling", "local"),
    "wscale-off-b": ("window-scaling", "peer"),
    "loss-reno": ("congestion", "local"),
    "policer": ("policer", "path"),
    "bufferbloat": ("bufferbloat", "path"),
    "middlebox": ("middlebox", "path"),
    "cross-udp": ("cross-traffic", None),
    "cross-tcp": ("cross-traffic", None),
    "cpu-starved-b": ("host-cpu", "peer"),
}
AMBIGUOUS = "ambiguous"

_ID_RE = re.compile(r"(\d{1,19})\.(\d{1,6})")


@dataclass(frozen=True)
class Scenario:
    seed: int
    index: int
    cause: str
    rate_bps: float
    rtt_s: float
    queue_bdps: float
    loss: float
    cc_a: str
    cc_b: str
    rmem_a: int = TUNED_MIN
    rmem_b: int = TUNED_MIN
    wmem_a: int = TUNED_MIN
    wmem_b: int = TUNED_MIN
    wscale_a: bool = True
    wscale_b: bool = True
    policer_bps: float | None = None
    strip_wscale: bool = False
    cross_udp_bps: float = 0.0
    cross_tcp_flows: int = 0
    cpu_share_b: float | None = None  # b's serve held to this share of a core
    ipv6: bool = False  # the check runs over the lab's IPv6 addresses
    way_back: bool = False  # the cause (policer, cross traffic) acts on b -> a alone
    draws: int = 1  # envelopes drawn until the cause bound (1: the first did)

    @property
    def id(self) -> str:
        return scenario_id(self.seed, self.index)

    @property
    def bdp_bytes(self) -> float:
        return self.rate_bps * self.rtt_s / 8

    @property
    def queue_bytes(self) -> int:
        return max(round(self.queue_bdps * self.bdp_bytes), MIN_QUEUE_PACKETS * MTU)

    def spec(self) -> LabSpec:
        spec = LabSpec.symmetric(
            self.rate_bps,
            self.rtt_s,
            loss=self.loss,
            queue_bytes=self.queue_bytes,
            mtu=MTU,
            sysctls_a=_sysctls(self.cc_a, self.rmem_a, self.wmem_a, self.wscale_a),
            sysctls_b=_sysctls(self.cc_b, self.rmem_b, self.wmem_b, self.wscale_b),
            policer_bps=self.policer_bps,
            middlebox=MiddleboxSpec(("window",)) if self.strip_wscale else None,
        )
        if self.way_back:
            spec = replace(spec, forward=replace(spec.forward, policer_bps=None))
        return spec

    def cross_on(self, up: bool) -> bool:
        """The cross traffic runs that way (up: a -> b, as always but for way_back)."""
        return up != self.way_back

    def policed_on(self, up: bool) -> bool:
        """The policer, if any, acts that way (both ways but for way_back's b -> a alone)."""
        return self.policer_bps is not None and not (up and self.way_back)

    def describe(self) -> str:
        extra = {
            "small-rmem-a": f"a tcp_rmem max {_kb(self.rmem_a)}",
            "small-rmem-b": f"b tcp_rmem max {_kb(self.rmem_b)}",
            "small-wmem-a": f"a tcp_wmem max {_kb(self.wmem_a)}",
            "small-wmem-b": f"b tcp_wmem max {_kb(self.wmem_b)}",
            "policer": f"policer {(self.policer_bps or 0) / 1e6:.3g} Mbit/s",
            "cross-udp": f"UDP {self.cross_udp_bps / 1e6:.3g} Mbit/s",
            "cross-tcp": f"{self.cross_tcp_flows} TCP flows",
            "cpu-starved-b": f"b's serve at {(self.cpu_share_b or 0):.1%} of a core",
        }.get(self.cause, "")
        loss = f", loss {self.loss:.2%}" if self.loss else ""
        return (
            f"{self.rate_bps / 1e6:.3g} Mbit/s x {self.rtt_s * 1e3:.3g} ms, queue "
            f"{self.queue_bytes / self.bdp_bytes:.2g} BDP{loss}, {self.cc_a}/{self.cc_b}"
            + (", IPv6" if self.ipv6 else "")
            + (f"; {extra}" if extra else "")
            + (", b -> a only" if self.way_back else "")
        )


def _kb(n: int) -> str:
    return f"{n / 1024:.0f} KB"


def _sysctls(cc: str, rmem: int, wmem: int, wscale: bool) -> tuple[tuple[str, str], ...]:
    out = [
        ("net.ipv4.tcp_congestion_control", cc),
        ("net.ipv4.tcp_rmem", f"{DEFAULT_RMEM[0]} {min(DEFAULT_RMEM[1], rmem)} {rmem}"),
        ("net.ipv4.tcp_wmem", f"{DEFAULT_WMEM[0]} {min(DEFAULT_WMEM[1], wmem)} {wmem}"),
    ]
    if not wscale:
        out.append(("net.ipv4.tcp_window_scaling", "0"))
    return tuple(out)


def scenario_id(seed: int, index: int) -> str:
    return f"{seed}.{index}"


def parse_id(text: str) -> tuple[int, int]:
    """'SEED.INDEX' -> (seed, index); ValueError with a one-line reason otherwise."""
    m = _ID_RE.fullmatch(text.strip())
    if not m:
        raise ValueError(f"scenario id {text!r}: use SEED.INDEX, e.g. 1234.7")
    return int(m.group(1)), int(m.group(2))


def _log_uniform(rng: random.Random, lo: float, hi: float) -> float:
    return math.exp(rng.uniform(math.log(lo), math.log(hi)))


def tuned_buffer(bdp_bytes: float, queue_bytes: float) -> int:
    return int(min(TUNED_MAX, max(TUNED_MIN, TUNED_BDPS * (bdp_bytes + queue_bytes))))


def _envelope(rng: random.Random, seed: int, index: int, cause: str) -> Scenario:
    rate = _log_uniform(rng, RATE_MIN_BPS, RATE_MAX_BPS)
    rtt = _log_uniform(rng, RTT_MIN_S, RTT_MAX_S)
    queue = _log_uniform(rng, QUEUE_MIN_BDPS, QUEUE_MAX_BDPS)
    loss = 0.0 if rng.random() < 0.5 else rng.uniform(0.0, LOSS_MAX)
    cc_a, cc_b = rng.choice(CCS), rng.choice(CCS)
    s = Scenario(seed, index, cause, rate, rtt, queue, loss, cc_a, cc_b)
    tuned = tuned_buffer(s.bdp_bytes, s.queue_bytes)
    s = replace(s, rmem_a=tuned, rmem_b=tuned, wmem_a=tuned, wmem_b=tuned)
    g = rng.uniform(1 / 8, 1 / 4)  # the binding window as a share of the BDP
    rmem = max(BUFFER_FLOOR, round(2 * g * s.bdp_bytes))
    wmem = max(BUFFER_FLOOR, round(g * s.bdp_bytes))
    if cause == "small-rmem-a":
        s = replace(s, rmem_a=rmem)
    elif cause == "small-rmem-b":
        s = replace(s, rmem_b=rmem)
    elif cause == "small-wmem-a":
        s = replace(s, wmem_a=wmem)
    elif cause == "small-wmem-b":
        s = replace(s, wmem_b=wmem)
    elif cause == "wscale-off-a":
        s = replace(s, wscale_a=False)
    elif cause == "wscale-off-b":
        s = replace(s, wscale_b=False)
    elif cause == "loss-reno":
        s = replace(s, cc_a="reno", cc_b="bbr", loss=_log_uniform(rng, 0.002, LOSS_MAX))
    elif cause == "policer":
        s = replace(s, policer_bps=rate * rng.uniform(0.10, 0.40))
    elif cause == "bufferbloat":
        s = replace(s, cc_a="reno", cc_b="reno", loss=0.0, queue_bdps=rng.uniform(4.0, 8.0))
        tuned = tuned_buffer(s.bdp_bytes, s.queue_bytes)
        s = replace(s, rmem_a=tuned, rmem_b=tuned, wmem_a=tuned, wmem_b=tuned)
    elif cause == "middlebox":
        s = replace(s, strip_wscale=True)
    elif cause == "cross-udp":
        rate = _log_uniform(rng, RATE_MIN_BPS, CROSS_UDP_MAX_BPS)
        s = replace(s, rate_bps=rate, cross_udp_bps=rate * rng.uniform(0.50, 0.80))
        tuned = tuned_buffer(s.bdp_bytes, s.queue_bytes)
        s = replace(s, rmem_a=tuned, rmem_b=tuned, wmem_a=tuned, wmem_b=tuned)
    elif cause == "cross-tcp":
        s = replace(s, cross_tcp_flows=rng.randint(2, 4))
    elif cause == "cpu-starved-b":
        rate = _log_uniform(rng, STARVED_RATE_MIN_BPS, RATE_MAX_BPS)
        s = replace(s, rate_bps=rate, cpu_share_b=STARVED_SHARE)
        tuned = tuned_buffer(s.bdp_bytes, s.queue_bytes)
        s = replace(s, rmem_a=tuned, rmem_b=tuned, wmem_a=tuned, wmem_b=tuned)
    return s


def _cause(rng: random.Random, seed: int, index: int) -> str:
    """Uniform over ALL_CAUSES: the first causes as they were always drawn, then, with the
    later causes' share, one of those instead (from its own generator)."""
    cause = rng.choice(CAUSES)
    later = random.Random(f"tcpwizard-matrix-later:{seed}:{index}")
    if later.random() < len(LATER_CAUSES) / len(ALL_CAUSES):
        return later.choice(LATER_CAUSES)
    return cause


def _way_back(s: Scenario) -> Scenario:
    """A one-way cause acts on b -> a alone with WAY_BACK_SHARE, from a generator of its own
    (the cause and envelope of every id stay as they were drawn before), where the truth
    stays the cause's."""
    if s.cause not in ONE_WAY_CAUSES:
        return s
    if random.Random(f"tcpwizard-matrix-way-back:{s.seed}:{s.index}").random() >= WAY_BACK_SHARE:
        return s
    back = replace(s, way_back=True)
    return back if truth(back) == truth(s) else s


def _ipv6(seed: int, index: int) -> bool:
    """The address family, from a generator of its own: the envelope and the cause of every
    id stay what they were drawn as before the family was."""
    return random.Random(f"tcpwizard-matrix-family:{seed}:{index}").random() < IPV6_SHARE


def _with_cubic(s: Scenario) -> Scenario:
    """Each Reno host of a cause that does not name Reno runs CUBIC with CUBIC_SHARE, from a
    generator of its own and after the envelope is drawn, where the truth stays the cause's
    (CUBIC's larger window can lift a loss bound out of binding): every id keeps the
    envelope and cause it was drawn with before CUBIC was."""
    if s.cause in RENO_CAUSES:
        return s
    pick = random.Random(f"tcpwizard-matrix-cubic:{s.seed}:{s.index}")
    a = "cubic" if s.cc_a == "reno" and pick.random() < CUBIC_SHARE else s.cc_a
    b = "cubic" if s.cc_b == "reno" and pick.random() < CUBIC_SHARE else s.cc_b
    cubic = replace(s, cc_a=a, cc_b=b)
    return cubic if truth(cubic) == truth(s) else s


def draw(seed: int, index: int) -> Scenario:
    """Scenario SEED.INDEX: its cause, then envelopes until that cause binds (module doc)."""
    rng = random.Random(f"tcpwizard-matrix:{seed}:{index}")
    cause = _cause(rng, seed, index)
    ipv6 = _ipv6(seed, index)
    s = _envelope(rng, seed, index, cause)
    for n in range(1, MAX_DRAWS + 1):
        if truth(s) == EXPECTED[cause]:
            return _way_back(_with_cubic(replace(s, draws=n, ipv6=ipv6)))
        s = _envelope(rng, seed, index, cause)
    return replace(s, draws=MAX_DRAWS, ipv6=ipv6)  # truth() says what it is (scored so)


def draw_all(seed: int, first: int, count: int) -> list[Scenario]:
    return [draw(seed, i) for i in range(first, first + count)]


@dataclass(frozen=True)
class Limit:
    """A rate limit as [lo, hi] shares of the line's goodput, and what it is."""

    lo: float
    hi: float
    factor: str
    host: str | None


def reno_utilisation(queue_bdps: float, beta: float = 0.5) -> float:
    """Average share of the line a loss-based flow keeps busy through a drop-tail queue of B
    BDPs: its window W = 1 + B at a loss falls to beta x W (Reno 1/2); below 1 BDP it sends
    W per RTT, above it the line is full. Linear growth: the share of a cycle below 1 BDP is
    (1 - beta W) / ((1 - beta) W), at an average window (beta W + 1) / 2. CUBIC's growth is
    concave after the cut (fast, then flat near the last maximum): linear growth is its
    least share."""
    w = 1.0 + queue_bdps
    if beta * w >= 1.0:
        return 1.0
    below = (1.0 - beta * w) / ((1.0 - beta) * w)
    return below * (beta * w + 1.0) / 2 + (1.0 - below)


def cubic_segments(rtt_s: float, loss: float) -> float:
    """CUBIC's average window at random loss `loss` (RFC 8312 section 5.1), in segments."""
    b = BETA["cubic"]
    return float((CUBIC_C * (3 + b) / (4 * (1 - b))) ** 0.25 * (rtt_s / loss) ** 0.75)


def _window_limits(s: Scenario, receiver: str, sender: str) -> list[Limit]:
    """The window law for one direction: window / RTT against the line's goodput."""
    line_bytes_s = s.rate_bps * GOODPUT / 8
    per_s = 1.0 / (s.rtt_s * line_bytes_s)  # a window of N bytes gives N x per_s of the line
    out: list[Limit] = []
    host = {"a": "local", "b": "peer"}
    rmem = s.rmem_a if receiver == "a" else s.rmem_b
    wmem = s.wmem_a if sender == "a" else s.wmem_b
    out.append(
        Limit(rmem * RMEM_WINDOW[0] * per_s, rmem * RMEM_WINDOW[1] * per_s,
              "receiver-window", host[receiver])
    )  # fmt: skip
    out.append(
        Limit(wmem * WMEM_FLIGHT[0] * per_s, (wmem * WMEM_FLIGHT[1] + SEND_OVERSHOOT) * per_s,
              "sender-buffer", host[sender])
    )  # fmt: skip
    lo, hi = UNSCALED_WINDOW * UNSCALED[0] * per_s, UNSCALED_WINDOW * UNSCALED[1] * per_s
    if s.strip_wscale:
        out.append(Limit(lo, hi, "middlebox", "path"))
    for side, on in (("a", s.wscale_a), ("b", s.wscale_b)):
        if not on:
            out.append(Limit(lo, hi, "window-scaling", host[side]))
    return out


def _direction_limits(s: Scenario, up: bool) -> list[Limit]:
    sender, receiver = ("a", "b") if up else ("b", "a")
    cc = s.cc_a if up else s.cc_b
    out = _window_limits(s, receiver, sender)
    if cc in LOSS_BASED:
        if s.loss > 0:
            # Mathis et al. 1997: MSS / RTT x sqrt(3 / 2p); the constant ranges ~0.9-1.3 over
            # ACK policies, so the interval spans x0.75 - x1.1 of the textbook bound. CUBIC
            # never falls below that Reno-friendly rate and runs its own above it.
            segments = math.sqrt(1.5 / s.loss)
            if cc == "cubic":
                segments = max(segments, cubic_segments(s.rtt_s, s.loss))
            bound = MSS * segments / s.rtt_s / (s.rate_bps * GOODPUT / 8)
            out.append(Limit(0.75 * bound, 1.1 * bound, "congestion", _host(sender)))
        util = reno_utilisation(s.queue_bytes / s.bdp_bytes, BETA[cc])
        if util < 1.0:
            # Reno's linear growth is the law; CUBIC's concave growth keeps more, up to all.
            out.append(Limit(util, util if cc == "reno" else 1.0, "path-capacity", None))
    if s.policer_bps is not None and s.policed_on(up):
        share = s.policer_bps / s.rate_bps
        out.append(Limit(0.5 * share, share, "policer", "path"))
    if s.cross_on(up) and s.cross_udp_bps > 0:
        left = max(0.0, 1.0 - s.cross_udp_bps / s.rate_bps)
        out.append(Limit(left, left, "cross-traffic", None))
    if s.cross_on(up) and s.cross_tcp_flows > 0:
        share = 1.0 / (s.cross_tcp_flows + 1)
        out.append(Limit(0.5 * share, 1.5 * share, "cross-traffic", None))
    if s.cpu_share_b is not None:  # b receives the upload and sends the download
        out.append(Limit(0.0, STARVED_MAX_BPS / (s.rate_bps * GOODPUT), "host-cpu", "peer"))
    return out


def _host(side: str) -> str:
    return "local" if side == "a" else "peer"


def _filled(s: Scenario, up: bool, limits: list[Limit]) -> bool:
    """A flow keeps this direction's bottleneck queue busy: the transfer when nothing but the
    line (or unresponsive cross traffic) holds it, or TCP cross traffic that way."""
    held = any(x.hi <= BINDS and x.factor != "cross-traffic" for x in limits)
    return not held or (s.cross_on(up) and s.cross_tcp_flows > 0)


def _fill_time_s(s: Scenario) -> float:
    rounds = math.log2(max(2.0, s.bdp_bytes / INITIAL_WINDOW))
    return s.rtt_s * rounds + s.queue_bytes * 8 / s.rate_bps


def _bloat(s: Scenario, up: bool) -> str:
    """'bloat', 'clean' or 'between' for the sender filling this direction's queue."""
    b = s.queue_bytes / s.bdp_bytes
    if (s.cc_a if up else s.cc_b) not in LOSS_BASED:
        # BBR: inflight capped at cwnd_gain x BDP, after a startup overshoot; at most
        # BBR_QUEUE_BDPS of standing queue, which sits on the bloat criterion's edge, plus
        # its quantization budget (bbr_quanta_bytes), which dominates a small BDP.
        q = min(b, BBR_QUEUE_BDPS + bbr_quanta_bytes(s.rate_bps) / s.bdp_bytes)
        return "clean" if q <= 1.0 or q * s.rtt_s * 1e3 <= CLEAN_MAX_MS else "between"
    rmem, wmem = (s.rmem_b, s.wmem_a) if up else (s.rmem_a, s.wmem_b)
    window = min(rmem * RMEM_WINDOW[0], wmem * WMEM_FLIGHT[0])
    b = min(b, max(0.0, window / s.bdp_bytes - 1.0))  # a window too small cannot fill it all
    median_bdps = standing_queue_bdps(b, BETA[s.cc_a if up else s.cc_b])
    delay_ms = median_bdps * s.rtt_s * 1e3
    if median_bdps <= CLEAN_MEDIAN_BDPS or delay_ms <= CLEAN_MAX_MS:
        return "clean"
    if (
        median_bdps >= BLOAT_MEDIAN_BDPS
        and delay_ms >= BLOAT_MIN_MS
        and _fill_time_s(s) <= FILL_BUDGET_S
    ):
        return "bloat"
    return "between"


def bbr_quanta_bytes(rate_bps: float) -> float:
    """Linux BBR's window beyond cwnd_gain x BDP (tcp_bbr.c bbr_quantization_budget): three
    TSO goals of its pacing rate >> 10 (about 1 ms of it, at least 2 segments, at most one
    64 KB GSO packet) and 2 segments in ProbeBW's up phase."""
    goal = min(65536.0, rate_bps / 8 / 1024)
    return (3 * max(2, goal // MSS) + 2) * MTU


def standing_queue_bdps(queue_bdps: float, beta: float) -> float:
    """The median standing queue of a loss-based window through a full drop-tail buffer of
    B BDPs: the window swings between beta (1 + B) and 1 + B BDPs, the queue between
    beta (1 + B) - 1 and B; its median about the middle (Reno: (3B - 1) / 4)."""
    return max(0.0, (max(0.0, beta * (1 + queue_bdps) - 1) + queue_bdps) / 2)


def truth(s: Scenario) -> tuple[str, str | None]:
    """(limiting_factor, host_to_fix) the scenario's physics calls for, or AMBIGUOUS."""
    ups, downs = _direction_limits(s, up=True), _direction_limits(s, up=False)
    limits = ups + downs
    binding = [x for x in limits if x.hi <= BINDS]
    between = [x for x in limits if x.hi > BINDS and x.lo < FREE]
    states = {_bloat(s, up) for up, lim in ((True, ups), (False, downs)) if _filled(s, up, lim)}
    queue = next((q for q in ("bloat", "between") if q in states), "clean")
    if binding:
        names = {(x.factor, x.host) for x in binding}
        if len(names) > 1 or between or queue != "clean":
            return (AMBIGUOUS, None)
        factor, host = names.pop()
        return (factor, host)
    if between:
        return (AMBIGUOUS, None)
    if queue == "bloat":
        return ("bufferbloat", "path")
    if queue == "between":
        return (AMBIGUOUS, None)
    return ("path-capacity", None)
