"""`host-cpu`: a transfer held back by one end's CPU, not by the path or TCP's settings.

Evidence per end (measure/observe/hostload.py), over the transfer:
- starved: the transferring process was kept off the CPU for at least half the transfer (a
  cgroup CPU quota, or other work on its cores). It could have done at most half the work
  it had time for, which explains a window it did not drain or data it did not write.
- a thread held a core: the busiest thread of the transferring process used >= SATURATED
  of one core; a single thread cannot use more, so it is the limit.
- a core held by the kernel's network work: a core busy >= SATURATED, mostly in softirq
  (receive and transmit processing is charged to no process).
The path must have had room: the rate below the probed capacity by more than the headers'
share (the rate the probe saw, in IP bytes, is the most a transfer's goodput can reach),
or below the check's fastest transfer, or a sender whose socket sat idle most of the time
(then only the sender's own CPU is judged).
"""

from __future__ import annotations

from tcpwizard.advice.evidence import (
    BUSY_SHARE,
    CHRONO_SHARE,
    HEALTHY_SHARE,
    Candidate,
    Direction,
    Evidence,
    probe_capacity,
    rtt_ms,
)
from tcpwizard.advice.window_law import max_receive_window, window_limit_mbps
from tcpwizard.checks.model import Fix, HostRole
from tcpwizard.measure.engine.rates import IP_TCP_HEADERS
from tcpwizard.measure.model import ModeResult
from tcpwizard.measure.observe.hostload import HostLoad

# /proc/stat counts in ticks (1/USER_HZ s); over T seconds a fully busy core reads at least
# 1 - 2/(HZ*T), 0.95 from T = 0.4 s at HZ = 100 (shorter transfers are not judged).
SATURATED = 0.95
MIN_SECONDS = 0.4
STARVED = 0.25  # of the transfer held off the CPU: measured, see docs/bench-host.md
OTHER_TRANSFER = 0.9  # the most a starvation seen in another transfer of the check is worth
# A far end that answered and then went silent: one line of evidence with nothing measured
# (the rules' one-line band, 0.45-0.6: advice/calibration.py TWO_LINES).
SILENT_CONFIDENCE = 0.5
SOFTIRQ_SHARE = 0.5  # of a saturated core's busy time: the kernel's network work
# Goodput to the IP-layer rate the probe measures: the header bytes (IPv4, TCP, timestamps)
# of a 1500-byte packet; below capacity by more than this, the path had room.
HEADER_SHARE = IP_TCP_HEADERS / 1500


def cpu_bound(load: HostLoad) -> tuple[float, str] | None:
    """(confidence, evidence) when this end's CPU held the transfer."""
    if load.seconds < MIN_SECONDS:
        return None
    if load.starved >= STARVED:
        return (
            0.97,
            f"the transferring process was held off the CPU {load.starved:.0%} of the transfer "
            f"(a CPU quota or other work; it used {load.process_cores:.3f} cores)",
        )
    if load.busiest_thread >= SATURATED:
        return (
            0.9,
            f"the transferring process's busiest thread used {load.busiest_thread:.0%} of a "
            f"core ({load.process_cores:.2f} cores in all)",
        )
    core = load.busiest_core
    if core is not None and core.busy >= SATURATED and core.softirq >= SOFTIRQ_SHARE * core.busy:
        return (
            0.7,
            f"core {core.cpu} was busy {core.busy:.0%} of the transfer, {core.softirq:.0%} in "
            "softirq (the kernel's packet processing)",
        )
    return None


def _fix(host: HostRole, i: str, key: str, command: str, why: str) -> Fix:
    return Fix(f"host-cpu-{i}", "other", host, key, "", command, why, answers=("host-cpu",))


def quota_fix(host: HostRole) -> Fix:
    return _fix(
        host,
        "quota",
        "cpu.max",
        "cat /proc/<pid>/cgroup; echo max > /sys/fs/cgroup/<cgroup>/cpu.max  "
        "# cgroup v1: echo -1 > /sys/fs/cgroup/cpu/<cgroup>/cpu.cfs_quota_us",
        "give the transferring process the CPU it waits for: lift its cgroup's CPU "
        "quota, or move other work off its cores",
    )


