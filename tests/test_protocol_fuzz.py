"""Fuzz the serve control protocol: 10,000+ malformed messages against a real serve process.

Every message must get exactly one error reply and a closed connection, the server must
keep answering a bystander client throughout, and nothing may hang (every socket has a
timeout; the whole test is bounded).
"""

from __future__ import annotations

import contextlib
import json
import random
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from tcpwizard.measure.wire import udp
from tcpwizard.measure.wire.control import ControlClient
from tcpwizard.measure.wire.protocol import MAX_MESSAGE
from tests.serve_helpers import read_until_closed

N_MESSAGES = 10_500
WORKERS = 4
HELLO = b'{"type":"hello","version":1,"client":"fuzz"}\n'
KNOWN = ["ping", "audit", "probe_report", "probe_train", "bye", "hello", "auth"]


def _junk(rng: random.Random, n: int) -> bytes:
    return bytes(rng.choice(range(256)) for _ in range(n)).replace(b"\n", b" ")


def _bad_value(rng: random.Random) -> object:
    return rng.choice(
        [-1, 2**64, 1.5, "x", None, True, [], {}, [1, "a"], -(2**63), "9" * 30, {"a": 1}]
    )


def gen_message(rng: random.Random, after_hello: bool) -> tuple[bytes, bool]:
    """(bytes to send, close our write side afterwards). Each message is invalid by
    construction, in the state it is sent in."""
    k = rng.randrange(12)
    if k == 0:  # random bytes
        return _junk(rng, rng.randrange(0, 300)) + b"\n", False
    if k == 1:  # invalid UTF-8 inside otherwise JSON-looking text
        return b'{"type":"ping","x":"\xff\xfe' + _junk(rng, 5) + b'"}\n', False
    if k == 2:  # JSON that is not an object
        v = rng.choice(["1", "[]", '"hello"', "null", "true", "[1,2,3]", "-0.5e9", '""'])
        return v.encode() + b"\n", False
    if k == 3:  # object with a missing, empty or non-string type
        t: object = rng.choice([None, "", 1, [], {}, True, 3.5])
        obj: dict[str, object] = {} if t is None else {"type": t}
        obj["x"] = _bad_value(rng)
        return json.dumps(obj).encode() + b"\n", False
    if k == 4:  # unknown type
        name = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz_-!") for _ in range(8))
        return json.dumps({"type": "zz" + name}).encode() + b"\n", False
    if k == 5:  # deep nesting (recursion limits): unbalanced, or too deep to decode
        depth = rng.randrange(500, 30000)
        if rng.random() < 0.5:
            return b'{"type":"ping","x":' + b"[" * depth + b"]" * (depth - 1) + b"}\n", False
        return b'{"type":"ping","x":' + b"[" * 20000 + b"]" * 20000 + b"}\n", False
    if k == 6:  # NaN / Infinity are not JSON
        v = rng.choice(["NaN", "Infinity", "-Infinity"])
        return b'{"type":"ping","id":' + v.encode() + b"}\n", False
    if k == 7:  # truncated, then the client half-closes
        full = json.dumps({"type": "ping", "id": rng.randrange(100)}).encode()
        return full[: rng.randrange(1, len(full) - 1)], True
    if k == 8 and rng.random() < 0.1:  # oversized line (rarer: 64 KiB each)
        return b'{"type":"ping","pad":"' + b"a" * (MAX_MESSAGE + rng.randrange(1, 5000)), False
    if k == 9 and after_hello:  # a known request with bad fields
        kind = rng.choice(["probe_report", "probe_train", "ping"])
        if kind == "probe_report":
            obj = {"type": kind, "trains": rng.choice(["a", [], ["x"], [1] * 40, None, 5])}
        elif kind == "probe_train":
            obj = {"type": kind, "count": rng.choice([0, -1, 10**9, "1", 1.5])}
        else:
            obj = {"type": kind, "id": rng.choice([-1, 2**60, "1", 1.5, True, None, [1]])}
        return json.dumps(obj).encode() + b"\n", False
    if k == 10 and after_hello:  # handshake messages out of state
        return json.dumps({"type": rng.choice(["hello", "auth"])}).encode() + b"\n", False
    if k == 11 and not after_hello:  # a valid request before hello
        return json.dumps({"type": rng.choice(KNOWN[:4])}).encode() + b"\n", False
    return _junk(rng, rng.randrange(1, 60)) + b"\n", False


