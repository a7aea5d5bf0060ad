"""What the hosts are configured to do: sysctls, NIC, routes, tcp_metrics.

Entry point: `audit(ctx_or_reader, target, bdp) -> HostAudit`."""

from tcpwizard.checks.audit import CHECKS, audit, check_ids
from tcpwizard.checks.sysctl import SysctlError, SysctlMissing, SysctlReader

__all__ = ["CHECKS", "SysctlError", "SysctlMissing", "SysctlReader", "audit", "check_ids"]
