"""The path's capacity as the verdict uses it, and whether a transfer ran at the path's rate.

A probe's estimate and the transfers' floor combined (`capacity_view`): a transfer faster
than the probe raises the capacity, a probe claiming more than a transfer that nothing of
the hosts' held back is overruled. The rates a mode reached once up to speed
(`steady_mbps`, `reached_mbps`) are what every rule compares with it.
"""

from __future__ import annotations

from tcpwizard.advice.ceiling import ceiling_mbps
from tcpwizard.advice.evidence import (
    BUSY_SHARE,
    CHRONO_SHARE,
    HEALTHY_SHARE,
    Evidence,
    offered_window_full,
    settled_rwnd_limited,
    shared_measured,
)
from tcpwizard.advice.evidence import Direction as _Direction
from tcpwizard.advice.evidence import chrono as _chrono
from tcpwizard.advice.evidence import directions as _directions
from tcpwizard.advice.evidence import probe_capacity as _probe_capacity
from tcpwizard.advice.evidence import rtt_ms as _rtt_ms
from tcpwizard.advice.loss_episodes import LATE_LOSS_EVENTS, late_retransmits
from tcpwizard.advice.ramp import still_ramping as _still_ramping
from tcpwizard.advice.rules.host_drops import held_by_host
from tcpwizard.advice.window_law import (
    LOSS_BASED,
    QUEUE_RTT,
    UNSCALED_WINDOW,
    mathis_mbps,
    max_receive_window,
    max_send_window,
    window_limit_mbps,
)
from tcpwizard.measure.engine import rates
from tcpwizard.measure.engine.loaded_rtt import flow_rtt_ms
from tcpwizard.measure.engine.rates import ip_rate
from tcpwizard.measure.model import CapacityEstimate, ModeResult
from tcpwizard.units import format_mbps as _fmt

OVERRULE_MIN = 0.3  # a weak probe yields only to a transfer at least this share of its claim
PROBE_SURE = 0.7  # a capacity estimate at least this confident stands against a slower transfer
TUNED_MODES = ("static", "overprovisioned", "drs")  # buffers sized for the path


def reached_mbps(m: ModeResult) -> float:
    """The rate a mode reached once up to speed: its steady goodput from delivered bytes
    (steady_mbps). A TCP_INFO delivery-rate sample is one burst's rate, which ACKs released
    in batches inflate: it is never taken for the path's."""
    return steady_mbps(m)


def _mode_floor_mbps(m: ModeResult) -> float:
    """What one mode showed the path carries, at the IP layer like the probes."""
    mss = next((s.tcp_info.snd_mss for s in m.samples if s.tcp_info and s.tcp_info.snd_mss), 1448)
    return ip_rate(reached_mbps(m), mss)


def line_known(probe: CapacityEstimate) -> bool:
    """The line rate is known well enough to say a transfer filled it (a tuned mode is then
    left out, measure/engine/line_filled.py): probe_sure, or a train that no flag of its own
    weakened whose only disagreement is packet pairs *below* it. Leaving a mode out goes
    wrong only on a line read too low; a bottleneck spaces a pair by its service time and
    only what comes after it (a late timer, a busy receiver) stretches them further, so pairs
    slower than the train show the pairs stretched, never the train low (34-77 Mbit/s pairs
    beside a 100 Mbit/s train on a clean lab path, 5 of 8 probes on a slower VM)."""
    if probe_sure(probe):
        return True
    pairs, train = probe.pairs_mbps, probe.train_mbps
    return (
        probe.limited_by is None
        and pairs is not None
        and train is not None
        and probe.mbps == train
        and pairs < train
    )


def probe_sure(probe: CapacityEstimate) -> bool:
    """A capacity estimate that stands against a slower transfer: confident, and not flagged
    by the probe itself (bunched arrivals, a sender that could not keep up)."""
    return probe.confidence >= PROBE_SURE and probe.limited_by not in ("coalescing", "sender")


def _floors(ev: Evidence, d: _Direction) -> list[tuple[float, ModeResult]]:
    """What each mode of this direction showed the path carries, fastest first. A fixed
    64 KB buffer (untuned) shows nothing new."""
    modes = [
        m
        for m in (ev.transfer.modes if ev.transfer else ())
        if m.error is None and m.direction == d.name and m.mode != "untuned"
    ]
    return sorted(((_mode_floor_mbps(m), m) for m in modes), key=lambda f: -f[0])


