"""One module per CLI command, each with `run(args, ctx) -> int`."""
