"""`check HOST` end to end over loopback against a real serve (real kernel TCP, real sysctls).
The emulated-WAN scenarios are in test_scenarios_lab.py; this covers the pipeline's plumbing
and every output path against the JSON schema."""

from __future__ import annotations

import io
import json
import socket
from collections.abc import Callable
from pathlib import Path

import jsonschema
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tcpwizard.context import Context
from tcpwizard.main import main
from tcpwizard.measure.serve.limits import ServeLimits
from tcpwizard.measure.serve.transfers import TransferService
from tests.schemas import committed_schema
from tests.serve_helpers import running_server

SCHEMA = committed_schema("report")


def _check(argv: list[str], tmp_path: Path) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    ctx = Context(stdout=out, stderr=err)
    code = main(["check", *argv], ctx)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def history(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "history.sqlite3"
    monkeypatch.setenv("TCPWIZARD_HISTORY", str(path))
    return path


def test_full_check_over_loopback(tmp_path: Path, history: Path) -> None:
    with running_server(transfer=TransferService(ServeLimits())) as srv:
        code, out, _err = _check(
            ["127.0.0.1", "--port", str(srv.port), "--json", "--quick", "--duration", "0.5"],
            tmp_path,
        )
    doc = json.loads(out)
    jsonschema.validate(doc, SCHEMA)
    assert code == doc["exit_code"] and code in (0, 1, 2)
    assert doc["peer"] is not None and doc["peer"]["findings"]
    assert doc["path"]["rtt_ms"]["min"] < 5
    assert {m["mode"] for m in doc["transfer"]["modes"]} == {"autotune"}  # --quick
    assert all(m["throughput_mbps"] > 10 for m in doc["transfer"]["modes"])
    assert doc["verdict"]["limiting_factor"] != ""
    assert history.exists()  # recorded for `tcpwizard history`
    timing = doc["timing"]
    assert {"audit", "probe", "transfer"} <= set(timing["stages"])
    assert sum(timing["stages"].values()) <= timing["seconds"] + 0.01
    assert 0 < timing["floor_s"] < timing["seconds"]  # loopback's round trips are tiny


def _controls(logs: list[str]) -> list[str]:
    return [line for line in logs if "control connection (protocol" in line]


def test_a_check_holds_one_control_connection(tmp_path: Path, history: Path) -> None:
    # Reaching serve, its audit, the probe, --avail and every transfer: one connection (each
    # new one costs a connect and a hello, 0.3 s on a 100 ms path).
    with running_server(transfer=TransferService(ServeLimits())) as srv:
        argv = ["127.0.0.1", "--port", str(srv.port), "--json", "--duration", "0.3", "--avail"]
        _code, out, err = _check([*argv, "--modes", "untuned,autotune"], tmp_path)
        logs: list[str] = srv.logs  # type: ignore[attr-defined]
        controls = _controls(logs)
    doc = json.loads(out)
    assert doc["peer"] is not None and doc["path"]["available"] is not None, err
    assert len(doc["transfer"]["modes"]) == 4 and not any(
        m["error"] for m in doc["transfer"]["modes"]
    )
    assert len(controls) == 1, logs


class _LoggedTransfers(TransferService):
    """serve's transfer service, noting each transfer's start in serve's log."""

    logs: list[str]

    def handle_request(
        self, request: dict[str, object], send: Callable[[dict[str, object]], None]
    ) -> None:
        self.logs.append(f"transfer {request.get('mode')} {request.get('direction')}")
        super().handle_request(request, send)


def test_quick_runs_both_ways_at_once(tmp_path: Path, history: Path) -> None:
    # The way back runs on a second control connection of its own, during the way there.
    service = _LoggedTransfers(ServeLimits())
    with running_server(transfer=service) as srv:
        logs: list[str] = srv.logs  # type: ignore[attr-defined]
        service.logs = logs
        _code, out, err = _check(
            ["127.0.0.1", "--port", str(srv.port), "--json", "--quick", "--duration", "1"],
            tmp_path,
        )
    doc = json.loads(out)
    modes = [(m["mode"], m["direction"], m["error"]) for m in doc["transfer"]["modes"]]
    assert modes == [("autotune", "up", None), ("autotune", "down", None)], err
    assert len(_controls(logs)) == 2
    assert "available" not in doc["path"], "--quick measures no available bandwidth unasked"
    # Both control connections were open at once: the second opened before the first closed,
    # and before either transfer began (it was connected while the probe ran).
    events = [line for line in logs if "control connection" in line or "transfer" in line]
    assert "control connection (protocol" in events[0], events
    assert "control connection (protocol" in events[1], events
    assert sorted(events[2:4]) == ["transfer autotune down", "transfer autotune up"], events


def test_unresolvable_host_is_valid_json_unknown(tmp_path: Path, history: Path) -> None:
    code, out, err = _check(["no-such-host.invalid", "--json", "--quick"], tmp_path)
    doc = json.loads(out)
    jsonschema.validate(doc, SCHEMA)
    assert code == 3 and doc["exit_code"] == 3 and "cannot resolve" in doc["error"]
    assert err.startswith("tcpwizard: error:") and err.count("\n") == 1


def test_without_serve_the_check_is_peerless(tmp_path: Path, history: Path) -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with socket.socket() as listener:  # an ordinary TCP service for connect-time RTT
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)
        tcp_port = listener.getsockname()[1]
        code, out, _ = _check(
            ["127.0.0.1", "--port", str(port), "--tcp-port", str(tcp_port), "--json", "--quick"],
            tmp_path,
        )
    doc = json.loads(out)
    jsonschema.validate(doc, SCHEMA)
    assert doc["peer"] is None and doc["transfer"] is None
    assert doc["path"]["rtt_ms"]["min"] < 5
    assert any("no tcpwizard serve" in n for n in doc["notes"])
    assert doc["verdict"]["confidence"] <= 0.6
    assert code == doc["exit_code"]


