"""JSON of the measurement results (path estimate, transfers, samples): built here, in the
output layer, from the frozen dataclasses of tcpwizard.measure.model, as every part of the
report is (wizard/output/json_format.py)."""

from __future__ import annotations

from typing import Any

from tcpwizard.measure.engine.loaded_rtt import loaded_rtt, plateau_mbps
from tcpwizard.measure.model import (
    CapacityEstimate,
    ModeResult,
    PathEstimate,
    TransferResult,
    TransferSample,
)
from tcpwizard.measure.observe.hostload import HostLoad
from tcpwizard.measure.probes.availbw import AvailBandwidth


def _round(x: float | None, nd: int = 3) -> float | None:
    return None if x is None else round(x, nd)


def capacity_json(cap: CapacityEstimate) -> dict[str, Any]:
    return {
        "mbps": _round(cap.mbps),
        "method": cap.method,
        "confidence": cap.confidence,
        "pairs_mbps": _round(cap.pairs_mbps),
        "train_mbps": _round(cap.train_mbps),
        "limited_by": cap.limited_by,
        "note": cap.note,
        "train_loss": cap.train_loss,
    }


def path_json(est: PathEstimate) -> dict[str, Any]:
    """The `path` object of the JSON report (DESIGN.md contract), plus additive details."""
    r = est.rtt
    return {
        "rtt_ms": {
            "min": _round(r.min),
            "p50": _round(r.p50),
            "p95": _round(r.p95),
            "mean": _round(r.mean),
            "mdev": _round(r.mdev),
            "max": _round(r.max),
            "loss_pct": _round(r.loss_pct, 2),
            "jitter": _round(r.jitter),
            "samples": r.samples,
            "method": r.method,
        },
        "capacity_mbps": _round(est.capacity.mbps) if est.capacity else None,
        "capacity_method": est.capacity.method if est.capacity else None,
        "bdp_bytes": est.bdp_bytes,
        "capacity": capacity_json(est.capacity) if est.capacity else None,
        "capacity_down": capacity_json(est.capacity_down) if est.capacity_down else None,
        "peer": est.peer,
        "address": est.address,
        "port": est.port,
        "duration_s": round(est.duration_s, 3),
        "notes": list(est.notes),
        **({} if est.available is None else {"available": available_json(est.available)}),
        **(
            {}
            if est.available_down is None
            else {"available_down": available_json(est.available_down)}
        ),
        **(
            {}
            if est.idle_loss is None
            else {
                "idle_loss": {
                    "sent": est.idle_loss.sent,
                    "lost": est.idle_loss.lost,
                    "method": est.idle_loss.method,
                }
            }
        ),
    }


def available_json(a: AvailBandwidth) -> dict[str, Any]:
    """What cross traffic leaves free of the capacity one way."""
    return {
        "mbps": _round(a.estimate_bps / 1e6),
        "low_mbps": _round(a.low_bps / 1e6),
        "high_mbps": _round(a.high_bps / 1e6),
        "capacity_mbps": _round(a.capacity_bps / 1e6),
        "free_share": _round(a.free_share),
        "streams": a.streams,
        "loaded_streams": a.loaded,
        "packets": a.packets,
        "elapsed_s": _round(a.elapsed_s),
        "note": a.note,
    }


def sample_json(s: TransferSample) -> dict[str, Any]:
    ti = s.tcp_info
    return {
        "t_s": s.t_s,
        "goodput_mbps": _round(s.goodput_mbps),
        "rcvbuf_bytes": s.rcvbuf_bytes,
        "sndbuf_bytes": s.sndbuf_bytes,
        "drs_bandwidth_mbps": _round(s.drs_bandwidth_mbps),
        "drs_rtt_ms": _round(s.drs_rtt_ms),
        "tcp_info": None
        if ti is None
        else {
            "rtt_us": ti.rtt_us,
            "rttvar_us": ti.rttvar_us,
            "snd_cwnd": ti.snd_cwnd,
            "total_retrans": ti.total_retrans,
            "delivery_rate_bps": ti.delivery_rate_bps,
            "busy_time_us": ti.busy_time_us,
            "rwnd_limited_us": ti.rwnd_limited_us,
            "sndbuf_limited_us": ti.sndbuf_limited_us,
            "snd_mss": ti.snd_mss,
            "snd_wnd": ti.snd_wnd,
        },
        # The cumulative count the rates come from: any window can be recomputed.
        "delivered_bytes": s.delivered_bytes,
        # Whose count that is; left out where unknown, as in reports from before it was kept.
        **({"delivered_by": s.delivered_by} if s.delivered_by else {}),
    }