def cpu_fixes(host: HostRole, load: HostLoad) -> tuple[Fix, ...]:
    def fix(i: str, key: str, command: str, why: str) -> Fix:
        return _fix(host, i, key, command, why)

    out = [quota_fix(host)] if load.starved >= STARVED else []
    out += [
        fix(
            "streams",
            "streams",
            "tcpwizard check <far end> --streams 4  # or iperf3 -P 4, one stream per core",
            "parallel streams in separate threads or processes spread the work over cores",
        ),
        fix(
            "affinity",
            "affinity",
            "numactl --cpunodebind=$(cat /sys/class/net/<iface>/device/numa_node) <app>; "
            "set the NIC's IRQ affinity (/proc/irq/<n>/smp_affinity_list) to other cores of "
            "that node",
            "run the application and the NIC's interrupts on the NIC's NUMA node, not on "
            "the same core",
        ),
        fix(
            "governor",
            "cpufreq",
            "cpupower frequency-set -g performance",
            "the performance governor keeps the cores at full clock during a transfer",
        ),
        fix(
            "offload",
            "offload",
            "ethtool -K <iface> gro on gso on tso on",
            "segmentation and receive offloads move per-packet work off the CPU",
        ),
    ]
    return tuple(out)


def _room(ev: Evidence, d: Direction) -> tuple[float, str] | None:
    """What the path carries at least: the probed capacity, or else (a starved far end
    may not answer the probe) the fastest transfer of this test in either direction."""
    cap = probe_capacity(ev, d)
    if cap is not None:
        return cap.mbps, f"the path offered {cap.mbps:.0f} Mbit/s (probed)"
    modes = [m for m in (ev.transfer.modes if ev.transfer else ()) if m.error is None]
    best = max(modes, key=lambda m: m.throughput_mbps, default=None)
    if best is None:
        return None
    return (
        best.throughput_mbps,
        f"the path carried {best.throughput_mbps:.0f} Mbit/s in the {best.direction} "
        f"{best.mode} transfer",
    )


def _idle_sender(m: ModeResult) -> tuple[float, str] | None:
    """Room shown by the sender's own socket: data in flight less than BUSY_SHARE of the
    time, so the path stood idle the rest and could carry the rate again over."""
    if m.busy is None or m.busy >= BUSY_SHARE or m.busy <= 0:
        return None
    return (
        m.throughput_mbps / m.busy,
        f"the sender had data in flight only {m.busy:.0%} of the time (TCP_INFO): the path "
        "stood idle the rest",
    )


def most_starved(ev: Evidence, role: HostRole) -> HostLoad | None:
    """The most this host's transferring process was held off the CPU in any transfer of
    the check, sending or receiving. A CPU quota throttles in periods of up to 1 s (the
    longest cpu.cfs_period_us): one transfer may fall between its throttled stretches while
    another of the same check does not (a far end at 0.5 % of a core: 16 % starved in the
    autotuned upload, 52 % in the DRS upload of the same check, docs/bench-host.md)."""
    best: HostLoad | None = None
    for m in ev.transfer.modes if ev.transfer else ():
        sender: HostRole = "local" if m.direction == "up" else "peer"
        load = m.sender_load if role == sender else m.receiver_load
        if load is None or load.seconds < MIN_SECONDS:
            continue
        if best is None or load.starved > best.starved:
            best = load
    return best


def _starved_reader(ev: Evidence, d: Direction) -> Candidate | None:
    """No evidence that the path had room (no probe, every transfer at the same rate), but
    the receiver was held off the CPU while the sender waited for its window: the data it
    did not read is what closed that window, whatever the path could carry."""
    m = d.current
    load = most_starved(ev, d.receiver_role)
    rwnd = m.rwnd_limited if m else None
    if m is None or load is None or load.starved < STARVED or (rwnd or 0.0) < CHRONO_SHARE:
        return None
    host = d.receiver_role
    where = "" if load is m.receiver_load else ", in another transfer of this check"
    return Candidate(
        d.name,
        "host-cpu",
        # Below the measured-room case (0.97): the room is inferred, not shown; above the
        # window counter a starved reader also trips (receiver-window, 0.6 + 0.35 x share,
        # at most 0.95): the starvation is measured, and it is what held that window.
        0.96,
        host,
        f"{d.name}: the receiver's CPU ({host}) held the transfer to "
        f"{m.throughput_mbps:.1f} Mbit/s: it was held off the CPU {load.starved:.0%} of the "
        f"transfer{where} while the sender waited for its window {rwnd:.0%} of the time.",
        (
            f"{host}: the transferring process was held off the CPU {load.starved:.0%} of the "
            f"transfer (it used {load.process_cores:.3f} cores){where}",
            f"sender receive-window limited {rwnd:.0%} of the time (TCP_INFO): the window "
            "stayed shut with data the receiver had not read",
        ),
        fixes=cpu_fixes(host, load),
    )


