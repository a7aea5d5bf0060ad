"""What the hosts are configured to do: sysctls, NIC, routes, tcp_metrics."""
