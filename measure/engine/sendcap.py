"""Hold the test sender's queue to its send buffer, as an application's is held.

The kernel stops taking a stream's data once its queued memory reaches the send buffer
(sk_sndbuf): what a sender may hold unacknowledged plus unsent is that buffer, and on a long
path the buffer / RTT law bounds its rate. Measured on this lab (388 Mbit/s x 83 ms, the
sender's tcp_wmem max 941 KB, CUBIC, IPv6; docs/bench-matrix-two-seeds.md, the eighth seed's
.13 and .182): iperf3 and a plain writer move 60-66 Mbit/s in every run; the tool's sender,
handing the kernel 4 MiB per send(), moved the same in half of its runs and 175-179 Mbit/s
in the other half, 2.6 MB in flight against the 0.96 MB buffer (`ss`: unacked 1,817 x 1,428
B, bytes sent less bytes acknowledged the same, nothing retransmitted). Which kernel path
lets one call past the buffer is not found; a figure the user's own application would not
get is not a measurement of their host.

So the writer holds itself to the buffer: no send() hands over more than the granted buffer
(getsockopt SO_SNDBUF, the kernel's sk_sndbuf), and on its 10 ms tick
(datapath.UNSENT_EVERY_S) it waits while the payload it holds (handed over less
acknowledged) is past that buffer. The kernel counts skb memory, more than the payload, so a
sender the kernel holds as it should meets neither bound. With both, 6 of 6 runs moved 60-67
Mbit/s, at most 1.35 x the buffer queued; on loopback the rates are unchanged
(docs/bench-transfer.md). Looked at on the tick, not per write: a TCP_INFO read per write
cost a quarter of four loopback streams' rate (64 -> 47 Gbit/s).
"""

from __future__ import annotations

import socket

from tcpwizard.measure.observe.tcpinfo import read_tcp_info

# The kernel itself appends to the tail segment without looking at the buffer, up to one
# segment of the GSO size (GSO_LEGACY_MAX_SIZE, 64 KiB): a sender at its buffer may hold
# this much past it with nothing wrong.
TAIL_SLACK = 65536
# How long to wait before looking again when the queue is past the buffer: one timer tick
# of a sleeping thread; the queue drains over an RTT of at least a millisecond on any WAN.
CAP_WAIT_S = 0.001


def send_room(sock: socket.socket, written: int) -> int | None:
    """How much the writer may hand the kernel per send() until the next look: its granted
    buffer, or 0 while the stream holds more payload unacknowledged plus unsent than that
    (`written` being all the writer handed this socket). None when the kernel does not say
    what was acknowledged, or the socket is closed: no bound of ours then."""
    try:
        acked = read_tcp_info(sock).get("bytes_acked")
        granted = sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF)
    except OSError:
        return None
    if acked is None:
        return None
    return 0 if written - int(acked) > granted + TAIL_SLACK else granted
