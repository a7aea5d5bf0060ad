"""`tcpwizard lab up|status|exec|down|demo`: the emulated WAN as a user command. The
benchmarks that drive it live apart, in the checkout's benchmarks/ (never in the wheel)."""

from __future__ import annotations

import argparse
import subprocess
from collections.abc import Callable

from tcpwizard.context import Context
from tcpwizard.exitcodes import ExitCode, TcpWizardError, UsageError
from tcpwizard.lab import netns
from tcpwizard.lab.cliparse import NO_POLICER, SAME_BOTH_WAYS, build_spec, hops_from
from tcpwizard.lab.lab import Lab, down_all, lab_health, require_root, sweep_stale
from tcpwizard.lab.spec import SIDES, LabSpec, LinkSpec
from tcpwizard.lab.state import StateDir
from tcpwizard.units import format_bytes, format_rate, parse_duration, parse_rate


def describe_link(link: LinkSpec, queue_bytes: int) -> str:
    parts = [format_rate(link.rate_bps), f"{link.delay_s * 1e3:g} ms one-way"]
    if link.jitter_s:
        parts.append(f"±{link.jitter_s * 1e3:g} ms jitter")
    if link.loss:
        parts.append(f"{link.loss * 100:g}% loss")
    parts.append(f"queue {format_bytes(queue_bytes)}")
    if link.policer_bps:
        burst = f", burst 1 s + {format_bytes(link.policer_burst_bytes or 0)}"
        parts.append(f"policed at {format_rate(link.policer_bps)}{burst}")
    return ", ".join(parts)


def describe(lab: Lab) -> list[str]:
    spec = lab.spec
    lines = [
        f"lab {lab.name}: {lab.backend}" + (f" (pid {lab.pid})" if lab.pid else ""),
        f"  a  netns {lab.ns_a:<20} {lab.ifname} {lab.addr_a}  {lab.addr6_a}",
        f"  b  netns {lab.ns_b:<20} {lab.ifname} {lab.addr_b}  {lab.addr6_b}",
        f"  a->b {describe_link(spec.forward, spec.queue_bytes(spec.forward))}",
        f"  b->a {describe_link(spec.reverse, spec.queue_bytes(spec.reverse))}",
        f"  rtt {spec.rtt_s * 1e3:g} ms, mtu {spec.mtu}",
    ]
    lines += [f"  {side}: {key}={value}" for side in SIDES for key, value in spec.sysctls(side)]
    lines += hop_lines(lab)
    if (mb := spec.middlebox) is not None:
        what = [f"strips {'+'.join(mb.strip)}"] if mb.strip else []
        what += [f"clamps the MSS to {mb.mss}"] if mb.mss else []
        where = f"on r{mb.hop or 1}" if spec.hops else "on the wire"
        which = {"both": "SYN and SYN-ACK", "syn": "SYN", "syn-ack": "SYN-ACK"}[mb.way]
        lines.append(f"  middlebox {where}: {', '.join(what)} in every {which}")
    return lines


def hop_lines(lab: Lab) -> list[str]:
    from tcpwizard.lab import hops

    out = []
    for k, hop in enumerate(lab.spec.hops, 1):
        parts = [f"  r{k} netns {hops.router_ns(lab.name, k):<20} {hops.hop_address(lab.spec, k)}"]
        if hop.rtt_s:
            parts.append(f"+{hop.rtt_s * 1e3:g} ms rtt")
        if hop.rate_bps:
            parts.append(format_rate(hop.rate_bps))
        if hop.loss:
            parts.append(f"{hop.loss * 100:g}% loss toward b")
        if hop.mtu:
            parts.append(f"mtu {hop.mtu}")
        if hop.icmp_ratelimit_ms:
            parts.append(f"icmp ratelimit {hop.icmp_ratelimit_ms} ms")
        if hop.drop_frag_needed:
            parts.append("drops its frag-needed (PMTU black hole)")
        if hop.policer_bps:
            parts.append(f"polices toward b at {format_rate(hop.policer_bps)}")
        out.append(", ".join(parts))
    return out


