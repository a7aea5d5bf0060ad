"""Path probes: RTT, capacity, available bandwidth, SYN pairs, the hops of a path."""
