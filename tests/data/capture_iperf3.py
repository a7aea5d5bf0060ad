"""Record the control connection of a real iperf3 client/server session through a relay.

Usage: python tests/data/capture_iperf3.py tests/data/NAME [iperf3 client flags]; writes
NAME.c2s and NAME.s2c (the bytes each way). Not part of the test run: it made the
captures tests/test_iperf3_codec.py replays (iperf3 3.12 from Debian, loopback).
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import threading
import time

SERVER_PORT, RELAY_PORT = 15301, 15302


def _pipe(a: socket.socket, b: socket.socket, log: list[bytes] | None) -> None:
    while True:
        try:
            data = a.recv(65536)
        except OSError:
            break
        if not data:
            break
        if log is not None:
            log.append(data)
        try:
            b.sendall(data)
        except OSError:
            break
    with contextlib.suppress(OSError):
        b.shutdown(socket.SHUT_WR)


def main(out: str, args: list[str]) -> None:
    server = subprocess.Popen(
        ["iperf3", "-s", "-1", "-p", str(SERVER_PORT)], stdout=subprocess.DEVNULL
    )
    time.sleep(0.5)
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", RELAY_PORT))
    listener.listen(16)
    logs: list[tuple[list[bytes], list[bytes]]] = []

    def relay() -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", SERVER_PORT))
            first = not logs
            up: list[bytes] = []
            down: list[bytes] = []
            if first:  # the control connection; data connections are relayed unrecorded
                logs.append((up, down))
            threading.Thread(
                target=_pipe, args=(client, upstream, up if first else None), daemon=True
            ).start()
            threading.Thread(
                target=_pipe, args=(upstream, client, down if first else None), daemon=True
            ).start()

    threading.Thread(target=relay, daemon=True).start()
    argv = ["iperf3", "-c", "127.0.0.1", "-p", str(RELAY_PORT), "-t", "1", "-b", "20M"]
    subprocess.run([*argv, "--get-server-output", *args], stdout=subprocess.DEVNULL, check=True)
    time.sleep(0.5)
    up, down = logs[0]
    with open(out + ".c2s", "wb") as f:
        f.write(b"".join(up))
    with open(out + ".s2c", "wb") as f:
        f.write(b"".join(down))
    server.wait(timeout=5)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
