"""`check URL` over the emulated WAN against Debian's real nginx (started by the test in
host b with a temporary config, serving a sparse 4 GB file): real downloads, judged from
our receiving socket.

- this host's tcp_rmem max at 256 KB: receiver-window, fix here;
- the web server's tcp_wmem max at 128 KB: sender-buffer, fix the far end;
- healthy: path-capacity, over HTTP and over HTTPS behind a redirect;
- a missing file and an untrusted certificate: one line, exit 3."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from tcpwizard.lab import Lab, LabSpec
from tcpwizard.lab.ratecheck import over_line
from tcpwizard.lab.serving import tcpwizard_argv
from tests.lab_fixtures import LabFactory
from tests.lab_helpers import HEALTHY, SMALL_RMEM_A, SMALL_WMEM_B
from tests.nginx_helpers import nginx_missing, nginx_serving
from tests.schemas import committed_schema

pytestmark = [
    pytest.mark.lab,
    pytest.mark.slow,
    pytest.mark.skipif(nginx_missing() is not None, reason=str(nginx_missing())),
    pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl not installed"),
]
SCHEMA = committed_schema("report")


def _check(
    lab: Lab, url: str, *extra: str, cert: Path | None = None
) -> tuple[int, dict[str, Any] | None, str]:
    env = dict(os.environ)
    if cert is not None:
        env["SSL_CERT_FILE"] = str(cert)
    proc = lab.run(
        "a",
        tcpwizard_argv("check", url, "--no-history", *extra),
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    doc = json.loads(proc.stdout) if "--json" in extra else None
    if doc is not None:
        assert over_line(doc, lab.line_rate_mbps) == [], "a rate above the lab's line rate"
    return proc.returncode, doc, proc.stderr


@pytest.mark.parametrize(
    ("spec", "factor", "host", "fix_key"),
    [
        (SMALL_RMEM_A, "receiver-window", "local", "net.ipv4.tcp_rmem"),
        (SMALL_WMEM_B, "sender-buffer", "peer", "net.ipv4.tcp_wmem"),
        (HEALTHY, "path-capacity", None, None),
    ],
    ids=["small-rmem-here", "small-wmem-web-server", "healthy"],
)
def test_download_is_named(
    lab_factory: LabFactory,
    tmp_path: Path,
    spec: LabSpec,
    factor: str,
    host: str | None,
    fix_key: str | None,
) -> None:
    lab = lab_factory(spec)
    with nginx_serving(lab, "b", tmp_path / "nginx") as web:
        code, doc, err = _check(lab, web.url, "--json")
    assert doc is not None, err
    jsonschema.validate(doc, SCHEMA)
    v = doc["verdict"]
    assert (v["limiting_factor"], v["host_to_fix"]) == (factor, host), v
    assert doc["measured"] is True and code == doc["exit_code"]
    assert doc["far_end"]["kind"] == "url" and doc["far_end"]["port"] == web.port
    modes = {m["mode"]: m for m in doc["transfer"]["modes"]}
    assert set(modes) == {"autotune", "drs"}, modes
    assert all(m["direction"] == "down" and m["error"] is None for m in modes.values())
    assert doc["peer_handshake"]["window_scaling"] is True
    auto = modes["autotune"]["throughput_mbps"]
    if fix_key is None:
        assert code == 0 and auto > 75, auto  # 3 s with slow start on 100 Mbit/s x 50 ms
        return
    assert code in (1, 2) and auto < 40, auto
    assert any(f["key"] == fix_key and f["host"] == host for f in doc["fixes"]), doc["fixes"]
    if factor == "receiver-window":
        # DRS on our receiver (forced as root) measures what a right-sized window gives.
        gap = v["wizard_gap"]
        assert gap["measured"] is True and gap["tuned_mbps"] > 70, gap
        rmem = next(f for f in doc["fixes"] if f["key"] == fix_key)
        assert int(rmem["value"].split()[2]) >= 625_000  # at least the path's BDP


def test_https_behind_a_redirect(lab_factory: LabFactory, tmp_path: Path) -> None:
    lab = lab_factory(HEALTHY)
    with nginx_serving(lab, "b", tmp_path / "nginx", port=8443, tls=True) as web:
        code, doc, err = _check(lab, web.moved_url, "--json", cert=web.cert)
    assert doc is not None, err
    assert doc["verdict"]["limiting_factor"] == "path-capacity", doc["verdict"]
    assert code == 0
    assert "(HTTPS)" in doc["far_end"]["description"]
    assert any("redirects (302)" in n for n in doc["notes"]), doc["notes"]
    auto = next(m for m in doc["transfer"]["modes"] if m["mode"] == "autotune")
    assert auto["throughput_mbps"] > 75  # TLS bytes on the wire, counted undecrypted


def test_http_and_tls_errors_are_one_line_exit_3(lab_factory: LabFactory, tmp_path: Path) -> None:
    lab = lab_factory(HEALTHY)
    with nginx_serving(lab, "b", tmp_path / "nginx") as web:
        missing = web.url.replace("big.bin", "nothing-here")
        code, _, err = _check(lab, missing)
        assert code == 3
        assert err.strip().splitlines() == [f"tcpwizard: error: {missing}: HTTP 404 Not Found"]
    with nginx_serving(lab, "b", tmp_path / "tls", port=8443, tls=True) as web:
        code, doc, err = _check(lab, web.url, "--json")  # the certificate is not trusted
    assert code == 3 and doc is not None and doc["exit_code"] == 3
    (line,) = err.strip().splitlines()
    assert line.startswith(f"tcpwizard: error: {web.url}: TLS: certificate verify failed")
