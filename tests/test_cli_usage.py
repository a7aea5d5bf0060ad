"""Bad usage gets one line on stderr and ExitCode.USAGE, never a traceback."""

from __future__ import annotations

import pytest

from tcpwizard.exitcodes import ExitCode
from tcpwizard.main import main


@pytest.mark.parametrize(
    "argv",
    [
        ["--no-such-flag"],
        ["check", "--no-such-flag"],
        ["nosuchcommand"],
        [],
        ["check", "--streams", "many"],
        ["check", " "],
        ["check", "--rtt", "abc"],
        ["calc", "--rtt", "100ms", "--bandwidth", "1e400"],
        ["transfer", "127.0.0.1", "--modes", "foo"],
        ["serve", "--port", "70000"],
    ],
)
def test_usage_errors_are_one_line(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == ExitCode.USAGE
    err = capsys.readouterr().err.strip()
    assert err.startswith("tcpwizard: error:")
    assert "\n" not in err
    assert "Traceback" not in err


def test_exit_codes_do_not_collide_with_plugin_range() -> None:
    extra = [c for c in ExitCode if c not in (0, 1, 2, 3)]
    assert all(int(c) > 3 for c in extra)
    assert len({int(c) for c in ExitCode}) == len(list(ExitCode))
