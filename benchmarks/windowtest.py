"""A fixed-receive-window transfer: the receiver sets SO_RCVBUF before listen (so the window
is fixed at the SYN and autotuning is off), the sender just sends. Run inside lab hosts:

    python benchmarks/windowtest.py recv --bind ADDR --rcvbuf 65536 --seconds 6
    python benchmarks/windowtest.py send --to ADDR --seconds 6

The receiver prints JSON: steady-state goodput (after --warmup) and what the kernel granted.
The sender prints the largest peer window it saw (tcpi_snd_wnd from TCP_INFO): the window
the receiver really advertised, to compare with window/RTT.
"""

from __future__ import annotations

import argparse
import json
import socket
import struct
import sys
import time

PORT = 5299
TCP_INFO_LEN = 240
TCPI_SND_WND_OFFSET = 228  # struct tcp_info, Linux >= 5.4 (after tcpi_rcv_ooopack)


def receive(bind: str, rcvbuf: int, seconds: float, warmup: float) -> dict[str, float]:
    family = socket.AF_INET6 if ":" in bind else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as srv:
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # Before listen(): the accepted socket inherits it and the SYN-ACK's window scale
        # is chosen for it.
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        srv.bind((bind, PORT))
        srv.listen(1)
        srv.settimeout(seconds + 30)
        print("listening", flush=True)
        conn, _ = srv.accept()
        with conn:
            conn.settimeout(seconds + 30)
            granted = conn.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
            buf = bytearray(1 << 16)
            total = 0
            start = mark_t = 0.0
            mark_bytes = 0
            while True:
                n = conn.recv_into(buf)
                if not n:
                    break
                now = time.monotonic()
                if not start:
                    start = now
                total += n
                if not mark_t and now - start >= warmup:
                    mark_t, mark_bytes = now, total
                last = now
    steady = (total - mark_bytes) * 8 / (last - mark_t) if mark_t and last > mark_t else 0.0
    return {"bytes": total, "steady_bps": steady, "rcvbuf_granted": granted}


def send(to: str, seconds: float) -> dict[str, float]:
    payload = b"\0" * (1 << 16)
    max_wnd = 0
    with socket.create_connection((to, PORT), timeout=10) as s:
        s.settimeout(seconds + 30)
        end = time.monotonic() + seconds
        next_info = 0.0
        while (now := time.monotonic()) < end:
            s.sendall(payload)
            if now >= next_info:
                next_info = now + 0.05
                info = s.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, TCP_INFO_LEN)
                if len(info) >= TCPI_SND_WND_OFFSET + 4:
                    (wnd,) = struct.unpack_from("I", info, TCPI_SND_WND_OFFSET)
                    max_wnd = max(max_wnd, wnd)
        s.shutdown(socket.SHUT_WR)
        s.recv(1)
    return {"max_snd_wnd": max_wnd}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="benchmarks/windowtest.py")
    sub = p.add_subparsers(dest="role", required=True)
    r = sub.add_parser("recv")
    r.add_argument("--bind", required=True)
    r.add_argument("--rcvbuf", type=int, default=65536)
    r.add_argument("--seconds", type=float, default=6.0)
    r.add_argument("--warmup", type=float, default=1.0)
    s = sub.add_parser("send")
    s.add_argument("--to", required=True)
    s.add_argument("--seconds", type=float, default=6.0)
    args = p.parse_args(argv)
    if args.role == "recv":
        result = receive(args.bind, args.rcvbuf, args.seconds, args.warmup)
    else:
        result = send(args.to, args.seconds)
    json.dump(result, sys.stdout)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
