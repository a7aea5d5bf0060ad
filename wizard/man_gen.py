"""The man page, generated from the argparse parser like the completions, so it never lists
an option the tool does not have: `python -m tcpwizard.man_gen man/tcpwizard.1` (make man).
The committed page is installed with the package (share/man/man1) and a test fails when it
is stale. No date in it: the same parser always gives the same bytes."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tcpwizard import __version__
from tcpwizard.exitcodes import ExitCode

SUMMARY = "why a TCP transfer is slow, how fast it could be, and the exact fix"
EXIT_MEANINGS: dict[ExitCode, str] = {
    ExitCode.OK: "healthy: the path is the limit, or the audit found nothing to fix",
    ExitCode.WARNING: "a named limit (or a warning in the audit, or --fix left changes pending)",
    ExitCode.CRITICAL: "a limit that costs half or more of the tuned throughput",
    ExitCode.UNKNOWN: "could not complete (nothing answered, ssh failed, a prediction only)",
    ExitCode.USAGE: "bad command line",
    ExitCode.DATA_ERROR: "a plan or input file that is not valid",
    ExitCode.UNAVAILABLE: "a port, service or system facility could not be used",
    ExitCode.SOFTWARE: "an internal error (TCPWIZARD_DEBUG=1 shows the traceback)",
    ExitCode.NO_PERMISSION: "needs root (the lab, --fix --yes, --force-buffers)",
    ExitCode.CONFIG: "a configuration the tool cannot work with",
    ExitCode.INTERRUPTED: "interrupted (Ctrl-C)",
}
ENVIRONMENT = {
    "TCPWIZARD_SYSCTL_DIR": "where fix writes 60-tcpwizard.conf (default /etc/sysctl.d)",
    "TCPWIZARD_STATE_DIR": "where fix keeps its backup (default /var/lib/tcpwizard)",
    "TCPWIZARD_HISTORY": "the history database (default ~/.local/state/tcpwizard)",
    "TCPWIZARD_DEBUG": "set to 1: internal errors show their traceback",
}


def roff(text: str) -> str:
    """Plain text as roff: backslashes and hyphens escaped, no line read as a request."""
    text = text.replace("%%", "%").replace("\\", "\\e").replace("-", "\\-")
    lines = [("\\&" + ln if ln.startswith((".", "'")) else ln) for ln in text.splitlines()]
    return "\n".join(lines)


def _subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, str, argparse.ArgumentParser]]:
    """(name, help, parser) of each subcommand, in the parser's order."""
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            for name, sub in action.choices.items():
                found.append((name, helps.get(name, ""), sub))
    return found


def _metavar(action: argparse.Action) -> str:
    if action.metavar is not None:
        return str(action.metavar)
    if action.choices is not None:
        return "{" + ",".join(str(c) for c in action.choices) + "}"
    return action.dest.upper()


def _takes_value(action: argparse.Action) -> bool:
    return action.nargs != 0


def _synopsis(prog: str, parser: argparse.ArgumentParser) -> str:
    words = [f"\\fB{roff(prog)}\\fR"]
    if any(a.option_strings for a in parser._actions if not isinstance(a, argparse._HelpAction)):
        words.append("[\\fIoptions\\fR]")
    for action in parser._actions:
        if action.option_strings or isinstance(action, argparse._SubParsersAction):
            continue
        name = f"\\fI{roff(_metavar(action))}\\fR"
        if action.nargs == "?":
            name = f"[{name}]"
        elif action.nargs == argparse.REMAINDER:
            name = f"[{name}...]"
        words.append(name)
    if _subcommands(parser):
        words.append("\\fISUBCOMMAND\\fR ...")
    return " ".join(words)


def _options(parser: argparse.ArgumentParser) -> list[str]:
    out: list[str] = []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
            continue
        if action.option_strings:
            flags = ", ".join(f"\\fB{roff(s)}\\fR" for s in action.option_strings)
            if _takes_value(action):
                flags += f" \\fI{roff(_metavar(action))}\\fR"
        else:
            flags = f"\\fI{roff(_metavar(action))}\\fR"
        text = action.help or ""
        shown = "default" in text or f"({action.default})" in text
        has_default = action.default not in (None, False, [], argparse.SUPPRESS)
        if has_default and not shown and _takes_value(action):
            text += f" (default: {action.default})"
        out += [".TP", flags, roff(text)]
    return out


def _command(prog: str, help_text: str, parser: argparse.ArgumentParser) -> list[str]:
    out = [f'.SS "{roff(prog)}"', _synopsis(prog, parser), ".PP", roff(help_text)]
    out += _options(parser)
    for name, sub_help, sub in _subcommands(parser):
        out += _command(f"{prog} {name}", sub_help, sub)
    return out


def generate() -> str:
    from tcpwizard.cli import build_parser  # the generator is part of the app, the core is not

    parser = build_parser()
    lines = [
        f'.TH TCPWIZARD 1 "" "tcpwizard {__version__}" "User Commands"',
        ".SH NAME",
        f"tcpwizard \\- {roff(SUMMARY)}",
        ".SH SYNOPSIS",
        "\\fBtcpwizard\\fR \\fICOMMAND\\fR [\\fIoptions\\fR]",
        ".br",
        "\\fBtcpwizard check\\fR [\\fIHOST\\fR | \\fIuser\\fR@\\fIhost\\fR \\fB\\-\\-ssh\\fR]",
        ".SH DESCRIPTION",
        roff(parser.description or ""),
        ".PP",
        roff(
            "check HOST audits both hosts' TCP settings, measures the path (RTT, bottleneck "
            "capacity, bandwidth-delay product), runs short test transfers with each buffer "
            "strategy, names the one factor that limits throughput and prints the sysctl or "
            "setsockopt fix. The far end runs tcpwizard serve, or check starts one there "
            "over SSH (--ssh), or it is an iperf3 server or any open TCP port."
        ),
        ".SH OPTIONS",
    ]
    lines += _options(parser)
    lines.append(".SH COMMANDS")
    for name, help_text, sub in _subcommands(parser):
        lines += _command(f"tcpwizard {name}", help_text, sub)
    lines.append(".SH EXIT STATUS")
    for code, meaning in EXIT_MEANINGS.items():
        lines += [".TP", f"\\fB{int(code)}\\fR", roff(meaning)]
    lines.append(".SH ENVIRONMENT")
    for var, meaning in ENVIRONMENT.items():
        lines += [".TP", f"\\fB{var}\\fR", roff(meaning)]
    lines += [
        ".SH SEE ALSO",
        "\\fBsysctl\\fR(8), \\fBip\\fR(8), \\fBss\\fR(8), \\fBssh\\fR(1), \\fBiperf3\\fR(1)",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m tcpwizard.man_gen OUTFILE", file=sys.stderr)
        return int(ExitCode.USAGE)
    path = Path(argv[0])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(generate(), encoding="utf-8")
    print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
