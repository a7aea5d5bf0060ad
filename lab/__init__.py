"""An emulated WAN on one machine: namespaces, a delay line or netem, scenarios, benchmarks."""