@pytest.fixture
def serve_port() -> Iterator[int]:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tcpwizard",
            "serve",
            "--bind",
            "127.0.0.1",
            "--port",
            "0",
            "--max-clients",
            str(WORKERS + 2),
        ],
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    line = proc.stderr.readline()
    port = int(line.split(" port ")[1].split()[0])
    # Drain the per-connection log so the pipe never fills and blocks serve.
    drain = threading.Thread(target=lambda: [None for _ in proc.stderr or ()], daemon=True)
    drain.start()
    try:
        yield port
    finally:
        proc.terminate()
        try:
            assert proc.wait(timeout=5) == 0, "serve did not exit cleanly"
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def _fuzz_worker(port: int, seed: int, count: int, failures: list[str]) -> None:
    rng = random.Random(seed)
    for i in range(count):
        after_hello = rng.random() < 0.5
        msg, half_close = gen_message(rng, after_hello)
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
                if after_hello:
                    s.sendall(HELLO)
                # serve may already have answered an oversized line and closed
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    s.sendall(msg)
                if half_close:
                    s.shutdown(socket.SHUT_WR)
                lines = [json.loads(x) for x in read_until_closed(s).splitlines()]
        except (TimeoutError, OSError, ValueError) as exc:
            failures.append(f"seed {seed} #{i} {msg[:60]!r}: {type(exc).__name__}: {exc}")
            continue
        types = [x.get("type") for x in lines]
        expected = (["hello"] if after_hello else []) + ["error"]
        if types != expected:
            failures.append(f"seed {seed} #{i} {msg[:60]!r}: got {types}")


def test_fuzz_control_protocol(serve_port: int) -> None:
    t0 = time.monotonic()
    failures: list[str] = []
    bystander_errors: list[str] = []
    worst = [0.0]
    stop = threading.Event()

    def bystander() -> None:
        try:
            with ControlClient("127.0.0.1", serve_port, timeout=5) as c:
                while not stop.is_set():
                    t = time.monotonic()
                    if c.request({"type": "ping"})["type"] != "pong":
                        bystander_errors.append("no pong")
                    worst[0] = max(worst[0], time.monotonic() - t)
                    stop.wait(0.01)
        except Exception as exc:
            bystander_errors.append(f"{type(exc).__name__}: {exc}")

    b = threading.Thread(target=bystander)
    b.start()
    per = -(-N_MESSAGES // WORKERS)
    workers = [
        threading.Thread(target=_fuzz_worker, args=(serve_port, 1000 + w, per, failures))
        for w in range(WORKERS)
    ]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=60)
    stop.set()
    b.join(timeout=10)
    elapsed = time.monotonic() - t0
    assert not any(w.is_alive() for w in workers), "fuzz workers hung"
    assert failures[:5] == [] and len(failures) == 0
    assert bystander_errors == []
    assert worst[0] < 2.0, f"bystander waited {worst[0]:.2f} s for a pong"
    # After the storm the server still accepts and serves new clients.
    with ControlClient("127.0.0.1", serve_port) as c:
        assert c.request({"type": "ping"})["type"] == "pong"
    assert elapsed < 30


def test_fuzz_udp_reflector(serve_port: int) -> None:
    rng = random.Random(7)
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.connect(("127.0.0.1", serve_port))
    u.settimeout(0.5)
    makers: list[Callable[[], bytes]] = [
        lambda: _junk(rng, rng.randrange(0, 200)),
        lambda: udp.MAGIC + _junk(rng, rng.randrange(0, 80)),
        lambda: udp.pack(rng.randrange(0, 256) % 7, _junk(rng, 8), 1, 2, 3, 4, 64),
    ]
    for _ in range(3000):
        u.send(rng.choice(makers)())
    # None of that earned a reply (no live token); a real session still gets its echo.
    with ControlClient("127.0.0.1", serve_port) as c:
        got = []
        try:
            while True:
                got.append(u.recv(2000))
        except TimeoutError:
            pass
        assert got == []
        u.send(udp.pack(udp.KIND_ECHO, c.udp_token, 9, 1, 42, 0, 64))
        pkt = udp.unpack(u.recv(2000))
        assert pkt is not None and pkt.kind == udp.KIND_ECHO_REPLY and pkt.client_ns == 42
    u.close()
