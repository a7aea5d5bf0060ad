"""The user-space delay line: the emulated bottleneck between two TUN interfaces.

Run as its own process (`python -m tcpwizard.lab.delayline ...`, started by Lab.up) so a lab
outlives the CLI that built it. Per direction, for each packet read from the source TUN:

1. random loss (before the queue, like netem);
2. drop-tail: the packet is dropped if the bytes still waiting to be serialized plus this
   packet exceed the queue limit;
3. serialization: it leaves the bottleneck at dep = max(now, previous dep) + size*8/rate,
   so the backlog in bytes is (previous dep - now) * rate / 8 - no explicit queue needed;
4. delivery at dep + delay + uniform(-jitter, +jitter), never before the previous packet
   (no reordering: netem does the same when a rate is set).

Delivery times are therefore monotonic per direction and a deque is the timer heap. One
thread, select() on both TUN fds (select, not epoll, because epoll_wait rounds its timeout up
to whole milliseconds), many packets per wakeup, bare os.read/os.write.

The process exits when either namespace disappears, when its TUN fails, on SIGTERM/SIGINT, or
when the optional owner process (a pytest session) is gone - then it also removes its
namespaces and state file itself, so a killed test run leaves nothing behind.

Why one module of this size: one process's per-packet loop, its hot path; the queue, the
clock and the TUN I/O it drives are read together when the emulator is questioned.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import select
import signal
import subprocess
import sys
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

from tcpwizard.lab import gso as gso_mod
from tcpwizard.lab.gso import VNET_HDR_LEN, wire_size
from tcpwizard.lab.netns import pid_alive, start_time
from tcpwizard.lab.tun import NETNS_RUN_DIR, in_netns, open_tun, set_timer_slack, take_the_wire

# Packets read per fd per wakeup: bounds the time spent reading before due packets go out.
READ_BATCH = 64
# ... and at most about this many wire bytes (super-packets are up to 64 KB each).
READ_BATCH_BYTES = 256 * 1024
# How often (s) to check that the namespaces and the owner still exist.
HOUSEKEEPING_S = 0.5
# select() wakes 35-100 µs late on this VM (more after long sleeps: the kernel grants
# timeout/1000 of slack). So a long wait is cut short COARSE_S before the due time and
# finished with a short sleep, and a packet due within EARLY_S counts as due: the wakeup
# lateness then centres the error on zero instead of always adding it to the delay.
EARLY_S = 40e-6
COARSE_S = 1e-3
# A super-packet reaches the far end whole, when its last segment would: its first segment
# is late by the time the others take on the bottleneck. Bounded through the TUN's
# gso_max_segs (lab/gso.py max_segments) to the bunching the line already does to single
# packets: a packet due within EARLY_S goes out now and select() wakes 35-100 us late, so
# each wakeup writes up to ~100 us of the link's packets back to back. Below 120 Mbit/s a
# 1500-byte packet takes longer than that: slow links see no super-packets at all.
GSO_BURST_S = 100e-6
# Up to 1 Gbit/s the plain path carries the rate (docs/bench-calibrate.md) and keeps TCP as
# it was: at 1 Gbit/s x 50 ms with 0.1 % random loss, one Cubic flow moved 281-297 Mbit/s
# per packet (4 runs) but 264-267 with 8-segment super-packets and 211-215 with checksum
# offload and single segments (2 runs each): the sender's skbs and the receiver's ACKs
# change with the offloads. So super-packets (and any offload) only above it.
GSO_ABOVE_BPS = 1e9


@dataclass(frozen=True)
class LinkParams:
    """One direction, fully resolved (queue in bytes)."""

    rate_bps: float
    delay_s: float
    jitter_s: float
    loss: float
    queue_bytes: int


class Direction:
    """Serializer + delay for packets from fd `src` to fd `dst`."""

    def __init__(
        self, src: int, dst: int, p: LinkParams, rng: random.Random, mtu: int, gso: bool = False
    ) -> None:
        """gso: the fds carry virtio-net headers and TCP super-packets (lab/gso.py)."""
        self.src = src
        self.dst = dst
        self.byte_time = 8.0 / p.rate_bps
        self.queue_time = p.queue_bytes * self.byte_time
        self.delay = p.delay_s
        self.jitter = p.jitter_s
        self.loss = p.loss
        self.rng = rng
        self.gso = gso
        self.bufsize = gso_mod.VNET_HDR_LEN + gso_mod.MAX_SUPER_BYTES + 64 if gso else mtu + 64
        self.last_dep = 0.0
        self.last_deliver = 0.0
        self.pending: deque[tuple[float, bytes]] = deque()
        self.packets_in = 0
        self.bytes_in = 0
        self.lost = 0
        self.queue_drops = 0
        self.packets_out = 0
        self.write_errors = 0
        self.super_packets = 0
        self.split = 0
        self.counts: deque[int] = deque()  # gso: segments in each pending write
        if gso:
            self.ingest = self._ingest_gso  # type: ignore[method-assign]
            self.flush = self._flush_gso  # type: ignore[method-assign]

    def ingest(self, now: float) -> bool:
        """Read up to READ_BATCH packets; False when the TUN is gone."""
        read = os.read
        fd = self.src
        bufsize = self.bufsize
        byte_time = self.byte_time
        queue_time = self.queue_time
        delay = self.delay
        jitter = self.jitter
        loss = self.loss
        rnd = self.rng.random
        append = self.pending.append
        last_dep = self.last_dep
        last_deliver = self.last_deliver
        n = 0
        try:
            while n < READ_BATCH:
                try:
                    pkt = read(fd, bufsize)
                except BlockingIOError:
                    break
                n += 1
                self.bytes_in += len(pkt)
                if loss and rnd() < loss:
                    self.lost += 1
                    continue
                dep = (last_dep if last_dep > now else now) + len(pkt) * byte_time
                if dep - now > queue_time:
                    self.queue_drops += 1
                    continue
                last_dep = dep
                t = dep + delay
                if jitter:
                    t += (2.0 * rnd() - 1.0) * jitter
                if t < last_deliver:
                    t = last_deliver
                last_deliver = t
                append((t, pkt))
        except OSError:
            return False
        finally:
            self.packets_in += n
            self.last_dep = last_dep
            self.last_deliver = last_deliver
        return True

    def _ingest_gso(self, now: float) -> bool:
        """ingest() for fds with virtio-net headers: a read may be a super-packet of n
        segments. It is charged, lost and queued per segment (lab/gso.py); it goes on whole
        when all its segments pass, else split, with only the lost ones dropped."""
        read = os.read
        fd = self.src
        bufsize = self.bufsize
        byte_time = self.byte_time
        queue_time = self.queue_time
        loss = self.loss
        rnd = self.rng.random
        hdr = VNET_HDR_LEN
        n = 0
        got = 0
        try:
            while n < READ_BATCH and got < READ_BATCH_BYTES:
                try:
                    pkt = read(fd, bufsize)
                except BlockingIOError:
                    break
                n += 1
                if pkt[1] == 0:  # not GSO: one packet, as on the plain path
                    size = len(pkt) - hdr
                    got += size
                    self.packets_in += 1
                    self.bytes_in += size
                    if loss and rnd() < loss:
                        self.lost += 1
                        continue
                    last = self.last_dep
                    dep = (last if last > now else now) + size * byte_time
                    if dep - now > queue_time:
                        self.queue_drops += 1
                        continue
                    self.last_dep = dep
                    self._deliver(dep, pkt, 1)
                    continue
                count, wire = wire_size(pkt)
                got += wire
                self.packets_in += count
                self.bytes_in += wire
                self.super_packets += 1
                # One draw per segment, as the plain path makes per packet.
                lost = [i for i in range(count) if rnd() < loss] if loss else []
                last = self.last_dep
                dep = (last if last > now else now) + wire * byte_time
                if dep - now <= queue_time and not lost:
                    self.last_dep = dep
                    self._deliver(dep, pkt, count)
                    continue
                # A segment is lost or does not fit: split, and judge each one as the plain
                # path would a packet (the draws above decide which are lost).
                parts = gso_mod.split(pkt) if count > 1 else [pkt]
                if len(parts) != count:
                    # Headers split() cannot rebuild (IPv6 extension headers before TCP):
                    # the whole super-packet shares its segments' fate, counted per segment.
                    if lost:
                        self.lost += count
                    elif dep - now > queue_time:
                        self.queue_drops += count
                    continue
                self.split += 1
                for i, part in enumerate(parts):
                    if i in lost:
                        self.lost += 1
                        continue
                    last = self.last_dep
                    dep = (last if last > now else now) + (len(part) - hdr) * byte_time
                    if dep - now > queue_time:
                        self.queue_drops += 1
                        continue
                    self.last_dep = dep
                    self._deliver(dep, part, 1)
        except OSError:
            return False
        return True

    def _deliver(self, dep: float, pkt: bytes, count: int) -> None:
        t = dep + self.delay
        if self.jitter:
            t += (2.0 * self.rng.random() - 1.0) * self.jitter
        if t < self.last_deliver:
            t = self.last_deliver
        self.last_deliver = t
        self.pending.append((t, pkt))
        self.counts.append(count)

    def flush(self, now: float) -> float | None:
        """Write every packet due by now; return the time until the next one, if any."""
        pend = self.pending
        if not pend:
            return None
        limit = now + EARLY_S
        write = os.write
        dst = self.dst
        sent = 0
        while pend and pend[0][0] <= limit:
            try:
                write(dst, pend.popleft()[1])
            except OSError:
                # Host side down or the packet refused: the wire loses it, we keep going.
                self.write_errors += 1
            sent += 1
        self.packets_out += sent
        return pend[0][0] - now if pend else None

    def _flush_gso(self, now: float) -> float | None:
        """flush() counting the segments of each super-packet written. Its own copy of the
        loop, not a shared one: the plain path, which carries every lab at 1 Gbit/s and
        below, then pays nothing per packet for the counts."""
        pend = self.pending
        if not pend:
            return None
        counts = self.counts
        limit = now + EARLY_S
        write = os.write
        dst = self.dst
        sent = 0
        while pend and pend[0][0] <= limit:
            try:
                write(dst, pend.popleft()[1])
            except OSError:
                self.write_errors += 1
            sent += counts.popleft()
        self.packets_out += sent
        return pend[0][0] - now if pend else None

    def stats(self) -> dict[str, int]:
        return {
            "packets_in": self.packets_in,
            "bytes_in": self.bytes_in,
            "lost": self.lost,
            "queue_drops": self.queue_drops,
            "packets_out": self.packets_out,
            "write_errors": self.write_errors,
            "queued": len(self.pending),
            "super_packets": self.super_packets,
            "split": self.split,
        }


class DelayLine:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.stop_reason = ""
        self.dirs: list[Direction] = []
        # Remembered so that a new process reusing the owner's pid does not count as it.
        self.owner_started = start_time(args.owner_pid) if args.owner_pid else None

    def _alive(self) -> bool:
        a = self.args
        # The owner first: on a multi-hop lab another line may already be removing the
        # namespaces, and every line should still clean up its own.
        if a.owner_pid and (
            not pid_alive(a.owner_pid) or start_time(a.owner_pid) != self.owner_started
        ):
            self.stop_reason = "owner"
            return False
        for ns in (a.ns_a, a.ns_b):
            if not os.path.exists(os.path.join(NETNS_RUN_DIR, ns)):
                self.stop_reason = f"namespace {ns} is gone"
                return False
        return True

    def write_stats(self) -> None:
        if not self.args.stats_file:
            return
        data = {"forward": self.dirs[0].stats(), "reverse": self.dirs[1].stats()}
        tmp = self.args.stats_file + ".tmp"
        with open(tmp, "w") as f:
            json.dump(data, f)
        os.replace(tmp, self.args.stats_file)

    def run(self, fwd: LinkParams, rev: LinkParams) -> None:
        a = self.args
        if_b = a.ifname_b or a.ifname
        vnet = a.gso == "on"
        # Super-packets only toward a bottleneck faster than GSO_ABOVE_BPS; a slower one
        # gets the kernel's own segments, one per read, as on the plain path.
        fast = (fwd.rate_bps > a.gso_above_bps, rev.rate_bps > a.gso_above_bps)
        try:
            fd_a, fd_b = self._open(vnet, fast)
        except OSError as exc:
            if not vnet:
                raise
            # A kernel without IFF_VNET_HDR or TUN offloads: the plain path, one packet a read.
            print(f"delayline {a.name}: no GSO on the TUN ({exc}); packet by packet",
                  file=sys.stderr)  # fmt: skip
            vnet = False
            fd_a, fd_b = self._open(vnet, (False, False))
        for ns, ifname, link, on in (
            (a.ns_a, a.ifname, fwd, fast[0]),
            (a.ns_b, if_b, rev, fast[1]),
        ):
            if vnet and on:
                segs = gso_mod.max_segments(link.rate_bps, a.mtu, a.gso_burst_us * 1e-6)
                subprocess.run(
                    ["ip", "-n", ns, "link", "set", "dev", ifname, "gso_max_segs", str(segs)],
                    check=True, capture_output=True,
                )  # fmt: skip
        rng = random.Random(a.seed)
        self.dirs = [
            Direction(fd_a, fd_b, fwd, rng, a.mtu, vnet),
            Direction(fd_b, fd_a, rev, rng, a.mtu, vnet),
        ]
        set_timer_slack(1)
        take_the_wire()

        def on_term(signum: int, frame: object) -> None:
            self.stop_reason = "signal"

        signal.signal(signal.SIGTERM, on_term)
        signal.signal(signal.SIGINT, on_term)
        signal.signal(signal.SIGUSR1, lambda s, f: self.write_stats())
        signal.signal(signal.SIGHUP, signal.SIG_IGN)

        # Tell Lab.up that the interfaces exist, then let go of its pipe.
        os.write(1, b"ready\n")
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.close(devnull)
        self._loop()
        self.write_stats()

    def _open(self, vnet: bool, offload: tuple[bool, bool]) -> tuple[int, int]:
        """The TUNs in ns-a and ns-b; offload[0] for ns-a's (it feeds the forward
        bottleneck), offload[1] for ns-b's."""
        a = self.args
        with in_netns(a.ns_a):
            fd_a = open_tun(a.ifname, vnet, offload[0])
        try:
            with in_netns(a.ns_b):
                fd_b = open_tun(a.ifname_b or a.ifname, vnet, offload[1])
        except OSError:
            os.close(fd_a)
            raise
        return fd_a, fd_b

    def _loop(self) -> None:
        dirs = self.dirs
        by_fd = {d.src: d for d in dirs}
        rlist = list(by_fd)
        mono = time.monotonic
        sel = select.select
        next_house = mono() + HOUSEKEEPING_S
        while not self.stop_reason:
            now = mono()
            timeout = HOUSEKEEPING_S
            for d in dirs:
                wait = d.flush(now)
                if wait is not None and wait < timeout:
                    timeout = wait
            if timeout > 2 * COARSE_S:
                timeout -= COARSE_S
            try:
                ready = sel(rlist, [], [], timeout if timeout > 0 else 0)[0]
            except InterruptedError:
                continue
            now = mono()
            for fd in ready:
                if not by_fd[fd].ingest(now):
                    self.stop_reason = "tun device gone"
            if now >= next_house:
                next_house = now + HOUSEKEEPING_S
                self._alive()


