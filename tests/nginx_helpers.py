"""Debian's real nginx inside a lab host, for `conns` and `check URL` tests: a temporary
prefix with its own config, logs, pid file and a large sparse file to serve (no disk is
written for the body), HTTP and, with a throwaway self-signed certificate, HTTPS. Stopped
(and its prefix removed by tmp_path) when the context ends, also when the test fails."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tcpwizard.lab import Lab
from tcpwizard.lab.netns import stop
from tcpwizard.lab.spec import Side

BIG = "big.bin"
BIG_SIZE = 4 << 30  # sparse: far more than any test reads

_CONF = """
worker_processes 1;
user root;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log warn;
daemon off;
events {{ worker_connections 64; }}
http {{
    access_log off;
    sendfile on;
    client_body_temp_path {prefix}/body;
    proxy_temp_path {prefix}/proxy;
    fastcgi_temp_path {prefix}/fastcgi;
    uwsgi_temp_path {prefix}/uwsgi;
    scgi_temp_path {prefix}/scgi;
    types {{ application/octet-stream bin; }}
    server {{
        listen {port}{ssl};
        listen [::]:{port}{ssl};
        {tls}
        root {prefix}/www;
        location = /moved {{ return 302 /{big}; }}
    }}
}}
"""


def nginx_missing() -> str | None:
    if shutil.which("nginx") is None and not Path("/usr/sbin/nginx").exists():
        return "nginx is not installed (make system-deps: nginx-light)"
    return None


@dataclass(frozen=True)
class Nginx:
    url: str  # of the big file
    moved_url: str  # a redirect to it
    port: int
    process: subprocess.Popen[bytes]
    cert: Path | None  # the self-signed certificate (HTTPS): trust it with SSL_CERT_FILE


def _self_signed(prefix: Path, address: str) -> str:
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
            "-subj", "/CN=tcpwizard-test", "-addext", f"subjectAltName=IP:{address}",
            "-keyout", str(prefix / "key.pem"), "-out", str(prefix / "cert.pem"),
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return (
        f"ssl_certificate {prefix}/cert.pem; ssl_certificate_key {prefix}/key.pem; "
        "ssl_protocols TLSv1.2 TLSv1.3;"
    )


@contextlib.contextmanager
def nginx_serving(
    lab: Lab, side: Side, prefix: Path, port: int = 8080, tls: bool = False
) -> Iterator[Nginx]:
    """nginx in `side`, serving a sparse 4 GB file at http(s)://ADDR:port/big.bin."""
    (prefix / "www").mkdir(parents=True, exist_ok=True)
    with open(prefix / "www" / BIG, "wb") as fh:
        fh.truncate(BIG_SIZE)
    tls_conf = ""
    if tls:
        tls_conf = _self_signed(prefix, lab.addr(side))
    ssl = " ssl" if tls else ""
    conf = _CONF.format(prefix=prefix, port=port, ssl=ssl, tls=tls_conf, big=BIG)
    (prefix / "nginx.conf").write_text(conf)
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    proc = lab.popen(
        side,
        [
            nginx,
            "-p",
            str(prefix),
            "-c",
            str(prefix / "nginx.conf"),
            "-e",
            str(prefix / "error.log"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        _wait_listening(lab, side, port, proc, prefix)
        scheme = "https" if tls else "http"
        addr = lab.addr(side)
        cert = prefix / "cert.pem" if tls else None
        base = f"{scheme}://{addr}:{port}"
        yield Nginx(f"{base}/{BIG}", f"{base}/moved", port, proc, cert)
    finally:
        stop(proc)


def _wait_listening(
    lab: Lab, side: Side, port: int, proc: subprocess.Popen[bytes], prefix: Path
) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            log = (prefix / "error.log").read_text() if (prefix / "error.log").exists() else ""
            raise RuntimeError(f"nginx exited {proc.returncode}: {log}")
        out = lab.run(side, ["ss", "-Htln", f"sport = :{port}"], capture_output=True, text=True)
        if out.stdout.strip():
            return
        time.sleep(0.1)
    raise RuntimeError(f"nginx did not listen on port {port}")
