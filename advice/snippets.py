"""setsockopt fixes for applications that set their own buffers (which turns kernel autotuning
off for that socket): code that asks for the size BEFORE connect()/listen() — window scaling
is agreed in the SYN — and checks with getsockopt what the kernel granted."""

from __future__ import annotations

from typing import Literal

from tcpwizard.checks.model import Fix, HostRole

Option = Literal["SO_RCVBUF", "SO_SNDBUF"]


def python_snippet(option: Option, size: int) -> str:
    return f"""import socket

BUF = {size}  # 2 x bandwidth-delay product
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.setsockopt(socket.SOL_SOCKET, socket.{option}, BUF)  # before connect()/listen()
granted = s.getsockopt(socket.SOL_SOCKET, socket.{option})
# Linux reports twice the request (half is bookkeeping); less means net.core.*mem_max capped it.
if granted < 2 * BUF:
    print(f"{option}: asked {{BUF}}, granted {{granted // 2}}; raise net.core.{_core_key(option)}")
"""


def c_snippet(option: Option, size: int) -> str:
    return f"""#include <stdio.h>
#include <sys/socket.h>

int buf = {size};                 /* 2 x bandwidth-delay product */
socklen_t len = sizeof(buf);
int granted = 0;
/* before connect()/listen(): the window scale is fixed in the SYN */
if (setsockopt(fd, SOL_SOCKET, {option}, &buf, sizeof(buf)) < 0) perror("setsockopt");
if (getsockopt(fd, SOL_SOCKET, {option}, &granted, &len) == 0 && granted < 2 * buf)
    fprintf(stderr, "{option}: asked %d, granted %d; raise net.core.{_core_key(option)}\\n",
            buf, granted / 2);
"""


def _core_key(option: Option) -> str:
    return "rmem_max" if option == "SO_RCVBUF" else "wmem_max"


def setsockopt_fix(option: Option, size: int, host: HostRole) -> Fix:
    side = "receiving" if option == "SO_RCVBUF" else "sending"
    return Fix(
        id=f"setsockopt-{option.lower()}",
        kind="setsockopt",
        host=host,
        key=f"setsockopt:{option}",
        value=str(size),
        command=f"setsockopt(fd, SOL_SOCKET, {option}, {size}) before connect()/listen()",
        why=(
            f"an application that fixes its {side} buffer must size it to 2 x BDP; "
            "setting it disables kernel autotuning for that socket"
        ),
        guideline="Tierney, 'TCP Buffer Tuning: Application'; drsFTP paper §3",
        answers=("receiver-window",) if option == "SO_RCVBUF" else ("sender-buffer",),
    )


def pacing_rate_command(bytes_per_s: int) -> str:
    """The one line a fix prints: pace one socket (SO_MAX_PACING_RATE, bytes per second)."""
    return (
        f"setsockopt(fd, SOL_SOCKET, SO_MAX_PACING_RATE, {bytes_per_s}) "
        f"(bytes/s, {bytes_per_s * 8 / 1e6:.3g} Mbit/s)"
    )


def pacing_python_snippet(bytes_per_s: int) -> str:
    return f"""import socket

RATE = {bytes_per_s}  # bytes per second: 90 % of the policed rate
SO_MAX_PACING_RATE = getattr(socket, "SO_MAX_PACING_RATE", 47)  # Linux >= 3.13
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.setsockopt(socket.SOL_SOCKET, SO_MAX_PACING_RATE, RATE)  # TCP paces itself without fq
"""


def pacing_c_snippet(bytes_per_s: int) -> str:
    return f"""#include <stdio.h>
#include <sys/socket.h>

unsigned int rate = {bytes_per_s};  /* bytes per second: 90 % of the policed rate */
/* Linux >= 3.13; TCP paces by itself (no fq qdisc needed since 4.13) */
if (setsockopt(fd, SOL_SOCKET, SO_MAX_PACING_RATE, &rate, sizeof(rate)) < 0)
    perror("setsockopt SO_MAX_PACING_RATE");
"""
