"""What the kernel shows of connections: TCP_INFO, SYNs, sockets, captures, host load."""
