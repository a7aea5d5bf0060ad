from __future__ import annotations

import pytest

from tcpwizard.exitcodes import UsageError
from tcpwizard.units import (
    format_bytes,
    parse_duration,
    parse_percent,
    parse_rate,
    parse_size,
)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("150ms", 0.150), ("800us", 800e-6), ("0.2s", 0.2), ("50", 0.050), ("1.5 ms", 0.0015)],
)
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    ("text", "bps"),
    [("500mbit", 500e6), ("1gbit", 1e9), ("10Mbps", 10e6), ("64kbit", 64e3), ("1e9", 1e9)],
)
def test_rates(text: str, bps: float) -> None:
    assert parse_rate(text) == pytest.approx(bps)


@pytest.mark.parametrize(
    ("text", "nbytes"), [("64KB", 64000), ("128MB", 128_000_000), ("4MiB", 4 << 20), ("100", 100)]
)
def test_sizes(text: str, nbytes: int) -> None:
    assert parse_size(text) == nbytes


def test_percent() -> None:
    assert parse_percent("0.5%") == pytest.approx(0.005)
    assert parse_percent("0.01") == pytest.approx(0.01)


@pytest.mark.parametrize(
    ("fn", "text"),
    [
        (parse_duration, "banana"),
        (parse_duration, "5 parsecs"),
        (parse_rate, "fast"),
        (parse_rate, "0mbit"),
        (parse_size, "12 furlongs"),
        (parse_percent, "150%"),
        (parse_rate, "inf"),
    ],
)
def test_bad_input_is_a_usage_error(fn: object, text: str) -> None:
    with pytest.raises(UsageError):
        fn(text)  # type: ignore[operator]


def test_format_bytes_matches_slides() -> None:
    assert format_bytes(9_375_000) == "9.38 MB"
    assert format_bytes(625_000) == "625 KB"
