"""The available-bandwidth streams through a real token bucket (nftables' `limit`, the lab's
policer) that a first ladder emptied, as a transfer empties it before `check` measures what is
free: the stream sent again says bucket, and the path does not read as shared
(measure/probes/availbw.py bucket_dropped; the FIFO side is tests/test_cross_traffic_lab.py)."""

from __future__ import annotations

import json
import sys

import pytest

from tcpwizard.lab import LabSpec
from tcpwizard.lab.serving import serving
from tests.lab_fixtures import LabFactory

pytestmark = pytest.mark.lab
POLICED = LabSpec.symmetric(100e6, 0.030, policer_bps=20e6)

# Two ladders back to back: the first spends the bucket's tokens, the second starts with
# what the pause between them refilled.
SCRIPT = """
import json, sys
from tcpwizard.measure.probes.availbw import measure_available
from tcpwizard.measure.wire.control import ControlClient
c = ControlClient(sys.argv[1], 5301)
s = c.udp_socket()
out = []
for _ in range(2):
    r = measure_available(c, s, 96.5e6, 0.030)
    out.append([r.estimate_bps, r.loaded, r.note])
print(json.dumps(out))
"""


def test_streams_through_an_emptied_bucket_read_a_bucket_not_sharing(
    lab_factory: LabFactory,
) -> None:
    lab = lab_factory(POLICED)
    with serving(lab, "b"):
        proc = lab.run(
            "a", [sys.executable, "-c", SCRIPT, lab.addr_b],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    first, second = json.loads(proc.stdout)
    est, loaded, note = second
    assert "token bucket" in note, (first, second)
    assert loaded == 0 and est >= 0.9 * 96.5e6, second