def _transfer_floor(ev: Evidence, d: _Direction) -> tuple[float, ModeResult] | None:
    """The highest rate any mode of this direction sustained: the path carries at least
    that much, whatever a probe says."""
    return next(iter(_floors(ev, d)), None)


def _counters_free(m: ModeResult) -> bool:
    """The sender's own counters say no host held `m` back: not receive-window limited, busy,
    and no host's CPU or drops behind it (held_by_host)."""
    _, _, busy = _chrono(m)
    rwnd = settled_rwnd_limited(m)
    if (rwnd or 0.0) >= CHRONO_SHARE or (busy if busy is not None else 1.0) < BUSY_SHARE:
        return False
    if offered_window_full(m):
        return False  # a paced sender held by the window it was offered, uncounted
    return not held_by_host(m)


def _ran_at_path_rate(ev: Evidence, d: _Direction, m: ModeResult, claim_mbps: float) -> bool:
    """Nothing of the hosts' held `m` back, so its rate is the path's: windows that allow
    `claim_mbps`, no receive-window limit, no ongoing loss under a loss-based sender, a
    sender that was busy, and a rate that had settled. (Send-buffer-limited time is not
    held against it: a healthy fast sender fills its buffer.)"""
    rtt = _rtt_ms(ev, d)
    if rtt is None or not _counters_free(m):
        return False
    if ev.windows_unscaled and window_limit_mbps(UNSCALED_WINDOW, rtt) < claim_mbps:
        # The window law bounds every connection's rate below the claim, whatever the
        # chronograph counted: the 64 KB window may have held it.
        return False
    if m.receiver_view is not None:
        # A sender that reports nothing (a web server): only our receiving socket can
        # show the bottleneck was reached, whatever our own buffer's mode.
        if not receiver_saw_path(m, rtt, claim_mbps):
            return False
    elif d.sender is None or d.receiver is None:
        # A far end without an audit (iperf3): a mode whose buffers were sized for the
        # path at both ends (iperf3 -w sets the far end's too) speaks for the path, and so
        # does one whose sender's kernel saw neither window limit it.
        rwnd, sndbuf, _ = _chrono(m)
        measured_free = rwnd is not None and (sndbuf or 0.0) < CHRONO_SHARE
        if (
            m.mode not in TUNED_MODES
            and not measured_free
            and not _filled_path(d, m, rtt, claim_mbps)
        ):
            return False
    elif m.mode == "autotune":
        for w in (max_receive_window(d.receiver), max_send_window(d.sender)):
            if w is None or window_limit_mbps(w, rtt) < claim_mbps:
                return False
    cc = m.congestion_control or (d.sender.congestion_control if d.sender else "")
    at_ceiling = ceiling_mbps(m, rtt) is not None
    if cc in LOSS_BASED and late_retransmits(m, rtt) >= LATE_LOSS_EVENTS and not at_ceiling:
        # Losses going on once up to speed hold a loss-based window down, unless the rate
        # kept returning to a flat ceiling: then they are a full path's sawtooth.
        return False
    if cc in LOSS_BASED and m.retransmits and m.bytes and not at_ceiling:
        # Near the Mathis bound of its own loss rate, loss held the window down, unless the
        # rate sat at a flat ceiling: a loss-based flow that fills a drop-tail bottleneck
        # sees the loss its rate implies (that is the bound read backwards), and a window
        # held down by loss has no top to return to (advice/ceiling.py).
        mss = next((s.tcp_info.snd_mss for s in m.samples if s.tcp_info), 1448)
        bound = mathis_mbps(mss, flow_rtt_ms(m, rtt), m.retransmits * mss / m.bytes, cc)
        if bound is not None and m.throughput_mbps <= 3 * bound:
            return False
    return not (len(m.samples) >= 8 and _still_ramping(m))


def _filled_path(d: _Direction, m: ModeResult, rtt_ms: float, claim_mbps: float) -> bool:
    """A download from an unaudited sender (iperf3) that overflowed the path's queue (it
    retransmitted) while our own receive window allowed the claim: the sender was not held
    back by its buffer, the path was full."""
    if m.direction != "down" or d.receiver is None or not m.retransmits:
        return False
    window = max_receive_window(d.receiver)
    return window is not None and window_limit_mbps(window, rtt_ms) >= claim_mbps


