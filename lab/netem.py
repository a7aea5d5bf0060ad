"""The kernel backend: a veth pair with netem (delay, jitter, loss) and a tbf child (rate,
drop-tail queue) on each end's egress, following tc-netem(8) and tc-tbf(8).

Used when the kernel has sch_netem; this development machine does not, so only detection is
exercised here. Per direction the egress of the sending end carries:

    root 1: netem delay D [J] loss L% limit N     (packets wait D, then go to the child)
    parent 1:1 tbf rate R burst B limit Q          (serialize at R; Q bytes of drop-tail)

Offloads are turned off on the veth so tbf sees MTU-sized packets, not 64 KB GSO bursts.
"""

from __future__ import annotations

import math
import subprocess
import uuid
from functools import cache

from tcpwizard.lab.netns import LabError, ip, ns_add, ns_del
from tcpwizard.lab.spec import LabSpec, LinkSpec


@cache
def netem_available() -> bool:
    """Try to attach netem in a throwaway namespace (no modprobe needed, nothing global)."""
    probe = "twprobe-" + uuid.uuid4().hex[:8]
    try:
        ns_add(probe)
    except Exception:
        return False
    try:
        ip("link", "set", "lo", "up", ns=probe, check=False)
        proc = subprocess.run(
            ["tc", "-n", probe, "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms"],
            capture_output=True, check=False, timeout=10,
        )  # fmt: skip
        return proc.returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False
    finally:
        ns_del(probe)


def _tc(ns: str, *args: str) -> None:
    proc = subprocess.run(
        ["tc", "-n", ns, *args], capture_output=True, text=True, check=False, timeout=15
    )
    if proc.returncode != 0:
        raise LabError(f"tc -n {ns} {' '.join(args)}: {proc.stderr.strip()}")


def netem_commands(link: LinkSpec, queue_bytes: int, mtu: int, dev: str) -> list[list[str]]:
    """The two `tc qdisc add` argument lists for one direction (pure: unit-testable)."""
    delay = [f"{link.delay_s * 1e6:.0f}us"]
    if link.jitter_s > 0:
        delay.append(f"{link.jitter_s * 1e6:.0f}us")
    # netem's limit counts packets held in the delay: everything in flight must fit.
    in_flight = link.rate_bps * max(link.delay_s + link.jitter_s, 0.001) / 8 / 64
    limit = max(1000, math.ceil(in_flight * 2))
    netem = ["qdisc", "add", "dev", dev, "root", "handle", "1:", "netem", "delay", *delay]
    if link.loss > 0:
        netem += ["loss", f"{link.loss * 100:.6g}%"]
    netem += ["limit", str(limit)]
    # tbf burst must hold at least one packet and what the rate accrues per timer tick (4 ms).
    burst = max(2 * mtu, math.ceil(link.rate_bps / 8 * 0.004))
    tbf = ["qdisc", "add", "dev", dev, "parent", "1:1", "handle", "10:", "tbf",
           "rate", f"{link.rate_bps:.0f}bit", "burst", str(burst),
           "limit", str(queue_bytes)]  # fmt: skip
    return [netem, tbf]


def build_netem(spec: LabSpec, ns_a: str, ns_b: str, ifname: str) -> None:
    """veth ifname in ns_a <-> ifname in ns_b, shaped both ways."""
    ip("link", "add", ifname, "netns", ns_a, "type", "veth", "peer", "name", ifname,
       "netns", ns_b)  # fmt: skip
    for ns, link in ((ns_a, spec.forward), (ns_b, spec.reverse)):
        subprocess.run(
            ["ip", "netns", "exec", ns, "ethtool", "-K", ifname, "tso", "off", "gso", "off",
             "gro", "off"],
            capture_output=True, check=False, timeout=15,
        )  # fmt: skip
        for args in netem_commands(link, spec.queue_bytes(link), spec.mtu, ifname):
            _tc(ns, *args)
