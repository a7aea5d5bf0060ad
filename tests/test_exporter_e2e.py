"""The exporter, as a real process, scraped over loopback while one target is unreachable and
another runs serve: the scrape answers, the dead target's `up` is 0, the live one's is 1."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from tcpwizard.measure.serve.limits import ServeLimits
from tcpwizard.measure.serve.transfers import TransferService
from tests.loopback import free_port
from tests.serve_helpers import running_server


def _scrape(url: str) -> dict[str, dict[str, float]]:
    with urllib.request.urlopen(url, timeout=5) as resp:
        text = resp.read().decode()
    out: dict[str, dict[str, float]] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out.setdefault(s.name, {})[s.labels.get("target", "")] = s.value
    return out


def test_exporter_scrape_with_unreachable_target(tmp_path: Path) -> None:
    dead = f"127.0.0.1:{free_port()}"
    listen = f"127.0.0.1:{free_port()}"
    with running_server(transfer=TransferService(ServeLimits())) as srv:
        live = f"127.0.0.1:{srv.port}"
        targets = tmp_path / "targets.txt"
        targets.write_text(f"# two paths\nno-such-host.invalid:5301 site=nowhere\n{live}\n{dead}\n")
        env = {**os.environ, "TCPWIZARD_HISTORY": str(tmp_path / "h.sqlite3")}
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tcpwizard",
                "exporter",
                "--listen",
                listen,
                "--targets",
                str(targets),
                "--interval",
                "12s",
                "--quick",
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            deadline = time.monotonic() + 60
            metrics: dict[str, dict[str, float]] = {}
            while time.monotonic() < deadline:
                time.sleep(0.5)
                try:
                    metrics = _scrape(f"http://{listen}/metrics")
                except OSError:
                    continue  # not listening yet
                if len(metrics.get("tcpwizard_up", {})) == 3:
                    break
            up = metrics.get("tcpwizard_up", {})
            assert up.get("no-such-host.invalid:5301") == 0.0
            assert up.get(live) == 1.0
            assert "tcpwizard_throughput_bits_per_second" in metrics
        finally:
            proc.send_signal(signal.SIGTERM)
            _out, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, err