def _window_law_explains(ev: Evidence, d: Direction, room_mbps: float) -> bool:
    """The receiver's audited buffer offers a window whose law (window / RTT) stays below
    the healthy share of the room the path had: the buffer, not the reader, held it."""
    window = max_receive_window(d.receiver) if d.receiver else None
    rtt = rtt_ms(ev, d)
    if window is None or rtt is None:
        return False
    return window_limit_mbps(window, rtt) < HEALTHY_SHARE * room_mbps


def rule(ev: Evidence, d: Direction) -> Candidate | None:
    m = d.current
    room = _room(ev, d)
    if m is None:
        return None
    ends: tuple[tuple[HostRole, HostLoad | None], ...] = (
        (d.sender_role, m.sender_load),
        (d.receiver_role, m.receiver_load),
    )
    if room is None or m.throughput_mbps >= room[0] * (1 - HEADER_SHARE):
        # A sender that had data in flight less than half the time left the path idle the
        # rest: the room was there whatever else was measured (a far end's serve at 0.5 %
        # of a core, its upload probes unanswered, sent a download with data in flight
        # 4 % of the time: matrix 20261201.142). Only the sender's own CPU explains an
        # idle socket: a receiver's shut window counts as busy time in TCP_INFO.
        room, ends = _idle_sender(m), ends[:1]
    if room is None:
        # Nothing shows the path had room: the CPU kept up, unless a starved receiver
        # held the window shut.
        return _starved_reader(ev, d)
    found: list[tuple[float, HostRole, str, HostLoad]] = []
    for role, load in ends:
        if load is not None and (why := cpu_bound(load)) is not None:
            found.append((why[0], role, why[1], load))
            continue
        # This host starved in another transfer of the check: it is short of CPU, though
        # this transfer's own share fell between the throttled stretches. Below the window
        # rules' case with the law measured (0.95): that evidence is this transfer's own.
        other = most_starved(ev, role)
        if other is not None and other is not load and (why := cpu_bound(other)) is not None:
            text = f"{why[1]}, in another transfer of this check"
            found.append((min(why[0], OTHER_TRANSFER), role, text, other))
    # A receiver starved in any transfer of the check, whose window held this one: the
    # window counter alone is what a starved reader trips, unless its audited buffer shows a
    # window that holds the rate below the path (then the window rule has the law).
    reader = None if _window_law_explains(ev, d, room[0]) else _starved_reader(ev, d)
    if not found:
        return reader
    conf, host, text, load = max(found, key=lambda f: f[0])
    if reader is not None and reader.confidence > conf:
        return reader
    side = "sender" if host == d.sender_role else "receiver"
    return Candidate(
        d.name,
        "host-cpu",
        conf,
        host,
        f"{d.name}: the {side}'s CPU ({host}) held the transfer to "
        f"{m.throughput_mbps:.1f} Mbit/s while {room[1]}.",
        (f"{host}: {text}", f"{m.mode} moved {m.throughput_mbps:.1f} Mbit/s; {room[1]}"),
        fixes=cpu_fixes(host, load),
    )


def silent_far_end(ev: Evidence) -> Candidate | None:
    """No transfer moved data, and the far end's serve took our requests without answering
    them in time after answering before: its process does not get to run (a CPU quota, a
    saturated host; a stopped process looks the same). One line of evidence, no load
    measured: the rules' one-line band (advice/calibration.py)."""
    if ev.measured or ev.peer_silent is None:
        return None
    if ev.transfer is not None and not any(m.error for m in ev.transfer.modes):
        return None
    # No transfer at all is the same silence, earlier: its request went unanswered before
    # a mode began (serve at 0.5 % of a core answered its hello, then neither the settings
    # request nor the transfer's: `unknown`, scenario matrix 20261228.78).
    return Candidate(
        "up",
        "host-cpu",
        SILENT_CONFIDENCE,
        "peer",
        "not measured: the far end's serve took each request and answered none in time, "
        "after it had answered before: its process does not get to run (a CPU quota or a "
        "host too busy to run it; a stopped process looks the same). No network setting "
        "explains that; look at the far end's CPU.",
        (ev.peer_silent,),
        fixes=(
            quota_fix("peer"),
            _fix(
                "peer",
                "load",
                "top",
                "top -b -n 1 -o %CPU | head -20; cat /sys/fs/cgroup/<cgroup>/cpu.stat",
                "see what holds the far end's CPU: its busiest processes, and how often its "
                "cgroup was throttled (nr_throttled)",
            ),
        ),
    )
