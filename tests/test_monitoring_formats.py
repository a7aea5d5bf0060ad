"""Prometheus output must parse with prometheus-client's own parser; Nagios lines follow the
plugin guidelines (status word, '|' then perfdata) and thresholds move the exit code."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tcpwizard.exitcodes import ExitCode, UsageError
from tcpwizard.output.nagios import Threshold, nagios_status
from tcpwizard.output.prometheus import render_prometheus

REPORT = {
    "schema_version": 1,
    "target": {"host": "dtn.example", "address": "10.0.0.2", "port": 5301},
    "host": {"findings": [{"id": "a", "severity": "warn"}, {"id": "b", "severity": "ok"}]},
    "peer": None,
    "path": {
        "rtt_ms": {
            "min": 50.2,
            "p50": 50.6,
            "p95": 51.0,
            "mean": 50.7,
            "mdev": 0.3,
            "max": 52.0,
            "loss_pct": 0.0,
        },
        "capacity_mbps": 98.5,
        "capacity_method": "train",
        "bdp_bytes": 618_000,
    },
    "transfer": {
        "direction": "up",
        "modes": [
            {
                "mode": "autotune",
                "direction": "up",
                "streams": 1,
                "throughput_mbps": 12.4,
                "max_buffer_bytes": 131072,
                "retransmits": 0,
                "samples": [],
            },
            {
                "mode": "drs",
                "direction": "up",
                "streams": 1,
                "throughput_mbps": 93.0,
                "max_buffer_bytes": 1_500_000,
                "retransmits": 3,
                "samples": [],
            },
        ],
    },
    "verdict": {
        "limiting_factor": "receiver-window",
        "confidence": 0.9,
        "host_to_fix": "peer",
        "explanation": "x",
        "evidence": [],
        "wizard_gap": {"current_mbps": 12.4, "tuned_mbps": 93.0},
    },
    "fixes": [],
    "exit_code": 1,
}


def test_prometheus_parses_and_carries_the_numbers() -> None:
    text = render_prometheus(REPORT, duration_s=7.5)
    fams = {f.name: f for f in text_string_to_metric_families(text)}
    assert fams["tcpwizard_up"].samples[0].value == 1.0
    rtt = {s.labels["stat"]: s.value for s in fams["tcpwizard_rtt_seconds"].samples}
    assert rtt["min"] == pytest.approx(0.0502)
    tput = {s.labels["mode"]: s.value for s in fams["tcpwizard_throughput_bits_per_second"].samples}
    assert tput == {"autotune": pytest.approx(12.4e6), "drs": pytest.approx(93e6)}
    verdict = fams["tcpwizard_verdict"].samples[0]
    assert verdict.labels["limiting_factor"] == "receiver-window"
    assert verdict.labels["target"] == "dtn.example"
    sev = {s.labels["severity"]: s.value for s in fams["tcpwizard_findings"].samples}
    assert sev["warn"] == 1 and sev["crit"] == 0


def test_prometheus_failed_check_is_down() -> None:
    text = render_prometheus({"target": {"host": "gone"}, "exit_code": 3, "error": "refused"})
    fams = {f.name: f for f in text_string_to_metric_families(text)}
    assert fams["tcpwizard_up"].samples[0].value == 0.0


def test_nagios_line_and_perfdata() -> None:
    code, line = nagios_status(REPORT)
    assert code == ExitCode.WARNING
    assert line.startswith("TCPWIZARD WARNING - dtn.example: receiver-window (fix: peer)")
    _status, perf = line.split(" | ")
    assert "'rtt_min'=50.2ms;;;0;" in perf
    assert "'throughput_drs_up_mbps'=93;;;0;" in perf


def test_nagios_thresholds() -> None:
    assert nagios_status(REPORT, critical="20mbit")[0] == ExitCode.CRITICAL
    assert nagios_status(REPORT, critical="10mbit")[0] == ExitCode.WARNING
    assert nagios_status(REPORT, critical="gap:80%")[0] == ExitCode.CRITICAL  # 87% missing
    assert nagios_status(REPORT, critical="gap:90%")[0] == ExitCode.WARNING
    ok = {**REPORT, "exit_code": 0}
    assert nagios_status(ok, warning="gap:50%")[0] == ExitCode.WARNING
    assert nagios_status(ok, warning="5mbit")[0] == ExitCode.OK


def test_bad_threshold_is_usage_error() -> None:
    with pytest.raises(UsageError):
        Threshold.parse("lots")
