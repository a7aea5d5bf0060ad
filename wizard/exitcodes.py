"""Process exit codes: the Nagios plugin convention (0-3) plus sysexits-style codes for
failures that are not a verdict about the path."""

from __future__ import annotations

import errno
import sqlite3
from dataclasses import dataclass
from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    WARNING = 1
    CRITICAL = 2
    UNKNOWN = 3
    # sysexits.h values, so they never collide with the plugin range 0-3.
    USAGE = 64
    DATA_ERROR = 65
    UNAVAILABLE = 69
    SOFTWARE = 70
    NO_PERMISSION = 77
    CONFIG = 78
    INTERRUPTED = 130


class TcpWizardError(Exception):
    """An error the user can act on: printed as one line, mapped to an exit code."""

    exit_code: ExitCode = ExitCode.UNKNOWN

    def __init__(self, message: str, exit_code: ExitCode | None = None) -> None:
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code


class UsageError(TcpWizardError):
    exit_code = ExitCode.USAGE


class PermissionRequired(TcpWizardError):
    exit_code = ExitCode.NO_PERMISSION


class Unavailable(TcpWizardError):
    """The target, peer or a system facility could not be reached or used."""

    exit_code = ExitCode.UNKNOWN


def exit_for_severities(severities: list[str]) -> ExitCode:
    """The worst severity decides: crit -> 2, warn -> 1, else 0."""
    if "crit" in severities:
        return ExitCode.CRITICAL
    if "warn" in severities:
        return ExitCode.WARNING
    return ExitCode.OK


@dataclass(frozen=True)
class Failure:
    code: ExitCode
    message: str  # the error in words (also the `error` of a JSON error document)
    line: str  # what stderr gets: one line, or "" for nothing


def describe_failure(exc: BaseException, stdout_failed: bool = False) -> Failure:
    """The one mapping from an exception that ended a command to its exit code and line.
    Everything the user or the system can cause maps to the README's codes; 70 is left for
    bugs, and says how to get the traceback."""
    if isinstance(exc, TcpWizardError):
        return Failure(exc.exit_code, str(exc), f"tcpwizard: error: {exc}")
    if isinstance(exc, KeyboardInterrupt):
        return Failure(ExitCode.INTERRUPTED, "interrupted", "tcpwizard: interrupted")
    if isinstance(exc, BrokenPipeError) or (stdout_failed and isinstance(exc, OSError)):
        if isinstance(exc, BrokenPipeError) or exc.errno == errno.EPIPE:
            return Failure(ExitCode.OK, "", "")  # the reader (head, less) has what it wanted
        why = exc.strerror or str(exc)
        return Failure(
            ExitCode.UNAVAILABLE, why, f"tcpwizard: error: cannot write the output: {why}"
        )
    if isinstance(exc, UnicodeEncodeError):
        why = f"the output cannot be written in this locale's encoding ({exc.encoding})"
        return Failure(ExitCode.UNAVAILABLE, why, f"tcpwizard: error: {why}; try LANG=C.UTF-8")
    if isinstance(exc, OSError):
        # A system read or write the command needed (a /proc/sys entry, a socket, a file).
        where = f"{exc.filename}: " if exc.filename else ""
        why = f"{where}{exc.strerror or exc}"
        return Failure(ExitCode.UNKNOWN, why, f"tcpwizard: error: {why}")
    if isinstance(exc, sqlite3.Error):
        why = f"database error: {exc}"
        return Failure(ExitCode.DATA_ERROR, why, f"tcpwizard: error: {why}")
    if isinstance(exc, MemoryError | RecursionError):
        why = f"input too large or too deeply nested ({type(exc).__name__})"
        return Failure(ExitCode.DATA_ERROR, why, f"tcpwizard: error: {why}")
    why = f"internal error: {type(exc).__name__}: {exc}"
    return Failure(
        ExitCode.SOFTWARE, why, f"tcpwizard: {why} (set TCPWIZARD_DEBUG=1 for the traceback)"
    )
