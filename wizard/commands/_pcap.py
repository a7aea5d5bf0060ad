"""`tcpwizard check --pcap FILE`: the verdict for a transfer in a capture file."""

from __future__ import annotations

import argparse
import ipaddress
from collections.abc import Callable

from tcpwizard.advice.capture import judge_capture
from tcpwizard.advice.conns import DEFAULT_RATE_BPS
from tcpwizard.checks.sysctl import SysctlReader
from tcpwizard.commands._output import emit
from tcpwizard.conns_report import SYSCTLS
from tcpwizard.context import Context
from tcpwizard.documents import CaptureDocument
from tcpwizard.exitcodes import ExitCode, TcpWizardError, UsageError
from tcpwizard.measure.observe.capture import CaptureError, CaptureSummary, read_capture
from tcpwizard.output import registry
from tcpwizard.units import parse_rate


class CaptureUnreadable(TcpWizardError):
    exit_code = ExitCode.UNKNOWN


def local_addresses() -> Callable[[str], bool]:
    """Whether an address belongs to this machine (its interfaces, in this namespace)."""
    import psutil

    mine: set[str] = set()
    try:
        for addrs in psutil.net_if_addrs().values():
            for a in addrs:
                mine.add(a.address.split("%", 1)[0])
    except (OSError, psutil.Error):
        pass

    def is_local(addr: str) -> bool:
        try:
            return str(ipaddress.ip_address(addr)) in mine
        except ValueError:
            return False

    return is_local


def _only_host(summary: CaptureSummary, host: str | None) -> CaptureSummary:
    if not host:
        return summary
    import dataclasses

    keep = tuple(d for d in summary.directions if host in (d.sender, d.receiver))
    return dataclasses.replace(summary, directions=keep)


def run_pcap(args: argparse.Namespace, ctx: Context) -> int:
    if args.format not in registry.names_for("capture"):
        raise UsageError("check --pcap prints " + " or ".join(registry.names_for("capture")))
    if args.host and "://" in args.host:
        raise UsageError("check --pcap takes a host address to pick its flows, not a URL")
    rate = parse_rate(args.bandwidth) if args.bandwidth else DEFAULT_RATE_BPS
    try:
        summary = read_capture(args.pcap)
    except CaptureError as exc:
        raise CaptureUnreadable(str(exc)) from None
    except OSError as exc:
        raise CaptureUnreadable(f"{args.pcap}: {exc.strerror or exc}") from None
    summary = _only_host(summary, args.host)
    reader = SysctlReader(ctx.sysctl_root)
    sysctls = {k: v for k in SYSCTLS if (v := reader.read_optional(k)) is not None}
    report = judge_capture(summary, local_addresses(), sysctls, rate)
    return emit(CaptureDocument.of(report), args, ctx)
