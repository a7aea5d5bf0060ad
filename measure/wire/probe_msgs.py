"""The probe messages of serve's control protocol (docs/protocol.md): asking for the
arrival times of upload trains, and for download trains, as typed, frozen dataclasses with
one `to_wire` and one `from_wire` each. The UDP packets themselves are measure/wire/udp.py."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tcpwizard.measure.wire import udp
from tcpwizard.measure.wire.fields import int_in, typed_field
from tcpwizard.measure.wire.protocol import ProtocolError

# Trains serve records per session, and arrivals per train (bounds its memory per client).
MAX_TRAINS_PER_SESSION = 16
MAX_ARRIVALS_PER_TRAIN = 1024
MAX_TRAIN_PACKETS = 1024  # one download train; longer ones are asked for in segments
MAX_WAIT_MS = 5000
MAX_QUIET_MS = 2000
MAX_RATE_KBPS = 100_000_000
MAX_BURST = 64
MAX_TRAIN_ID = 2**32 - 1  # the UDP header's train field

Arrivals = tuple[tuple[int, int], ...]  # (sequence number, arrival ns), as they came


@dataclass(frozen=True)
class ProbeReportRequest:
    """client -> serve: the arrivals of these upload trains, once `expect` packets are in,
    `quiet_ms` passed without one, or `wait_ms` is over."""

    trains: tuple[int, ...]
    expect: int
    wait_ms: int = 500
    quiet_ms: int = 100

    TYPE = "probe_report"

    def to_wire(self) -> dict[str, object]:
        return {
            "type": self.TYPE,
            "trains": list(self.trains),
            "expect": self.expect,
            "wait_ms": self.wait_ms,
            "quiet_ms": self.quiet_ms,
        }

    @classmethod
    def from_wire(cls, msg: Mapping[str, Any]) -> ProbeReportRequest:
        ids = msg.get("trains")
        if not isinstance(ids, list) or not 1 <= len(ids) <= MAX_TRAINS_PER_SESSION:
            raise ProtocolError(f"trains must be a list of 1-{MAX_TRAINS_PER_SESSION} ids")
        if not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
            raise ProtocolError("train ids must be integers")
        most = MAX_TRAINS_PER_SESSION * MAX_ARRIVALS_PER_TRAIN
        return cls(
            trains=tuple(ids),
            expect=int_in(msg, "expect", 0, 0, most),
            wait_ms=int_in(msg, "wait_ms", 500, 0, MAX_WAIT_MS),
            quiet_ms=int_in(msg, "quiet_ms", 100, 1, MAX_QUIET_MS),
        )


@dataclass(frozen=True)
class ProbeReport:
    """serve -> client: when each packet of the asked-for trains arrived (serve's kernel
    clock when kernel_timestamps). On the wire the times are relative to the earliest, which
    keeps the line short; here they are absolute."""

    trains: dict[int, Arrivals]
    kernel_timestamps: bool

    TYPE = "probe_report"

    def to_wire(self) -> dict[str, object]:
        base = min((t for arr in self.trains.values() for _, t in arr), default=0)
        return {
            "type": self.TYPE,
            "base_ns": base,
            "kernel_timestamps": self.kernel_timestamps,
            "trains": {str(k): [[s, t - base] for s, t in arr] for k, arr in self.trains.items()},
        }

    @classmethod
    def from_wire(cls, msg: Mapping[str, Any]) -> ProbeReport:
        """Lenient, as timing data from the far end is: a reply without a base time or
        trains reports none, arrivals that are not [seq, ns] pairs are left out. A train id
        that is not a number is a malformed reply."""
        kernel = msg.get("kernel_timestamps") is True
        base = msg.get("base_ns")
        raw = msg.get("trains")
        if not isinstance(base, int) or not isinstance(raw, dict):
            return cls({}, kernel)
        trains: dict[int, Arrivals] = {}
        for key, arr in raw.items():
            try:
                tid = int(key)
            except ValueError:
                raise ProtocolError(f"serve sent a train id {key[:40]!r}", "malformed") from None
            pairs = arr if isinstance(arr, list) else []
            trains[tid] = tuple(
                (item[0], base + item[1])
                for item in pairs
                if isinstance(item, list)
                and len(item) == 2
                and isinstance(item[0], int)
                and isinstance(item[1], int)
            )
        return cls(trains, kernel)


@dataclass(frozen=True)
class ProbeTrain:
    """client -> serve: send `count` UDP packets of `size` bytes to this session's
    registered address, back to back (rate_kbps 0) or paced in bursts of `burst`."""

    train: int
    count: int
    size: int
    rate_kbps: int = 0
    burst: int = 1

    TYPE = "probe_train"

    def to_wire(self) -> dict[str, object]:
        return {
            "type": self.TYPE,
            "train": self.train,
            "count": self.count,
            "size": self.size,
            "rate_kbps": self.rate_kbps,
            "burst": self.burst,
        }

    @classmethod
    def from_wire(cls, msg: Mapping[str, Any]) -> ProbeTrain:
        count = int_in(msg, "count", 64, 1, MAX_TRAIN_PACKETS)
        size = int_in(msg, "size", 1472, udp.HEADER_LEN, udp.MAX_DATAGRAM)
        rate_kbps = int_in(msg, "rate_kbps", 0, 0, MAX_RATE_KBPS)
        burst = int_in(msg, "burst", 1, 1, MAX_BURST)
        train = int_in(msg, "train", 0, 0, MAX_TRAIN_ID)
        return cls(train, count, size, rate_kbps, burst)


@dataclass(frozen=True)
class ProbeTrainDone:
    """serve -> client: the train is out (`sent` packets over tx_span_ns)."""

    train: int
    sent: int
    tx_span_ns: int

    TYPE = "probe_train_done"

    def to_wire(self) -> dict[str, object]:
        return {
            "type": self.TYPE,
            "train": self.train,
            "sent": self.sent,
            "tx_span_ns": self.tx_span_ns,
        }

    @classmethod
    def from_wire(cls, msg: Mapping[str, Any]) -> ProbeTrainDone:
        w = cls.TYPE
        return cls(
            typed_field(msg, w, "train", int),
            typed_field(msg, w, "sent", int),
            typed_field(msg, w, "tx_span_ns", int),
        )