def _self_destruct(args: argparse.Namespace) -> None:
    """The owner died without tearing us down: remove what we belong to."""
    for ns in (args.ns_a, args.ns_b, *args.extra_ns):
        pids = subprocess.run(
            ["ip", "netns", "pids", ns], capture_output=True, text=True, check=False
        ).stdout.split()
        for pid in pids:
            if pid.isdigit() and int(pid) != os.getpid():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid), signal.SIGKILL)
        subprocess.run(["ip", "netns", "del", ns], capture_output=True, check=False)
    for path in (args.state_file, args.stats_file):
        if path:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)


def link_params(data: dict[str, Any]) -> LinkParams:
    return LinkParams(
        rate_bps=float(data["rate_bps"]),
        delay_s=float(data["delay_s"]),
        jitter_s=float(data["jitter_s"]),
        loss=float(data["loss"]),
        queue_bytes=int(data["queue_bytes"]),
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="tcpwizard.lab.delayline")
    p.add_argument("--name", required=True, help="lab name (shows in ps; checked by `down`)")
    p.add_argument("--ns-a", required=True)
    p.add_argument("--ns-b", required=True)
    p.add_argument("--ifname", default="wan0")
    p.add_argument("--ifname-b", default="", help="interface name in ns-b (default: --ifname)")
    p.add_argument("--mtu", type=int, default=1500)
    p.add_argument("--forward", required=True, help="JSON LinkParams a->b")
    p.add_argument("--reverse", required=True, help="JSON LinkParams b->a")
    p.add_argument("--seed", type=int, default=None)
    p.add_argument(
        "--gso",
        choices=("on", "off"),
        default="on",
        help="move the kernel's TCP super-packets whole (off: packet by packet)",
    )
    p.add_argument(
        "--gso-burst-us",
        type=float,
        default=GSO_BURST_S * 1e6,
        help="bottleneck time one super-packet may take (sets gso_max_segs)",
    )
    p.add_argument(
        "--gso-above-bps",
        type=float,
        default=GSO_ABOVE_BPS,
        help="super-packets only on links faster than this (slower: one packet a read)",
    )
    p.add_argument("--owner-pid", type=int, default=0, help="tear the lab down when it exits")
    p.add_argument("--state-file", default="")
    p.add_argument("--stats-file", default="")
    p.add_argument("--extra-ns", action="append", default=[],
                   help="another namespace of the lab (routers, b) to remove with it")  # fmt: skip
    args = p.parse_args(argv)
    line = DelayLine(args)
    try:
        line.run(link_params(json.loads(args.forward)), link_params(json.loads(args.reverse)))
    except OSError as exc:
        print(f"delayline {args.name}: {exc}", file=sys.stderr)
        return 1
    print(f"delayline {args.name}: stopping ({line.stop_reason})", file=sys.stderr)
    if line.stop_reason == "owner":
        _self_destruct(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
