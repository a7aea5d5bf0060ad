"""Result types of path measurement and test transfers (frozen; JSON is built from them)."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Literal

from tcpwizard.measure.observe.hostload import HostLoad

if TYPE_CHECKING:
    from tcpwizard.measure.probes.availbw import AvailBandwidth

Direction = Literal["up", "down"]
Mode = Literal["untuned", "autotune", "static", "overprovisioned", "drs"]


@dataclass(frozen=True)
class RttStats:
    """Milliseconds. mdev is the population standard deviation, as iputils ping reports."""

    min: float
    p50: float
    p95: float
    mean: float
    mdev: float
    max: float
    loss_pct: float
    jitter: float
    samples: int
    method: str  # "udp-echo", "tcp-connect", "icmp"


@dataclass(frozen=True)
class CapacityEstimate:
    mbps: float
    method: str  # e.g. "capprobe-pairs+train", "train", "peerless-pairs"
    confidence: float  # 0..1
    pairs_mbps: float | None = None
    train_mbps: float | None = None
    limited_by: str | None = None  # "sender", "coalescing", "shaper" or None
    note: str = ""
    # Share of the scored train lost on the way (None: no train). A long unpaced train
    # that lost most of itself met a bottleneck queue with little room left.
    train_loss: float | None = None


@dataclass(frozen=True)
class IdleLoss:
    """Round-trip probes sent and lost with the path idle (paced, small: no queue, no bucket
    runs dry on them)."""

    sent: int
    lost: int
    method: str  # the RTT probe's: "udp-echo", "tcp-connect", "icmp"


@dataclass(frozen=True)
class PathEstimate:
    rtt: RttStats
    capacity: CapacityEstimate | None
    bdp_bytes: int | None  # capacity x min RTT
    duration_s: float
    address: str
    port: int
    peer: bool = False  # a serve answered (False: peerless probes, lower confidence)
    capacity_down: CapacityEstimate | None = None  # serve -> client, when measured
    notes: tuple[str, ...] = ()  # what was skipped or fell back, and why
    # What cross traffic leaves of the upload capacity (measure/probes/availbw.py), when asked.
    available: AvailBandwidth | None = None
    # More round-trip probes at idle after the transfers, when their losses needed telling
    # apart from random loss (advice/idle_loss.py).
    idle_loss: IdleLoss | None = None
    # What cross traffic leaves of the download's capacity (measure/probes/availbw_down.py).
    available_down: AvailBandwidth | None = None

    def capacity_for(self, direction: str) -> CapacityEstimate | None:
        """The capacity probed that way: the download's own when measured, else the
        upload's (the probe's estimate for both)."""
        if direction == "down" and self.capacity_down is not None:
            return self.capacity_down
        return self.capacity

    def available_for(self, direction: str) -> AvailBandwidth | None:
        """What cross traffic leaves free that way ("up" or "down"), when measured."""
        return self.available if direction == "up" else self.available_down

    def availables(self) -> tuple[AvailBandwidth, ...]:
        """Every available-bandwidth measurement of the check (upload first)."""
        return tuple(a for a in (self.available, self.available_down) if a is not None)


@dataclass(frozen=True)
class TcpInfoSample:
    rtt_us: int
    rttvar_us: int
    snd_cwnd: int
    total_retrans: int
    delivery_rate_bps: int
    busy_time_us: int
    rwnd_limited_us: int
    sndbuf_limited_us: int
    snd_mss: int
    # The window the receiver offered, bytes (tcpi_snd_wnd, Linux 5.4+); 0 where unread (an
    # older kernel, a peer that did not send it, a far end that reports none).
    snd_wnd: int = 0


# The order of the compact wire rows and of the JSON schema's tcp_info object.
TCP_INFO_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(TcpInfoSample))


@dataclass(frozen=True)
class TransferSample:
    t_s: float  # seconds since the transfer started
    goodput_mbps: float
    rcvbuf_bytes: int
    sndbuf_bytes: int
    drs_bandwidth_mbps: float | None = None
    drs_rtt_ms: float | None = None
    tcp_info: TcpInfoSample | None = None
    # The cumulative bytes delivered by t_s, counted where they were delivered: the
    # receiver's kernel (tcpi_bytes_received) or its own reads, or the sender's acknowledged
    # bytes. Rates over any window come from these (measure/engine/rates.py).
    delivered_bytes: int | None = None
    # Who counted them: "sender" (acknowledged and SACKed bytes, no holes) or "receiver"
    # (in-order bytes, which stand still through a loss recovery and then jump); None in
    # reports from before it was recorded.
    delivered_by: str | None = None


@dataclass(frozen=True)
class ReceiverView:
    """What our receiving socket's TCP_INFO showed of a download whose sender we cannot ask
    (a web server): the largest window we offered, the receiver's RTT estimate (median),
    segments that arrived out of order (losses upstream) and the segment size."""

    max_rcv_wnd: int
    rcv_rtt_us: int
    ooo_packets: int
    rcv_mss: int
    # The 90th percentile of the receiver's RTT estimate: a queue at the bottleneck shows
    # here even where a loss-based sender drains it after each loss (the median misses it).
    rcv_rtt_high_us: int = 0


@dataclass(frozen=True)
class ModeResult:
    mode: Mode
    direction: Direction
    streams: int
    bytes: int
    seconds: float
    throughput_mbps: float
    max_buffer_bytes: int
    retransmits: int
    samples: tuple[TransferSample, ...]
    # Time shares from TCP_INFO chrono counters, 0..1 of the elapsed time.
    rwnd_limited: float | None = None
    sndbuf_limited: float | None = None
    busy: float | None = None
    congestion_control: str = ""
    forced: bool = False  # SO_*BUFFORCE was used (root what-if)
    error: str | None = None
    # False when the receiver set SO_RCVBUF: Linux then stops autotuning that socket.
    rcv_autotuning: bool = True
    bytes_sent: int | None = None  # the sender's count (differs when a peer vanished)
    notes: tuple[str, ...] = ()
    # Downloads from a far end that reports no TCP_INFO: our receiving socket's view.
    receiver_view: ReceiverView | None = None
    # Each end's CPU and drops over the transfer (measure/observe/hostload.py), where it reported.
    sender_load: HostLoad | None = None
    receiver_load: HostLoad | None = None
    # The most payload the line carries (advice/guard.py), where the line rate is known: a
    # settled rate from delivered bytes is at most it (a count read while deliveries lagged
    # lifts a rate over its interval by the lag's share of it).
    rate_bound_mbps: float | None = None
    # When the sender stopped writing, seconds since the transfer began (None: not reported).
    # What it delivered after is the drain of its buffer, not its steady state.
    write_s: float | None = None

    @classmethod
    def failed(cls, mode: Mode, direction: Direction, streams: int, error: str) -> ModeResult:
        """A mode that measured nothing, and why."""
        return cls(mode, direction, streams, 0, 0.0, 0.0, 0, 0, (), error=error)

    @property
    def mbps_per_mb(self) -> float:
        """The drsFTP paper's memory-efficiency metric: throughput per MB of buffer."""
        if self.max_buffer_bytes <= 0:
            return 0.0
        return self.throughput_mbps / (self.max_buffer_bytes / 1e6)


@dataclass(frozen=True)
class TransferResult:
    modes: tuple[ModeResult, ...]
    direction: str = "up"  # "up", "down" or "both" (each ModeResult has its own)
    streams: int = 1
    peer_congestion_control: str = ""
    local_congestion_control: str = ""
    # Both directions ran at the same time: each one's ACKs queued behind the other's data.
    at_once: bool = False
    # Modes asked for and not run, each with why (measure/engine/line_filled.py).
    left_out: tuple[str, ...] = ()
