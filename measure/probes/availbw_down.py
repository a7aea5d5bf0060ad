"""Available bandwidth on the way back: the same ladder of periodic streams, sent by serve.

Others' traffic from the far end toward this host shares the download's bottleneck and
leaves the upload's streams (measure/probes/availbw.py) untouched. serve sends each stream
as a paced probe train (groups of availbw.BURST packets at the stream's rate), stamping every
packet with its send time; this host takes the kernel's arrival time of each. The one-way
delays (arrival - send; the two clocks' offset cancels in a slope) then trend as the
upload's do, and the same estimate reads them.
"""

from __future__ import annotations

import socket
import time

from tcpwizard.measure.probes import capacity
from tcpwizard.measure.probes.availbw import (
    BURST,
    STREAM_S,
    AvailBandwidth,
    StreamResult,
    run_ladder,
    stream_packets,
    stream_result,
)
from tcpwizard.measure.wire import udp
from tcpwizard.measure.wire.control import ControlClient

# How long the registration of this host's UDP address may take: three tries of
# capacity.ensure_registered's 0.3 s.
REGISTER_S = 1.0
# What a stream's last packet may take to arrive after serve sent it: the wait for the
# stream ends this long after its planned length plus a round trip. The upload's streams
# wait as long for serve's first arrival report (availbw._arrivals' 0.5 s), so both ways
# count a packet later than that as lost, as a full queue's would be.
ARRIVAL_SLACK_S = 0.5

# A stream has ended when nothing came for this long (download_arrivals' default: a train's
# packets come back to back or a group every few milliseconds).
QUIET_S = 0.1


class UdpNotRegistered(OSError):
    """serve never answered the registration of this host's UDP address."""


def measure_available_down(
    client: ControlClient,
    sock: socket.socket,
    capacity_bps: float,
    rtt_s: float,
    budget_s: float = 2.0,
    mtu: int = 1500,
    random_loss: float = 0.0,
) -> AvailBandwidth:
    """Streams at a ladder of rates up to capacity_bps from serve toward this host, within
    about budget_s: the available bandwidth on the way back. Raises UdpNotRegistered when
    serve cannot send to this host's UDP socket."""
    if not capacity.ensure_registered(client, sock, time.monotonic() + REGISTER_S):
        raise UdpNotRegistered("serve could not reach this host's UDP socket (UDP blocked?)")
    start = time.monotonic()  # the budget is the streams'
    size = udp.udp_payload_size(client.family, mtu)
    wire = udp.wire_bytes(client.family, size)

    def stream(share: float, length_s: float) -> tuple[StreamResult | None, int]:
        rate = share * capacity_bps
        count = stream_packets(rate, length_s, wire)
        deadline = time.monotonic() + count * wire * 8 / rate + rtt_s + ARRIVAL_SLACK_S
        # A pause between two groups of BURST is no end of the stream: on a slow path (under
        # ~1 Mbit/s) they come further apart than the usual 0.1 s.
        quiet_s = max(QUIET_S, 2 * BURST * wire * 8 / rate)
        got = capacity.download_arrivals(
            client, sock, size, rate, deadline, count, BURST, quiet_s=quiet_s
        )
        time.sleep(STREAM_S)  # the queue it built is gone (its last packet is in); others recover
        if got is None:
            return None, count
        tx, rx = got
        return stream_result(tx, rx, count, wire), count

    return run_ladder(stream, capacity_bps, budget_s, random_loss, start, "down")
