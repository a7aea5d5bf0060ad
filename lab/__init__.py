"""An emulated WAN on one machine: namespaces, a delay line or netem, scenarios, benchmarks."""

from tcpwizard.lab.lab import DELAYLINE_MAX_RATE_BPS, Lab, down_all, sweep_stale
from tcpwizard.lab.netns import LabError
from tcpwizard.lab.spec import LabSpec, LinkSpec

__all__ = [
    "DELAYLINE_MAX_RATE_BPS",
    "Lab",
    "LabError",
    "LabSpec",
    "LinkSpec",
    "down_all",
    "sweep_stale",
]
