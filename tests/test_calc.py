"""`tcpwizard calc`: reproduces Tierney's 'Sample Buffer Sizes' slide."""

from __future__ import annotations

import json

import pytest

from tcpwizard.checks.plan import buffer_plan
from tcpwizard.exitcodes import ExitCode
from tcpwizard.main import main
from tcpwizard.units import parse_duration, parse_rate

# Tierney, "TCP Tuning Techniques for High-Speed Wide-Area Networks", slide "Sample Buffer
# Sizes" (buffer = bandwidth x RTT), as printed on the slide.
TIERNEY_SAMPLE_BUFFER_SIZES = [
    ("UK", "5ms", "1000mbit", "625 KB"),
    ("Europe", "25ms", "500mbit", "1.56 MB"),
    ("US", "150ms", "500mbit", "9.4 MB"),
    ("Japan", "260ms", "150mbit", "4.9 MB"),
    ("Home DSL, UK to US", "150ms", "1mbit", "19 KB"),
]
UNIT = {"KB": 1e3, "MB": 1e6}


def as_printed(nbytes: int, printed: str) -> str:
    """Our BDP in the slide's unit, with as many decimals as the slide prints."""
    number, unit = printed.split()
    decimals = len(number.split(".")[1]) if "." in number else 0
    return f"{nbytes / UNIT[unit]:.{decimals}f} {unit}"


@pytest.mark.parametrize(("where", "rtt", "rate", "printed"), TIERNEY_SAMPLE_BUFFER_SIZES)
def test_tierney_sample_buffer_sizes(where: str, rtt: str, rate: str, printed: str) -> None:
    plan = buffer_plan(parse_duration(rtt), parse_rate(rate))
    assert as_printed(plan.buffer_1x, printed) == printed, where
    assert plan.buffer_2x == 2 * plan.buffer_1x


def test_dsl_defaults_are_ok_and_us_path_needs_tuning() -> None:
    # The slide: 'Home DSL ... 19 KB - Default buffers are OK.'
    assert buffer_plan(0.150, 1e6).defaults_ok
    assert not buffer_plan(0.150, 500e6).defaults_ok


def test_calc_text(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["calc", "--rtt", "150ms", "--bandwidth", "500mbit"]) == ExitCode.OK
    out = capsys.readouterr().out
    assert "9375000 bytes" in out
    assert "18750000 bytes" in out
    assert 'sysctl -w net.ipv4.tcp_rmem="4096 131072 33554432"' in out
    assert "sysctl -w net.core.rmem_max=33554432" in out


def test_calc_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["calc", "--rtt", "150ms", "--bandwidth", "500mbit", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    calc = doc["calc"]
    assert calc["bdp_bytes"] == 9_375_000
    assert calc["buffer_1x_bytes"] == 9_375_000
    assert calc["buffer_2x_bytes"] == 18_750_000
    assert {s["key"]: s["value"] for s in calc["sysctls"]}["net.ipv4.tcp_wmem"] == (
        "4096 16384 33554432"
    )


@pytest.mark.parametrize(
    "argv",
    [
        ["calc", "--rtt", "banana", "--bandwidth", "1gbit"],
        ["calc", "--rtt", "10ms", "--bandwidth", "fast"],
        ["calc", "--rtt", "0ms", "--bandwidth", "1gbit"],
        ["calc", "--rtt", "10ms"],
        ["calc", "--rtt", "10ms", "--bandwidth", "1gbit", "--format", "nagios"],
    ],
)
def test_calc_bad_input(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == ExitCode.USAGE
    err = capsys.readouterr().err.strip()
    assert err.startswith("tcpwizard: error:") and "\n" not in err