@pytest.mark.parametrize("fmt", ["prometheus", "nagios"])
def test_unreachable_monitoring_formats(fmt: str, tmp_path: Path, history: Path) -> None:
    code, out, _ = _check(["no-such-host.invalid", "--format", fmt], tmp_path)
    assert code == 3
    if fmt == "prometheus":
        fams = {f.name: f for f in text_string_to_metric_families(out)}
        assert fams["tcpwizard_up"].samples[0].value == 0
    else:
        assert out.startswith("TCPWIZARD UNKNOWN - no-such-host.invalid: cannot resolve")


def test_broken_history_file_does_not_lose_the_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = tmp_path / "history.sqlite3"
    broken.write_bytes(b"this is not a database" * 100)
    monkeypatch.setenv("TCPWIZARD_HISTORY", str(broken))
    with running_server(transfer=TransferService(ServeLimits())) as srv:
        code, out, err = _check(
            ["127.0.0.1", "--port", str(srv.port), "--json", "--quick", "--duration", "0.3"],
            tmp_path,
        )
    doc = json.loads(out)
    assert code == doc["exit_code"] != 70
    assert "history not recorded" in err


def test_check_hops_over_loopback(tmp_path: Path, history: Path) -> None:
    """`check --hops`: the pipeline probes the hops as `path` does and puts them in the
    report; a bad hop option is a one-line usage error, as from `path`."""
    with running_server(transfer=TransferService(ServeLimits())) as srv:
        argv = ["127.0.0.1", "--port", str(srv.port), "--quick", "--duration", "0.3", "--hops"]
        code, out, _err = _check([*argv, "--json", "--hops-count", "3"], tmp_path)
        bad_code, _out, bad_err = _check([*argv, "--hops-method", "tcp"], tmp_path)
    doc = json.loads(out)
    jsonschema.validate(doc, SCHEMA)
    assert code == doc["exit_code"]
    (hop,) = doc["hops"]["hops"]
    assert hop["ttl"] == 1 and hop["destination"] and hop["address"] == "127.0.0.1"
    assert hop["sent"] == 3
    assert bad_code == 64 and "the tcp method needs an open port" in bad_err
