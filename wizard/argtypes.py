"""argparse `type=` functions shared by every subcommand, so a port, a duration, a rate or a
host is checked by the same rule wherever it is given, while argparse still names the flag.

Duration, rate and size types return the text unchanged once it parses: the commands turn it
into a number with their own default unit (RTTs in ms, test lengths in s)."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

from tcpwizard.exitcodes import TcpWizardError
from tcpwizard.inputs import InputError, check_host, check_port
from tcpwizard.units import parse_duration, parse_rate, parse_size


def _wrap(fn: Callable[[str], object], text: str) -> None:
    try:
        fn(text)
    except TcpWizardError as exc:  # InputError, or UsageError from units: one clear line
        raise argparse.ArgumentTypeError(str(exc)) from None


def port(text: str) -> int:
    try:
        value: int = check_port(text)
        return value
    except InputError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def listen_port(text: str) -> int:
    """A port to listen on: 0 asks the kernel for a free one."""
    try:
        value: int = check_port(text, listen=True)
        return value
    except InputError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def host(text: str) -> str:
    try:
        value: str = check_host(text)
        return value
    except InputError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def host_or_url(text: str) -> str:
    """A host, or an http(s):// URL for `check URL` (checked when the check starts)."""
    if text.strip().lower().startswith(("http://", "https://")):
        return text.strip()
    return host(text)


def _negative(text: str) -> None:
    if text.strip().startswith("-"):
        raise argparse.ArgumentTypeError(f"must be positive, not {text!r}")


def duration(default_unit: str) -> Callable[[str], str]:
    def check(text: str) -> str:
        _negative(text)
        _wrap(lambda t: _positive(parse_duration(t, default_unit), t), text)
        return text

    check.__name__ = "duration"
    return check


def rate(text: str) -> str:
    _negative(text)
    _wrap(lambda t: _positive(parse_rate(t), t), text)
    return text


def size(text: str) -> str:
    _negative(text)
    _wrap(lambda t: _positive(float(parse_size(t)), t), text)
    return text


def _positive(value: float, text: str) -> None:
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a finite positive value, not {text!r}")


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
        _negative(text)
        try:
            value = float(text.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected seconds, not {text!r}") from None
        if not math.isfinite(value) or not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"must be between {lo:g} and {hi:g} seconds")
        return value

    check.__name__ = "seconds"
    return check
