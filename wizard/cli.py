"""The argparse parser: every command and flag, and nothing else (it also feeds the
completion generator). Each command's logic lives in tcpwizard.commands.<name>.

Why one module of this size: every command and flag in one tree, from which the completions
and the man page are generated; each command's logic is elsewhere.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable, Sequence
from typing import NoReturn

from tcpwizard import __version__, argtypes
from tcpwizard.exitcodes import UsageError
from tcpwizard.measure.wire import spec
from tcpwizard.output import registry

TRANSFER_MODES = spec.MODES
DEFAULT_PORT = spec.SERVE_PORT
IPERF3_PORT = spec.IPERF3_PORT


class Parser(argparse.ArgumentParser):
    """argparse exits 2 on bad usage, which is CRITICAL in the plugin convention; raise
    instead so main() maps it to ExitCode.USAGE with a one-line message."""

    def error(self, message: str) -> NoReturn:
        # main() prints "tcpwizard: error: ..."; repeating the program name reads as a stutter.
        where = self.prog.partition(" ")[2]
        raise UsageError(f"{where}: {message}" if where else message)

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        return super().parse_known_args(_join_negative_values(args), namespace)


_OPTION_VALUE = re.compile(r"-\d.*")


def _join_negative_values(args: Sequence[str] | None) -> list[str] | None:
    """`--rtt -5ms` -> `--rtt=-5ms`: argparse takes '-5ms' for an option and says only
    "expected one argument"; joined, the value reaches its type and gets a clear message."""
    if args is None:
        return None
    out: list[str] = []
    for tok in args:
        if (
            out
            and _OPTION_VALUE.fullmatch(tok)
            and out[-1].startswith("--")
            and "=" not in out[-1]
            and out[-1] != "--"
        ):
            out[-1] = f"{out[-1]}={tok}"
        else:
            out.append(tok)
    return out


def _add_output_flags(p: argparse.ArgumentParser, *kinds: str) -> None:
    """--format: the formats that render every document kind the command prints."""
    p.add_argument(
        "--format", choices=registry.names_for(*kinds), default="text", help="output format"
    )
    p.add_argument(
        "--json", action="store_const", const="json", dest="format", help="same as --format json"
    )
    p.add_argument("--no-color", action="store_true", help="plain text without colours")


def _add_target_flags(p: argparse.ArgumentParser, host_required: bool) -> None:
    if host_required:
        p.add_argument(
            "host", type=argtypes.host, help="the far end: a host name or an IPv4/IPv6 literal"
        )
    else:
        p.add_argument(
            "host",
            nargs="?",
            type=argtypes.host_or_url,
            help="the far end (omit for a local audit only), or an http(s):// URL to "
            "download from a web server",
        )
    p.add_argument(
        "--port",
        type=argtypes.port,
        default=DEFAULT_PORT,
        help=f"tcpwizard serve port ({DEFAULT_PORT})",
    )
    p.add_argument("--secret-file", help="file holding the shared secret of the serve end")
    p.add_argument(
        "--tcp-port", type=argtypes.port, help="without serve: an open TCP port for RTT probes"
    )


def _add_path_hint_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--rtt",
        type=argtypes.duration("ms"),
        help="path round-trip time to judge buffers against, e.g. 50ms",
    )
    p.add_argument(
        "--bandwidth",
        type=argtypes.rate,
        help="path bottleneck rate to judge buffers against, e.g. 1gbit",
    )


def _add_transfer_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--modes",
        help="comma list of " + ",".join(TRANSFER_MODES) + " (default: a set that answers fast)",
    )
    p.add_argument(
        "--streams",
        type=int,
        default=1,
        help=f"parallel streams, {spec.MIN_STREAMS}-{spec.MAX_STREAMS}",
    )
    length = p.add_mutually_exclusive_group()
    length.add_argument(
        "--duration", type=argtypes.duration("s"), help="length of each transfer, e.g. 3s"
    )
    length.add_argument(
        "--bytes", dest="nbytes", type=argtypes.size, help="bytes per transfer, e.g. 128MB"
    )
    p.add_argument(
        "--direction",
        choices=("up", "down", "both"),
        help="up: to HOST; down: from HOST (transfer: up; check: both, the way back with "
        "autotune only)",
    )
    p.add_argument(
        "--force-buffers",
        action="store_true",
        help="as root: SO_RCVBUFFORCE/SO_SNDBUFFORCE to measure tuned throughput before fixing",
    )


def _add_check(sub: argparse._SubParsersAction[Parser]) -> None:
    p = sub.add_parser("check", help="audit, measure and diagnose (local audit without HOST)")
    _add_target_flags(p, host_required=False)
    _add_path_hint_flags(p)
    _add_transfer_flags(p)
    _add_output_flags(p, "check")
    p.add_argument(
        "--hops",
        action="store_true",
        help="also probe the hops (as `tcpwizard path`): where the RTT jumps, where loss "
        "begins, the path MTU and a PMTU black hole, with its fix",
    )
    _add_hop_flags(p, prefix="hops-")
    _add_plot_flag(p)
    p.add_argument(
        "--try-streams",
        action="store_true",
        help="when loss holds one stream down, also measure the advised number of parallel "
        f"streams (up to {spec.MAX_STREAMS}) beside the one stream, in the same run",
    )
    p.add_argument(
        "--avail",
        action="store_true",
        help="also measure what cross traffic leaves free of the capacity each way the check "
        "runs (periodic UDP streams to serve and back, ~1-2 s a way): a shared path is then "
        "named `cross-traffic`",
    )
    # Given --port, check uses serve only; given --iperf3-port, iperf3 only; neither: serve,
    # then iperf3 at its default port, then the open --tcp-port (a prediction).
    p.set_defaults(port=None)
    p.add_argument(
        "--iperf3-port",
        type=argtypes.port,
        help=f"use the iperf3 server (iperf3 -s) at this port (tried at {IPERF3_PORT} "
        "when no serve answers)",
    )
    p.add_argument(
        "--allow-predicted",
        action="store_true",
        help="exit 0-2 on a verdict without a test transfer (default: UNKNOWN, exit 3)",
    )
    p.add_argument("--quick", action="store_true", help="a shorter run (about 5 s)")
    p.add_argument("--fix", action="store_true", help="plan the fixes; apply them with --yes")
    p.add_argument("--yes", action="store_true", help="with --fix: apply without asking")
    p.add_argument("--warning", help="Nagios warning threshold, e.g. 100mbit or gap:50%%")
    p.add_argument("--critical", help="Nagios critical threshold, e.g. 10mbit or gap:90%%")
    p.add_argument("--no-history", action="store_true", help="do not record this run")
    p.add_argument(
        "--pcap",
        metavar="FILE",
        help="judge the transfers in a capture file (pcap or pcapng, e.g. from tcpdump) "
        "instead of measuring; HOST, if given, picks the flows with that address",
    )
    p.add_argument(
        "--ssh",
        action="store_true",
        help="HOST is [user@]host: start a one-time serve there over SSH for this check "
        "(needs python3 >= 3.9 there; no root, nothing left behind)",
    )
    p.add_argument(
        "--ssh-option",
        action="append",
        default=[],
        metavar="OPT",
        help="with --ssh, passed to ssh: Key=Value as -o Key=Value, '-i FILE' as it is "
        "(repeatable)",
    )


def _add_conns(sub: argparse._SubParsersAction[Parser]) -> None:
    p = sub.add_parser(
        "conns", help="why each live TCP connection of this host is as fast as it is"
    )
    p.add_argument(
        "--port", type=argtypes.port, help="only connections with this port (either end)"
    )
    p.add_argument("--address", help="only connections with this address or prefix (either end)")
    p.add_argument("--process", help="only connections of this process (pid or part of its name)")
    p.add_argument("--busy", action="store_true", help="only connections that moved data")
    p.add_argument(
        "--interval",
        type=argtypes.duration("s"),
        default="1s",
        help="how long each connection is watched for its verdict (1s)",
    )
    p.add_argument(
        "--bandwidth",
        type=argtypes.rate,
        help="size the buffer fixes for this rate at each connection's RTT (1gbit)",
    )
    p.add_argument("--watch", action="store_true", help="refresh every interval until Ctrl-C")
    p.add_argument(
        "--count",
        type=argtypes.int_range(0, 1_000_000),
        default=0,
        help="with --watch: stop after this many rounds (0: never)",
    )
    p.add_argument(
        "--hops",
        action="store_true",
        help="where a handshake lost window scaling, send SYNs with this host's options "
        "hop by hop toward that peer (root) to find a device that strips it",
    )
    _add_output_flags(p, "conns")


def _add_calc(sub: argparse._SubParsersAction[Parser]) -> None:
    p = sub.add_parser("calc", help="bandwidth-delay product and recommended buffer sizes")
    p.add_argument(
        "--rtt",
        required=True,
        type=argtypes.duration("ms"),
        help="round-trip time, e.g. 150ms, 800us, 0.2s",
    )
    p.add_argument(
        "--bandwidth",
        required=True,
        type=argtypes.rate,
        help="bottleneck rate, e.g. 500mbit, 1gbit",
    )
    _add_output_flags(p, "calc")


def _add_serve(sub: argparse._SubParsersAction[Parser]) -> None:
    p = sub.add_parser("serve", help="the far end: reflect probes and take part in transfers")
    p.add_argument(
        "--bind", type=argtypes.host, default="::", help="address to listen on (default: all)"
    )
    p.add_argument("--port", type=argtypes.listen_port, default=DEFAULT_PORT)
    p.add_argument("--secret-file", help="require clients to prove they know this secret")
    p.add_argument(
        "--max-duration",
        type=argtypes.seconds(0.1, 3600),
        default=30.0,
        help="longest test, seconds",
    )
    p.add_argument(
        "--max-bytes", type=argtypes.size, default="2GB", help="most bytes one test may move"
    )
    p.add_argument(
        "--max-clients", type=argtypes.int_range(1, 256), default=4, help="concurrent clients"
    )
    p.add_argument("--once", action="store_true", help="exit after the first client")
    p.add_argument(
        "--lock",
        help="one measurement at a time on this host: hold this lock file during a client's "
        "check and answer others 'busy, retry after N s' (exporter --lock shares it)",
    )


def _add_hop_flags(p: argparse.ArgumentParser, prefix: str = "") -> None:
    """Options of `path` (with prefix "hops-" on `check --hops`)."""
    p.add_argument(
        f"--{prefix}method",
        dest="method" if not prefix else "hops_method",
        choices=("auto", "icmp", "udp", "tcp"),
        default="auto",
        help="probe with ICMP echo (raw socket, root), UDP to a closed port or TCP SYN to "
        "an open port (IP_RECVERR, no root); auto: icmp as root, else udp",
    )
    p.add_argument(
        f"--{prefix}count",
        dest="count" if not prefix else "hops_count",
        type=argtypes.int_range(1, 1000),
        default=None,
        help="exactly this many probes per hop (default: 10, then more where loss is not "
        "yet placed, within the max time); more tell small loss apart",
    )
    p.add_argument(
        f"--{prefix}interval",
        dest="interval" if not prefix else "hops_interval",
        type=argtypes.duration("s"),
        default="20ms",
        help="between two probes, any hop (20ms)",
    )
    p.add_argument(
        f"--{prefix}max-time",
        dest="max_time" if not prefix else "hops_max_time",
        type=argtypes.duration("s"),
        default="30s",
        help="stop sending probes after this long (30s)",
    )


def _add_path(sub: argparse._SubParsersAction[Parser]) -> None:
    p = sub.add_parser(
        "path", help="the hops: where the RTT jumps, where loss begins, the path MTU"
    )
    p.add_argument(
        "host", type=argtypes.host, help="the far end: a host name or an IPv4/IPv6 literal"
    )
    _add_hop_flags(p)
    p.add_argument(
        "--port",
        type=argtypes.port,
        help="tcp: the open port to send SYNs to (e.g. 22, 5301); udp: the first "
        "destination port (33434)",
    )
    p.add_argument(
        "--timeout",
        type=argtypes.duration("s"),
        default="1s",
        help="how long to wait for an answer (1s)",
    )
    p.add_argument(
        "--max-hops", type=argtypes.int_range(1, 64), default=30, help="largest TTL (30)"
    )
    p.add_argument("--no-mtu", action="store_true", help="skip the path MTU search")
    p.add_argument("-n", "--numeric", action="store_true", help="do not look up hop names")
    fam = p.add_mutually_exclusive_group()
    fam.add_argument("-4", dest="ipv4", action="store_true", help="IPv4 only")
    fam.add_argument("-6", dest="ipv6", action="store_true", help="IPv6 only")
    _add_output_flags(p, "path")


def _add_probe(sub: argparse._SubParsersAction[Parser]) -> None:
    p = sub.add_parser("probe", help="measure the path: RTT, loss, bottleneck capacity, BDP")
    _add_target_flags(p, host_required=True)
    p.add_argument(
        "--budget",
        type=argtypes.duration("s"),
        default=f"{spec.PROBE_BUDGET_S:g}s",
        help="time budget for the whole characterization",
    )
    _add_output_flags(p, "probe")


def _add_transfer(sub: argparse._SubParsersAction[Parser]) -> None:
    p = sub.add_parser("transfer", help="test transfers with each buffer strategy (incl. DRS)")
    _add_target_flags(p, host_required=True)
    _add_path_hint_flags(p)
    _add_transfer_flags(p)
    _add_output_flags(p, "transfer")
    _add_plot_flag(p)


def _add_plot_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--plot",
        metavar="DIR",
        help="time-sequence graphs (tcptrace/xplot style: data, ACKs, window edge, "
        "retransmissions) of every flow, PNG and SVG into DIR; captures with tcpdump (root), "
        "or draws the flows of --pcap FILE",
    )


def _add_fix(sub: argparse._SubParsersAction[Parser]) -> None:
    p = sub.add_parser("fix", help="apply the fixes of the last check, or roll them back")
    p.add_argument("--rollback", action="store_true", help="restore the values saved by --fix")
    p.add_argument("--yes", action="store_true", help="apply without asking")
    p.add_argument("--plan", help="a JSON report from `check --json` to take the fixes from")
    p.add_argument(
        "--for",
        dest="role",
        choices=("local", "peer"),
        default="local",
        help="whose fixes to apply: 'peer' when run on the far end with the near end's report",
    )
    _add_output_flags(p, "fix-plan", "fix-result")


def _lab_flag(flag: str) -> Callable[[str], object]:
    """The type of a `lab` flag, read by the lab's own grammar (tcpwizard.lab.cliparse),
    imported when a lab command is parsed so that no other command loads the lab package."""

    def check(text: str) -> object:
        from tcpwizard.lab.cliparse import FLAG_TYPES

        return argtypes.parsed(FLAG_TYPES[flag])(text)

    check.__name__ = flag
    return check


def _add_lab(sub: argparse._SubParsersAction[Parser]) -> None:
    p = sub.add_parser("lab", help="an emulated WAN on this machine (root)")
    lab = p.add_subparsers(dest="lab_command", metavar="LAB_COMMAND", parser_class=Parser)
    lab.required = True
    up = lab.add_parser("up", help="build two hosts a and b joined by an emulated bottleneck")
    up.add_argument(
        "--name",
        type=_lab_flag("name"),
        default="tw",
        help="lab name (namespaces are NAME-a, NAME-b)",
    )
    up.add_argument(
        "--rtt",
        type=argtypes.duration("ms", zero_ok=True),
        default="50ms",
        help="round-trip time, e.g. 100ms",
    )
    up.add_argument(
        "--rate", type=argtypes.rate, default="100mbit", help="bottleneck rate, e.g. 100mbit"
    )
    up.add_argument(
        "--loss",
        type=argtypes.share,
        default="0%",
        help="random loss per direction, e.g. 0.5%%",
    )
    up.add_argument(
        "--jitter",
        type=argtypes.duration("ms", zero_ok=True),
        default="0ms",
        help="delay jitter, e.g. 2ms",
    )
    up.add_argument(
        "--queue",
        type=_lab_flag("queue"),
        default="1bdp",
        help="drop-tail queue: 1bdp, 0.5bdp or bytes",
    )
    up.add_argument("--mtu", type=argtypes.mtu, default=1500, help="link MTU, 576-9000 bytes")
    up.add_argument(
        "--reverse",
        type=_lab_flag("reverse"),
        help="a different b->a direction, e.g. 'rate=10mbit,loss=1%%,delay=40ms' (one-way), "
        "'policer=off'",
    )
    up.add_argument(
        "--policer",
        type=_lab_flag("policer"),
        metavar="rate=RATE[,burst=SIZE]",
        help="a token-bucket policer (nftables limit ... drop) at the far end of the "
        "bottleneck, each way unless --reverse says otherwise, e.g. 'rate=20mbit,burst=64KB'",
    )
    up.add_argument(
        "--sysctl",
        type=_lab_flag("sysctl"),
        action="append",
        default=[],
        metavar="HOST:KEY=VALUE",
        help="per-host sysctl, e.g. a:net.ipv4.tcp_rmem='4096 65536 131072' (repeatable)",
    )
    up.add_argument("--backend", choices=("auto", "netem", "delayline"), default="auto")
    up.add_argument(
        "--hops",
        type=argtypes.int_range(0, 16),
        default=0,
        help="router namespaces between a and b (real kernel forwarding); the bottleneck "
        "is the link a-r1",
    )
    up.add_argument(
        "--hop",
        type=_lab_flag("hop"),
        action="append",
        default=[],
        metavar="K:SETTINGS",
        help="hop K's link and ICMP, e.g. '2:rtt=40ms,loss=1%%,mtu=1500,icmp-ratelimit=1s,"
        "drop-frag-needed' (repeatable); a policer toward b: '2:policer=20mbit, "
        "policer-burst=64KB'",
    )
    up.add_argument(
        "--middlebox",
        type=_lab_flag("middlebox"),
        metavar="SETTINGS",
        help="a device that rewrites every SYN and SYN-ACK (nftables), e.g. "
        "'strip=window+sack-perm,mss=1200,hop=1' (strip: window, sack-perm, timestamp; "
        "hop: the router it sits on, with --hops; way=syn or syn-ack: only those)",
    )
    lab.add_parser("status", help="show running labs")
    ex = lab.add_parser("exec", help="run a command inside host a or b")
    ex.add_argument("--name", type=_lab_flag("name"), default="tw")
    ex.add_argument("side", choices=("a", "b"))
    ex.add_argument("argv", nargs=argparse.REMAINDER, help="-- CMD ARGS...")
    down = lab.add_parser("down", help="remove the lab (all of it, even half-built)")
    down.add_argument("--name", type=_lab_flag("name"), default="tw")
    down.add_argument("--all", action="store_true", help="remove every tcpwizard lab")
    lab.add_parser("demo", help="build a lab with a mistuned host and run check across it")


def _add_tui(sub: argparse._SubParsersAction[Parser]) -> None:
    p = sub.add_parser("tui", help="the check, live, in an interactive terminal UI")
    p.add_argument(
        "host",
        nargs="?",
        type=argtypes.host,
        help="the far end to check at start (or enter it later)",
    )
    p.add_argument(
        "--port",
        type=argtypes.port,
        default=DEFAULT_PORT,
        help=f"tcpwizard serve port ({DEFAULT_PORT})",
    )
    p.add_argument("--secret-file", help="file holding the shared secret of the serve end")
    p.add_argument("--quick", action="store_true", help="shorter runs (about 5 s)")
    p.add_argument(
        "--hops",
        action="store_true",
        help="also probe the hops (as `tcpwizard path`): the path screen's hop table",
    )
    p.add_argument(
        "--capture",
        action="store_true",
        help="capture the test transfers with tcpdump (root) for the transfer screen's "
        "time-sequence graph",
    )


def _add_exporter(sub: argparse._SubParsersAction[Parser]) -> None:
    p = sub.add_parser("exporter", help="serve Prometheus /metrics for a list of targets")
    p.add_argument("--listen", default="127.0.0.1:9788", help="ADDR:PORT for /metrics")
    p.add_argument(
        "--max-clients",
        type=argtypes.int_range(1, 256),
        default=16,
        help="HTTP connections served at once; more get 503 (16)",
    )
    p.add_argument("--targets", help="file: one 'host[:port] [key=value...]' a line")
    p.add_argument(
        "--mesh",
        help="site mesh file (same format): check every other host in it, each in its own "
        "slot of the interval, so no two checks run through one host at once",
    )
    p.add_argument("--self", dest="self_host", help="with --mesh: this host's line in the file")
    p.add_argument(
        "--lock",
        help="one measurement at a time on this host: the lock file serve --lock also uses "
        "(a busy host or far end means: wait and try again)",
    )
    p.add_argument(
        "--interval",
        type=argtypes.duration("s"),
        default="15m",
        help="how often each target is checked",
    )
    p.add_argument("--quick", action="store_true", help="the short check for each target")
    p.add_argument(
        "--direction",
        choices=("up", "down", "both"),
        help="up: to each target only (a full mesh still covers both ways); default both",
    )
    p.add_argument("--secret-file", help="shared secret of the targets' serve")
    p.add_argument("--no-history", action="store_true", help="do not record checks")


def _add_history(sub: argparse._SubParsersAction[Parser]) -> None:
    p = sub.add_parser("history", help="the trend of a path: RTT, capacity, throughput, verdict")
    p.add_argument("host", nargs="?", help="target (omit to list recorded targets)")
    p.add_argument("--since", help="only this recent, e.g. 24h, 7d")
    p.add_argument("--db", help="history database (default: ~/.local/state/tcpwizard)")
    p.add_argument("--no-plot", action="store_true", help="table only")
    p.add_argument(
        "--buffer",
        action="store_true",
        help="the socket buffer an application should ask for on this path (from the last "
        "measured BDPs), as shell, C and Python",
    )
    _add_output_flags(p, "history", "buffer")


def build_parser() -> Parser:
    parser = Parser(
        prog="tcpwizard",
        description="Why is my TCP transfer slow, how fast could it be, and what is the fix?",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    sub.required = True
    for add in (
        _add_check,
        _add_conns,
        _add_calc,
        _add_probe,
        _add_path,
        _add_transfer,
        _add_serve,
        _add_fix,
        _add_lab,
        _add_exporter,
        _add_history,
        _add_tui,
    ):
        add(sub)
    return parser
