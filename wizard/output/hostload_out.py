"""Each end's CPU and drops over a transfer (measure/observe/hostload.py) in the text, Prometheus
and Nagios outputs; all read the JSON report's `sender_load`/`receiver_load` objects or the
ModeResult fields behind them."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from prometheus_client.core import GaugeMetricFamily, Metric

from tcpwizard.measure.model import ModeResult
from tcpwizard.measure.observe.hostload import HostLoad


def _role(m: ModeResult, end: str) -> str:
    sender_local = m.direction == "up"
    return "local" if (end == "sender") == sender_local else "peer"


def load_text(load: HostLoad) -> str:
    cores = " ".join(
        f"cpu{c.cpu} {c.busy:.0%}" + (f" (softirq {c.softirq:.0%})" if c.softirq >= 0.01 else "")
        for c in load.cores
    )
    out = (
        f"{cores}; process {load.process_cores:.2f} cores, busiest thread "
        f"{load.busiest_thread:.0%}, held off the CPU {load.starved:.0%}"
    )
    d = load.drops
    if d is not None and (d.total or d.time_squeeze):
        parts = [
            f"{k} {v}"
            for k, v in (
                ("qdisc", d.qdisc_drops),
                ("tx_dropped", d.tx_dropped),
                ("rx_dropped", d.rx_dropped),
                ("rx_missed", d.rx_missed_errors),
                ("rx_fifo", d.rx_fifo_errors),
                ("softnet dropped", d.softnet_dropped),
                ("time_squeeze", d.time_squeeze),
            )
            if v
        ]
        out += f"; drops{' on ' + d.interface if d.interface else ''}: {', '.join(parts)}"
    return out


def text_lines(modes: Sequence[ModeResult]) -> Iterator[str]:
    """One line per end per mode that reported its load."""
    for m in modes:
        for end, load in (("sender", m.sender_load), ("receiver", m.receiver_load)):
            if load is not None:
                yield f"{m.mode} {m.direction}, {end} ({_role(m, end)}): {load_text(load)}"


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def _loads(modes: Sequence[Any]) -> Iterator[tuple[str, str, str, Mapping[str, Any]]]:
    for m in modes:
        if not isinstance(m, Mapping):
            continue
        for end in ("sender", "receiver"):
            load = m.get(f"{end}_load")
            if isinstance(load, Mapping):
                yield str(m.get("mode", "")), str(m.get("direction", "")), end, load


def _busiest(load: Mapping[str, Any]) -> float | None:
    busy = [_num(c.get("busy")) for c in load.get("cores") or [] if isinstance(c, Mapping)]
    return max((b for b in busy if b is not None), default=None)


def _dropped(load: Mapping[str, Any]) -> float | None:
    d = load.get("drops")
    if not isinstance(d, Mapping):
        return None
    keys = ("qdisc_drops", "tx_dropped", "rx_dropped", "rx_missed_errors", "rx_fifo_errors")
    return sum(_num(d.get(k)) or 0.0 for k in (*keys, "softnet_dropped"))


def metric_families(
    modes: Sequence[Any], prefix: str, keys: list[str], vals: list[str]
) -> list[Metric]:
    labels = [*keys, "mode", "direction", "end"]
    fams = {
        "busiest": GaugeMetricFamily(
            f"{prefix}_host_busiest_core_ratio",
            "busiest core's busy share in the test",
            labels=labels,
        ),
        "process": GaugeMetricFamily(
            f"{prefix}_host_process_cpu_cores",
            "the transferring process's CPU, in cores",
            labels=labels,
        ),
        "starved": GaugeMetricFamily(
            f"{prefix}_host_starved_ratio",
            "share of the test the process was held off the CPU",
            labels=labels,
        ),
        "drops": GaugeMetricFamily(
            f"{prefix}_host_dropped_packets",
            "packets dropped inside the host in the test",
            labels=labels,
        ),
    }
    for mode, direction, end, load in _loads(modes):
        lab = [*vals, mode, direction, end]
        for key, v in (
            ("busiest", _busiest(load)),
            ("process", _num(load.get("process_cores"))),
            ("starved", _num(load.get("starved"))),
            ("drops", _dropped(load)),
        ):
            if v is not None:
                fams[key].add_metric(lab, v)
    return [f for f in fams.values() if f.samples]


def nagios_perf(modes: Sequence[Any]) -> list[tuple[str, float | None, str]]:
    """(label, value, unit): per mode and end, the busiest core and the host's drops."""
    out: list[tuple[str, float | None, str]] = []
    for mode, direction, end, load in _loads(modes):
        b = _busiest(load)
        out.append((f"cpu_{mode}_{direction}_{end}", None if b is None else b * 100, "%"))
        out.append((f"host_drops_{mode}_{direction}_{end}", _dropped(load), "c"))
    return out
