"""`make demo` / `tcpwizard lab demo`: with no second host at hand, build the lab with a
classic mistake on the far end (a 256 KB receive-buffer limit), run `check` across it,
apply the printed fix on the far end, and check again."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from tcpwizard.context import Context
from tcpwizard.exitcodes import ExitCode
from tcpwizard.lab.lab import Lab, require_root
from tcpwizard.lab.serving import serving, tcpwizard_argv
from tcpwizard.lab.spec import LabSpec

MISTAKE = ("net.ipv4.tcp_rmem", "4096 65536 262144")


def _step(ctx: Context, text: str) -> None:
    print(f"\n=== {text}", file=ctx.stderr, flush=True)


def run_demo(ctx: Context, rtt_s: float = 0.050, rate_bps: float = 100e6) -> int:
    require_root()
    spec = LabSpec.symmetric(rate_bps, rtt_s, name=f"twdemo{os.getpid()}", sysctls_b=(MISTAKE,))
    with tempfile.TemporaryDirectory(prefix="tw-demo-") as tmp:
        env = {
            **os.environ,
            "TCPWIZARD_SYSCTL_DIR": str(Path(tmp, "sysctl.d")),
            "TCPWIZARD_STATE_DIR": str(Path(tmp, "state")),
            "TCPWIZARD_HISTORY": str(Path(tmp, "history.sqlite3")),
        }
        _step(
            ctx,
            f"building the lab: {rate_bps / 1e6:g} Mbit/s, {rtt_s * 1e3:g} ms RTT; "
            f"host b has {MISTAKE[0]} = {MISTAKE[1]!r}",
        )
        with Lab(spec) as lab, serving(lab, "b"):
            b = lab.addr_b
            _step(ctx, f"host a: tcpwizard check {b}   (tcpwizard serve runs on b)")
            first = lab.run("a", tcpwizard_argv("check", b), env=env, check=False)
            plan = Path(tmp, "report.json")
            _step(ctx, "host a: tcpwizard check --json (the plan for the fix)")
            with plan.open("w") as f:
                lab.run(
                    "a",
                    tcpwizard_argv("check", b, "--json", "--quick"),
                    env=env,
                    stdout=f,
                    check=False,
                )
            _step(ctx, "host b: tcpwizard fix --plan report.json --for peer --yes")
            lab.run(
                "b",
                tcpwizard_argv("fix", "--plan", str(plan), "--for", "peer", "--yes"),
                env=env,
                check=False,
            )
            _step(ctx, f"host a: tcpwizard check {b} --quick   (after the fix)")
            second = lab.run("a", tcpwizard_argv("check", b, "--quick"), env=env, check=False)
    ran = all(p.returncode in (0, 1, 2) for p in (first, second))
    return int(ExitCode.OK if ran else ExitCode.UNKNOWN)