def latency_json(m: ModeResult, idle_ms: float | None) -> dict[str, Any] | None:
    """The RTT the transfer caused (measure/engine/loaded_rtt.py): median and p90 of the sender's
    smoothed RTT over the second half against the idle RTT, and responsiveness (RPM)."""
    lr = loaded_rtt(m, idle_ms)
    if lr is None:
        return None
    return {
        "idle_ms": _round(lr.idle_ms),
        "median_ms": _round(lr.median_ms),
        "p90_ms": _round(lr.p90_ms),
        "rpm": _round(lr.rpm, 1),
        "queue_bdps": _round(lr.queue_bdps),
        "samples": lr.samples,
        "source": lr.source,
    }


def mode_json(m: ModeResult, idle_ms: float | None = None) -> dict[str, Any]:
    """One entry of `transfer.modes[]` for `tcpwizard transfer --json`: every field of the
    report's transfer object (wizard/output/json_format.py), plus the paper's Mbit/s per MB,
    the autotuning flag, the sender's byte count and notes. idle_ms: the probe's idle RTT
    that the RTT under load is judged against (None: the transfer's own smallest)."""
    return {
        "mode": m.mode,
        "streams": m.streams,
        "throughput_mbps": _round(m.throughput_mbps),
        "max_buffer_bytes": m.max_buffer_bytes,
        "retransmits": m.retransmits,
        "samples": [sample_json(s) for s in m.samples],
        "direction": m.direction,
        "bytes": m.bytes,
        "bytes_sent": m.bytes_sent,
        "seconds": _round(m.seconds, 4),
        "mbps_per_mb": _round(m.mbps_per_mb),
        "rwnd_limited": _round(m.rwnd_limited),
        "sndbuf_limited": _round(m.sndbuf_limited),
        "busy": _round(m.busy),
        "congestion_control": m.congestion_control,
        "rcv_autotuning": m.rcv_autotuning,
        "forced": m.forced,
        "notes": list(m.notes),
        "error": m.error,
        "latency_under_load": latency_json(m, idle_ms),
        # The rate held once up to speed, IP layer (a policer's rate when one is named).
        "rate_plateau_mbps": _round(plateau_mbps(m)) if m.error is None else None,
        # The most payload the line carries, where its rate is known (advice/guard.py).
        "rate_bound_mbps": _round(m.rate_bound_mbps),
        "write_s": _round(m.write_s, 4),
        "sender_load": None if m.sender_load is None else load_json(m.sender_load),
        "receiver_load": None if m.receiver_load is None else load_json(m.receiver_load),
    }


def load_json(load: HostLoad) -> dict[str, Any]:
    """One end's CPU and drops over a transfer (measure/observe/hostload.py), cores as objects."""
    return {
        "seconds": _round(load.seconds, 3),
        "cores": [
            {
                "cpu": c.cpu,
                "user": _round(c.user, 4),
                "system": _round(c.system, 4),
                "softirq": _round(c.softirq, 4),
                "busy": _round(c.busy, 4),
            }
            for c in load.cores
        ],
        "process_cores": _round(load.process_cores, 4),
        "busiest_thread": _round(load.busiest_thread, 4),
        "starved": _round(load.starved, 4),
        "drops": None if load.drops is None else load.drops.to_json(),
    }


def transfer_json(result: TransferResult, idle_ms: float | None = None) -> dict[str, Any]:
    """The `transfer` object of the JSON report."""
    return {
        "direction": result.direction,
        "modes": [mode_json(m, idle_ms) for m in result.modes],
        "streams": result.streams,
        "congestion_control": {
            "local": result.local_congestion_control,
            "peer": result.peer_congestion_control,
        },
        "at_once": result.at_once,
    }
