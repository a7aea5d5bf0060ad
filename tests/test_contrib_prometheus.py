"""contrib/prometheus: the rules load in promtool, their unit tests (synthetic series) pass,
a broken rule file fails them, and every series the rules read is one the exporter exposes."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tcpwizard.exitcodes import UsageError
from tests.exporter_names import METRIC_RE, exported_series

CONTRIB = Path(__file__).resolve().parent.parent / "contrib" / "prometheus"
RULES = CONTRIB / "tcpwizard.rules.yml"
RULE_TESTS = CONTRIB / "tcpwizard.rules.test.yml"
CONFIG = CONTRIB / "prometheus.yml"

pytestmark = pytest.mark.skipif(
    shutil.which("promtool") is None,
    reason="promtool is not installed (Debian package prometheus: make system-deps)",
)


def _promtool(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["promtool", *args], cwd=cwd, capture_output=True, text=True, timeout=60, check=False
    )


def _copy(tmp_path: Path, rules: str | None = None) -> Path:
    for f in (RULES, RULE_TESTS, CONFIG):
        shutil.copy(f, tmp_path / f.name)
    if rules is not None:
        (tmp_path / RULES.name).write_text(rules)
    return tmp_path


def _rules() -> list[dict[str, Any]]:
    doc = yaml.safe_load(RULES.read_text())
    return [r for g in doc["groups"] for r in g["rules"]]


def test_promtool_checks_rules_and_config(tmp_path: Path) -> None:
    rules = _promtool("check", "rules", RULES.name, cwd=CONTRIB)
    assert rules.returncode == 0, rules.stdout + rules.stderr
    assert "SUCCESS: 10 rules found" in rules.stdout
    config = _promtool("check", "config", CONFIG.name, cwd=_copy(tmp_path))
    assert config.returncode == 0, config.stdout + config.stderr


def test_promtool_rule_unit_tests_pass() -> None:
    proc = _promtool("test", "rules", RULE_TESTS.name, cwd=CONTRIB)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS" in proc.stdout


@pytest.mark.parametrize(
    ("old", "new", "tool"),
    [
        # N checks in a row becomes 4: the alert comes one check late, the unit test says so
        (
            "(tcpwizard_unhealthy_streak_checks >= 3)",
            "(tcpwizard_unhealthy_streak_checks >= 4)",
            "test",
        ),
        # the gap threshold moved: the hour-long gap no longer alerts
        ("tcpwizard:path_wizard_gap:ratio > 0.5", "tcpwizard:path_wizard_gap:ratio > 0.8", "test"),
        # a runbook that no longer names the command
        (
            "On {{ $labels.instance }}: tcpwizard check {{",
            "On {{ $labels.instance }}: check {{",
            "test",
        ),
        # a runbook whose command line would not be accepted (host:port instead of --port)
        ('`^([^:\\[\\]]+):([0-9]+)$` "$1 --port $2"', '`^([^:\\[\\]]+):([0-9]+)$` "$1:$2"', "test"),
        # PromQL that does not parse
        ("tcpwizard_up == 0", "tcpwizard_up == (0", "check"),
        # YAML that is not a rule file
        ("    rules:\n      # N = 3", "    rulez:\n      # N = 3", "check"),
    ],
)
def test_a_broken_rule_file_fails(tmp_path: Path, old: str, new: str, tool: str) -> None:
    text = RULES.read_text()
    assert old in text
    where = _copy(tmp_path, text.replace(old, new, 1))
    if tool == "check":
        proc = _promtool("check", "rules", RULES.name, cwd=where)
    else:
        proc = _promtool("test", "rules", RULE_TESTS.name, cwd=where)
    assert proc.returncode != 0, proc.stdout


def test_every_alert_has_a_runbook_naming_a_tcpwizard_command() -> None:
    alerts = [r for r in _rules() if "alert" in r]
    assert {a["alert"] for a in alerts} == {
        "TcpwizardPathLimited",
        "TcpwizardWizardGap",
        "TcpwizardTargetUnchecked",
        "TcpwizardCheckStale",
        "TcpwizardExporterDown",
    }
    for a in alerts:
        runbook = a["annotations"]["runbook"]
        assert re.search(r"tcpwizard (check|exporter|fix|history)\b", runbook), a["alert"]
        assert a["labels"]["severity"] in ("warning", "critical")


def test_rules_read_only_series_the_exporter_exposes() -> None:
    exposed = exported_series()
    read: set[str] = set()
    for r in _rules():
        read |= set(METRIC_RE.findall(r["expr"]))
    assert read, "no tcpwizard series in the rules"
    missing = read - set(exposed)
    assert not missing, f"the rules read series the exporter does not expose: {missing}"
    # The recording rules keep a path apart by its target label: the exporter sets it.
    assert "target" in exposed["tcpwizard_verdict"]
    assert {"limiting_factor", "host_to_fix"} <= exposed["tcpwizard_verdict"]


RUNBOOK_CMD = re.compile(
    r"tcpwizard (?:check|fix|history|exporter)(?: (?!\(|on\b|shows\b|by\b|then\b|>)[^ ;,()]+)*"
)


def test_runbook_commands_as_rendered_are_accepted_by_tcpwizard() -> None:
    """The runbooks as promtool renders them (the expected annotations of the rule tests,
    which promtool compares): every `tcpwizard ...` in them parses as tcpwizard's CLI."""
    from tcpwizard.cli import build_parser

    doc = yaml.safe_load(RULE_TESTS.read_text())
    runbooks = [
        a["exp_annotations"]["runbook"]
        for t in doc["tests"]
        for case in t.get("alert_rule_test", [])
        for a in case.get("exp_alerts", [])
    ]
    commands = [c for rb in runbooks for c in RUNBOOK_CMD.findall(rb)]
    assert len(runbooks) >= 6 and len(commands) >= 10
    assert "tcpwizard check fd00::2 --port 7000" in commands
    parser = build_parser()
    for cmd in commands:
        try:
            parser.parse_args(cmd.split()[1:])
        except (SystemExit, UsageError):
            pytest.fail(f"a runbook says {cmd!r}, which tcpwizard does not accept")
