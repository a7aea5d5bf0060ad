"""`python -m benchmarks NAME [OPTIONS]`: the benches, from a checkout (benchmarks/cli.py)."""

from benchmarks.cli import main

raise SystemExit(main())
