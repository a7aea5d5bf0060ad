"""argparse `type=` functions shared by every subcommand, so a port, a duration, a rate or a
host is checked by the same rule wherever it is given, while argparse still names the flag.

The rules themselves are tcpwizard.inputs' (what a duration, a rate, a share, an MTU is); here
they become argparse types. Duration, rate and size types return the text unchanged once it
parses: the commands turn it into a number with their own default unit (RTTs in ms, test
lengths in s). The others return the value."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import TypeVar

from tcpwizard.exitcodes import TcpWizardError
from tcpwizard.inputs import (
    check_duration,
    check_host,
    check_mtu,
    check_port,
    check_rate,
    check_share,
    check_size,
)

T = TypeVar("T")


def parsed(parse: Callable[[str], T]) -> Callable[[str], T]:
    """An argparse type from a function that reads one value (a KEY=VALUE list, a lab name)
    and raises a one-line TcpWizardError: argparse then puts the flag in front of it."""

    def check(text: str) -> T:
        try:
            return parse(text)
        except TcpWizardError as exc:  # InputError, or UsageError from units: one clear line
            raise argparse.ArgumentTypeError(str(exc)) from None

    check.__name__ = parse.__name__.removeprefix("parse_").removeprefix("check_")
    return check


port = parsed(check_port)


def _listen_port(text: str) -> int:
    """A port to listen on: 0 asks the kernel for a free one."""
    return check_port(text, listen=True)


listen_port = parsed(_listen_port)


host = parsed(check_host)


def host_or_url(text: str) -> str:
    """A host, or an http(s):// URL for `check URL` (checked when the check starts)."""
    if text.strip().lower().startswith(("http://", "https://")):
        return text.strip()
    return host(text)


def duration(default_unit: str, zero_ok: bool = False) -> Callable[[str], str]:
    def check(text: str) -> str:
        parsed(lambda t: check_duration(t, default_unit, zero_ok))(text)
        return text

    check.__name__ = "duration"
    return check


def rate(text: str) -> str:
    parsed(check_rate)(text)
    return text


def size(text: str) -> str:
    parsed(check_size)(text)
    return text


share = parsed(check_share)
mtu = parsed(check_mtu)


def int_range(lo: int, hi: int) -> Callable[[str], int]:
    def check(text: str) -> int:
        try:
            value = int(text.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, not {text!r}") from None
        if not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"must be between {lo} and {hi}, not {value}")
        return value

    check.__name__ = "number"
    return check


def seconds(lo: float, hi: float) -> Callable[[str], float]:
    def check(text: str) -> float:
        if text.strip().startswith("-"):
            raise argparse.ArgumentTypeError(f"must be positive, not {text!r}")
        try:
            value = float(text.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected seconds, not {text!r}") from None
        if not math.isfinite(value) or not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"must be between {lo:g} and {hi:g} seconds")
        return value

    check.__name__ = "seconds"
    return check


def percent(lo: float, hi: float) -> Callable[[str], float]:
    """A percentage from lo to under hi (a trailing % allowed)."""

    def check(text: str) -> float:
        try:
            value = float(text.strip().removesuffix("%"))
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a percentage, not {text!r}") from None
        if not math.isfinite(value) or not lo <= value < hi:
            raise argparse.ArgumentTypeError(f"must be from {lo:g} to under {hi:g} %")
        return value

    check.__name__ = "percent"
    return check
