"""serve's side: the server, its limits and transfers, the host lock, the host audit."""
