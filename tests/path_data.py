"""A synthetic `path` result for golden and unit tests: 5 hops, the RTT jump at hop 2, ICMP
rate limiting at hop 2, 1 % loss from hop 3 on, a 9000-byte host behind a 1500-byte hop."""

from __future__ import annotations

import dataclasses

from tcpwizard.measure.hop_model import HopCounts, MtuFinding, PathHops, analyse


def counts() -> list[HopCounts]:
    def hop(ttl: int, rtt: float, got: int, addr: str, dest: bool = False) -> HopCounts:
        rtts = tuple(rtt + 0.01 * (i % 7) for i in range(got))
        return HopCounts(ttl, 300, rtts, (addr,) * got, dest, span_s=3.0)

    return [
        hop(1, 2.1, 300, "10.200.3.6"),
        hop(2, 42.2, 150, "10.200.3.10"),
        hop(3, 42.4, 296, "10.200.3.14"),
        hop(4, 42.4, 297, "10.200.3.18"),
        hop(5, 42.5, 296, "10.200.3.22", dest=True),
    ]


def path(blackhole: bool = False) -> PathHops:
    hops, jump, jump_ms, loss_at, end_loss, limited = analyse(
        counts(), {"10.200.3.10": "core-2.example.net"}
    )
    mtu = MtuFinding(9000, 1500, 2, "10.200.3.10", False, None, None, 4, "")
    if blackhole:
        mtu = MtuFinding(
            9000, 1500, 2, "10.200.3.10", True, 2, "10.200.3.10", 42,
            "packets over 1500 B vanish after hop 2 and no 'fragmentation needed' comes back",
        )  # fmt: skip
    return PathHops(
        host="b.lab",
        address="10.200.3.22",
        family=4,
        method="icmp",
        port=None,
        hops=hops,
        reached=True,
        rtt_jump_hop=jump,
        rtt_jump_ms=jump_ms,
        loss_start_hop=loss_at,
        end_loss_pct=end_loss,
        rate_limited_hops=limited,
        mtu=mtu,
        probes_sent=1504,
        elapsed_s=5.2,
        notes=(),
        gateway="10.200.3.6",
        dev="wan0",
    )


def unreached() -> PathHops:
    return dataclasses.replace(path(), reached=False, mtu=None)
