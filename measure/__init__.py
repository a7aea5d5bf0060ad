"""What the path and TCP actually do: RTT, capacity, transfers, DRS, the serve end."""