def spec_from_args(args: argparse.Namespace) -> LabSpec:
    """The lab `lab up`'s flags describe (each already read by its argparse type)."""
    return build_spec(
        name=args.name,
        rtt_s=parse_duration(args.rtt),
        rate_bps=parse_rate(args.rate),
        loss=args.loss,
        jitter_s=parse_duration(args.jitter),
        queue=args.queue,
        mtu=args.mtu,
        reverse=args.reverse or SAME_BOTH_WAYS,
        sysctls=args.sysctl,
        backend=args.backend,
        hops=hops_from(args.hops, args.hop),
        policer=args.policer or NO_POLICER,
        middlebox=args.middlebox,
    )


def _up(args: argparse.Namespace, ctx: Context) -> int:
    spec = spec_from_args(args)
    require_root()
    lab = Lab(spec).up()
    print("\n".join(describe(lab)), file=ctx.stdout)
    print(f"use: tcpwizard lab exec --name {lab.name} a -- ping {lab.addr_b}", file=ctx.stderr)
    return int(ExitCode.OK)


def _status(args: argparse.Namespace, ctx: Context) -> int:
    require_root()
    records = StateDir().records()
    if not records:
        print("no labs", file=ctx.stderr)
    for record in records:
        lab = Lab.attach(record.name)
        lines = describe(lab)
        lines[0] += f" - {lab_health(record)}"
        print("\n".join(lines), file=ctx.stdout)
    return int(ExitCode.OK)


def _exec(args: argparse.Namespace, ctx: Context) -> int:
    argv = list(args.argv)
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if not argv:
        raise UsageError("lab exec: give a command after --, e.g. lab exec a -- ping 10.199.0.2")
    require_root()
    lab = Lab.attach(args.name)
    if not lab.is_up:
        raise UsageError(f"lab {lab.name} is broken (tcpwizard lab down --name {lab.name})")
    try:
        return lab.run(args.side, argv, check=False).returncode
    except FileNotFoundError as exc:
        raise UsageError(f"lab exec: {exc}") from exc


def _down(args: argparse.Namespace, ctx: Context) -> int:
    require_root()
    if args.all:
        names = down_all()
        names += sweep_stale(min_age_s=0)
        print(f"removed {len(names)} lab(s)" + (": " + " ".join(names) if names else ""),
              file=ctx.stderr)  # fmt: skip
        return int(ExitCode.OK)
    if StateDir().read(args.name) is not None:
        Lab.attach(args.name).down()
        print(f"lab {args.name} removed", file=ctx.stderr)
        return int(ExitCode.OK)
    # No record (lost state dir, crashed `up`): still remove namespaces of that name.
    leftovers = [ns for ns in (f"{args.name}-a", f"{args.name}-b") if netns.ns_exists(ns)]
    Lab(LabSpec.symmetric(name=args.name)).down()
    if leftovers:
        print(f"removed unrecorded namespaces {' '.join(leftovers)}", file=ctx.stderr)
    else:
        print(f"no lab named {args.name}", file=ctx.stderr)
    return int(ExitCode.OK)


def _demo(args: argparse.Namespace, ctx: Context) -> int:
    from tcpwizard.demo import run_demo

    return run_demo(ctx)


COMMANDS: dict[str, Callable[[argparse.Namespace, Context], int]] = {
    "up": _up,
    "status": _status,
    "exec": _exec,
    "down": _down,
    "demo": _demo,
}


def run(args: argparse.Namespace, ctx: Context) -> int:
    try:
        return COMMANDS[args.lab_command](args, ctx)
    except subprocess.TimeoutExpired as exc:
        raise TcpWizardError(f"lab: a system command hung: {exc}", ExitCode.UNKNOWN) from exc
