"""What a plan file may make `tcpwizard fix` do as root — and nothing else.

A plan is data that may come from another host (`fix --plan report.json --for peer`), so it is
treated as untrusted: only TCP tuning sysctls with plain values, `ip route change|replace` of
an existing route that keeps its gateway and device, and `ip tcp_metrics flush|delete` of an
address. Anything else is refused with a one-line FixError before anything changes.
"""

from __future__ import annotations

import ipaddress
import itertools
import re
import shlex
import subprocess
from dataclasses import dataclass

from tcpwizard.checks.model import Fix
from tcpwizard.exitcodes import ExitCode, TcpWizardError


class FixError(TcpWizardError):
    """A plan or backup that cannot be used (bad JSON, a refused change, nothing to roll
    back...)."""

    exit_code = ExitCode.DATA_ERROR


_KEY_RE = re.compile(r"[a-z0-9_]+(\.[a-z0-9_-]+)+")
_VALUE_RE = re.compile(r"[A-Za-z0-9_. -]{1,200}")
_TOKEN_RE = re.compile(r"[A-Za-z0-9_.:/%-]{1,64}")
ALLOWED_CORE_SYSCTLS = frozenset(
    {
        "net.core.rmem_max",
        "net.core.wmem_max",
        "net.core.rmem_default",
        "net.core.wmem_default",
        "net.core.default_qdisc",
        "net.core.netdev_max_backlog",
    }
)
# Route attributes a route fix may carry (ip-route(8)); `via` and `dev` must stay as they are.
_ROUTE_VALUE_WORDS = frozenset(
    {
        "via",
        "dev",
        "proto",
        "scope",
        "src",
        "metric",
        "window",
        "rtt",
        "rttvar",
        "initcwnd",
        "initrwnd",
        "mtu",
        "advmss",
        "table",
    }
)
_ROUTE_FLAG_WORDS = frozenset({"onlink"})
# Words `ip route show` prints about a route's state that `ip route replace` does not accept.
_STATE_FLAGS = frozenset(
    {"linkdown", "dead", "offload", "trap", "rt_offload", "rt_trap", "pervasive"}
)


def check_sysctl(key: str, value: str) -> None:
    if not _KEY_RE.fullmatch(key) or not (
        key in ALLOWED_CORE_SYSCTLS or key.startswith("net.ipv4.tcp_")
    ):
        raise FixError(f"refusing sysctl {key!r}: fixes only touch TCP tuning settings")
    if not _VALUE_RE.fullmatch(value):
        raise FixError(f"refusing value {value!r} for {key}: not a plain sysctl value")


def split_command(command: str) -> list[str]:
    try:
        argv = shlex.split(command)
    except ValueError as exc:
        raise FixError(f"unreadable command {command!r}: {exc}") from None
    if not argv or not all(_TOKEN_RE.fullmatch(a) for a in argv):
        raise FixError(f"refusing to run {command!r}: unexpected characters")
    return argv


@dataclass(frozen=True)
class RouteCommand:
    argv: list[str]
    family: str  # "-4" or "-6"
    prefix: str


def _family(prefix: str, argv: list[str]) -> str:
    if argv[1:2] in (["-4"], ["-6"]):
        return argv[1]
    return "-6" if ":" in prefix else "-4"


def show_route(family: str, prefix: str) -> dict[str, str] | None:
    """The route for exactly `prefix` as `ip route replace` arguments (word -> value), with
    its line under key ""; None when there is none."""
    try:
        out = subprocess.run(
            ["ip", family, "route", "show", "exact", prefix],
            capture_output=True,
            text=True,
            check=False,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise FixError(f"cannot read routes: {exc}") from None
    lines = out.stdout.strip().splitlines()
    if out.returncode != 0 or not lines:
        return None
    words = [w for w in lines[0].split() if w not in _STATE_FLAGS]
    attrs = {"": " ".join(words)}
    for word, value in itertools.pairwise(words):
        if word in ("via", "dev"):
            attrs[word] = value
    return attrs


def route_command(fix: Fix) -> tuple[RouteCommand, dict[str, str]]:
    """The validated `ip route change|replace` of a route fix, and the route it changes."""
    argv = split_command(fix.command)
    body = argv[2:] if argv[1:2] in (["-4"], ["-6"]) else argv[1:]
    if argv[0] != "ip" or body[:1] != ["route"] or body[1:2] not in (["change"], ["replace"]):
        raise FixError(f"refusing to run {fix.command!r}: not an 'ip route change' fix")
    prefix = body[2] if len(body) > 2 else ""
    if prefix != fix.key.removeprefix("route:"):
        raise FixError(f"route fix {fix.id!r} changes {prefix!r}, not its key {fix.key!r}")
    rest, attrs = body[3:], {}
    i = 0
    while i < len(rest):
        word = rest[i]
        if word in _ROUTE_FLAG_WORDS:
            i += 1
            continue
        if word not in _ROUTE_VALUE_WORDS or i + 1 >= len(rest):
            raise FixError(f"refusing route attribute {word!r} in {fix.command!r}")
        attrs[word] = rest[i + 1]
        i += 2
    family = _family(prefix, argv)
    current = show_route(family, prefix)
    if current is None:
        raise FixError(f"route fix {fix.id!r}: there is no route {prefix} to change here")
    for word in ("via", "dev"):
        if word in attrs and attrs[word] != current.get(word):
            raise FixError(
                f"refusing route fix {fix.id!r}: it would move {prefix} from {word} "
                f"{current.get(word)} to {attrs[word]}"
            )
    return RouteCommand(argv, family, prefix), current


def metrics_command(fix: Fix) -> list[str]:
    """`ip [-4|-6] tcp_metrics flush [all|ADDR]` or `delete ADDR`, validated."""
    argv = split_command(fix.command)
    body = argv[2:] if argv[1:2] in (["-4"], ["-6"]) else argv[1:]
    ok = argv[0] == "ip" and body[:1] == ["tcp_metrics"] and len(body) in (2, 3)
    if ok and body[1] == "flush" and (len(body) == 2 or body[2] == "all"):
        return argv
    if ok and body[1] in ("flush", "delete") and len(body) == 3:
        try:
            ipaddress.ip_address(body[2])
        except ValueError:
            ok = False
        if ok:
            return argv
    raise FixError(f"refusing to run {fix.command!r}: not an 'ip tcp_metrics' fix")
