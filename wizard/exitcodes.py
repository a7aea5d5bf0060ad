"""Process exit codes: the Nagios plugin convention (0-3) plus sysexits-style codes for
failures that are not a verdict about the path."""

from __future__ import annotations

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
