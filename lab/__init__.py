"""An emulated WAN on one machine: namespaces, a delay line or netem, scenarios. The
benchmarks that drive it are in the checkout's benchmarks/, not in this package."""

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
