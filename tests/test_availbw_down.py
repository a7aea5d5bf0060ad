"""The available bandwidth on the way back (measure/probes/availbw_down.py) against a real
serve over loopback: serve sends the ladder's streams as paced trains, this host times
their arrivals, and a path with nothing else on it reads free."""

from __future__ import annotations

from tcpwizard.measure.probes.availbw import LADDER
from tcpwizard.measure.probes.availbw_down import measure_available_down
from tcpwizard.measure.wire.control import ControlClient
from tests.serve_helpers import running_server

# Well under what loopback carries, and slow enough that serve's pacing keeps the rate on a
# busy 2-core machine: every stream at 50-90 % of it passes with no queue.
CAPACITY_BPS = 100e6


def test_streams_sent_back_over_an_idle_loopback_read_it_free() -> None:
    with running_server() as srv, ControlClient("127.0.0.1", srv.port) as c:
        sock = c.udp_socket()
        try:
            av = measure_available_down(c, sock, CAPACITY_BPS, rtt_s=0.001, budget_s=2.0)
        finally:
            sock.close()
    assert av.direction == "down"
    assert av.streams >= len(LADDER), av  # every rung arrived and was read
    assert av.loaded == 0 and av.free_share == 1.0, av
    # the streams went at their rates: 1,800 packets or so for the six rungs at 60 ms
    assert av.packets >= 0.9 * sum(LADDER) * CAPACITY_BPS * 0.06 / (1500 * 8), av
    assert av.note == "", av