def receiver_saw_path(m: ModeResult, rtt_ms: float, claim_mbps: float) -> bool:
    """Seen from our receiving socket, the download reached the bottleneck: the window we
    offered allowed the rate claimed, and the sender filled the path's queue: the
    receiver's RTT rose above the minimum. A sender held back by its own buffer builds no
    queue; random loss (segments out of order with no queue) is no sign of a full path."""
    view = m.receiver_view
    if view is None or view.max_rcv_wnd <= 0:
        return False
    if window_limit_mbps(view.max_rcv_wnd, rtt_ms) < HEALTHY_SHARE * claim_mbps:
        return False
    return max(view.rcv_rtt_us, view.rcv_rtt_high_us) / 1e3 >= QUEUE_RTT * rtt_ms


def capacity_view(ev: Evidence, d: _Direction) -> tuple[float | None, str]:
    """(capacity, how it was decided) for one direction: the probe's estimate and the
    transfers' floor combined. A transfer faster than the probe raises the capacity; a
    probe claiming more than a transfer that ran at the path's rate is overruled."""
    probe = _probe_capacity(ev, d)
    floor = _transfer_floor(ev, d)
    if probe is not None and shared_measured(ev, d):
        # Other traffic takes a share: a transfer gets what is left, which says nothing
        # against the capacity the probe saw.
        return probe.mbps, ""
    if probe is None:
        # Without a probe only a forced (root what-if) tuned transfer says what the path
        # could do, and only when nothing of the hosts held it back (a far end starved of
        # CPU holds its window shut: a tuned upload at 4 Mbit/s of a path that carried 42
        # the other way); an ordinary transfer's rate is what is being judged.
        best = d.best
        if best and best.forced and best.mode != "untuned" and _counters_free(best):
            return best.throughput_mbps, ""
        return None, ""
    if floor is None:
        return probe.mbps, ""
    low, mode = floor
    if low >= probe.mbps:
        # Bytes delivered at that rate, over round trips (measure/engine/rates.py), not a burst:
        # the path carries at least that much, and the probe that said less is the weaker
        # evidence (capacity_sure lowers the verdict's confidence accordingly).
        return low, (
            f"probe said {_fmt(probe.mbps)}, transfers delivered {_fmt(low)} ({mode.mode}, "
            "at the IP layer, once up to speed): the capacity is at least that, less sure"
        )
    # A probe that flagged its own weakness (bursty arrivals, sender-limited, pairs and
    # train apart) yields to any transfer that nothing held back; a confident one only to a
    # transfer within the healthy share of it (a large gap then needs a named cause).
    # Against a weak probe the windows need only allow the transfer's own rate with the
    # healthy share's headroom: near a window bound a weak probe cannot tell a buffer limit
    # from the path, and a false alarm on a healthy path is the worse mistake.
    weak = not probe_sure(probe)
    # A peerless guess (no reflector: SYN or ICMP pairs) read 2-470 Mbit/s on an 80 Mbit/s
    # lab path: any transfer that nothing held back knows better, however far apart.
    peerless = ev.path is not None and not ev.path.peer
    # The fastest mode that nothing held back speaks for the path (the fastest of all may
    # lack the evidence: no sender TCP_INFO through a stock iperf3 far end, say).
    speaks = [
        (rate, m)
        for rate, m in _floors(ev, d)
        if (
            (peerless or rate >= OVERRULE_MIN * probe.mbps)
            if weak
            else rate >= HEALTHY_SHARE * probe.mbps
        )
        and _ran_at_path_rate(
            ev, d, m, rate / HEALTHY_SHARE if weak else HEALTHY_SHARE * probe.mbps
        )
    ]
    if not speaks:
        return probe.mbps, ""
    # A faster mode that cannot speak for the path (a host held it) still delivered its
    # bytes: the path carries at least that (at 4.9 Gbit/s a DRS upload that nothing held
    # back spoke at 1.7 beside an autotuned one at 4.4: "moved 4.11 Gbit/s of 1.73").
    low, mode = speaks[0]
    how = "held back by neither host"
    if floor[0] > low:
        low, mode = floor
        how = "its bytes delivered"
    doubt = (
        ""
        if low >= HEALTHY_SHARE * probe.mbps
        else "; the rest of what the probe saw may be others' traffic or a shaper this way"
        + (
            " (the available bandwidth was not measured this way)"
            if ev.path is None or ev.path.available_for(d.name) is None
            else ""
        )
    )
    return low, (
        f"probe said {_fmt(probe.mbps)} ({probe.method}), transfers showed the path carries "
        f"at least {_fmt(low)} ({mode.mode}, {how}): the transfer's rate is used{doubt}"
    )


def peerless_guess(ev: Evidence, d: _Direction) -> bool:
    """The capacity used is a peerless probe's guess (no reflector at the far end: SYN or
    ICMP pairs) that no transfer's rate replaced."""
    probe = _probe_capacity(ev, d)
    return (
        probe is not None
        and ev.path is not None
        and not ev.path.peer
        and capacity(ev, d) == probe.mbps
    )


def window_held(m: ModeResult) -> bool:
    """The sender's own counters say a window held it: the receive window in the settled
    part, or its send buffer, at least CHRONO_SHARE of the time, or the window the receiver
    offered full (offered_window_full)."""
    _, sndbuf, _ = _chrono(m)
    counted = max(settled_rwnd_limited(m) or 0.0, sndbuf or 0.0) >= CHRONO_SHARE
    return counted or offered_window_full(m)


def capacity_sure(ev: Evidence, d: _Direction) -> float:
    """How far the probe and the capacity used agree: the smaller over the larger. A
    transfer that delivered more than the probe saw proves a floor, and that probe is then
    in doubt; a transfer slower than the probe's claim that was taken for the capacity (a
    weak probe overruled) proves no more than its own rate, and the rest of the claim may
    be others' traffic or a shaper on the way (a download beside 60 Mbit/s of others' UDP on
    a 100 Mbit/s line moved 43 against its train's 100 and read `path-capacity` 0.95, with
    no available bandwidth measured that way)."""
    probe, cap = _probe_capacity(ev, d), capacity(ev, d)
    if probe is None or cap is None or cap <= 0 or probe.mbps <= 0:
        return 1.0
    return min(probe.mbps, cap) / max(probe.mbps, cap)


def capacity(ev: Evidence, d: _Direction) -> float | None:
    """The path's capacity this way: probe and transfers combined (capacity_view)."""
    return capacity_view(ev, d)[0]


def own_rate_only(ev: Evidence, d: _Direction) -> bool:
    """The capacity is nothing but the judged transfer's own rate (the probe said less, no
    other mode went faster) and a host's window may have held that transfer: then it is a
    lower bound that proves nothing about the path, neither healthy nor at the path."""
    cur, probe, floor = d.current, _probe_capacity(ev, d), _transfer_floor(ev, d)
    if cur is None or probe is None or floor is None:
        return False
    low, mode = floor
    if low < probe.mbps or mode is not cur:
        return False
    # Windows that allow the transfer's own rate are enough here: stock 4 MB buffers at
    # 1 Gbit/s x 20 ms allow ~1.1 Gbit/s, no headroom beyond, yet hold nothing back.
    return not _ran_at_path_rate(ev, d, cur, low)


def path_capacity(ev: Evidence) -> dict[str, tuple[float | None, str]]:
    """Per measured direction: (the capacity the verdict used, how it was decided)."""
    return {d.name: capacity_view(ev, d) for d in _directions(ev)}


def steady_mbps(m: ModeResult) -> float:
    """Goodput once the connection is up to speed: the bytes delivered over the settled part,
    over its time (measure/engine/rates.py). A short test on a long path spends a noticeable share
    of its time in slow start, which says nothing about the hosts' tuning; the whole
    transfer's average, the floor, is also delivered bytes."""
    steady = rates.mode_steady_mbps(m)
    if steady is None:
        return m.throughput_mbps
    return max(m.throughput_mbps, steady)


def below_path(ev: Evidence, d: _Direction) -> bool:
    """The rate sits below the path's capacity (a host limit needs one to hold back)."""
    cap, cur = capacity(ev, d), d.current
    if cur is None or cap is None or own_rate_only(ev, d):
        return True
    if peerless_guess(ev, d) and window_held(cur):
        return True  # a guess proves no path rate against the sender's own counters
    return reached_mbps(cur) < HEALTHY_SHARE * cap
