"""The lab's TUN asks for UDP segmentation offload beside TCP's, and a kernel that refuses
USO (before Linux 6.2) still gets TCP's: the ioctl is replayed without the UDP flags."""

from __future__ import annotations

import fcntl
import os
from typing import Any

import pytest

from tcpwizard.lab import tun


def _open_with(monkeypatch: pytest.MonkeyPatch, refuse: int) -> list[int]:
    """open_tun with every ioctl recorded, TUNSETOFFLOAD refused for the flags `refuse`."""
    asked: list[int] = []

    def ioctl(fd: int, request: int, arg: Any) -> int:
        if request == tun.TUNSETOFFLOAD:
            asked.append(arg)
            if arg == refuse:
                raise OSError(22, "Invalid argument")
        return 0

    monkeypatch.setattr(os, "open", lambda *a, **k: 99)
    monkeypatch.setattr(os, "close", lambda fd: None)
    monkeypatch.setattr(fcntl, "ioctl", ioctl)
    assert tun.open_tun("wan0", vnet=True, offload=True) == 99
    return asked


def test_the_tun_asks_for_udp_and_tcp_segmentation(monkeypatch: pytest.MonkeyPatch) -> None:
    asked = _open_with(monkeypatch, refuse=-1)
    assert asked == [tun.GSO_OFFLOADS_UDP]
    assert asked[0] & tun.TUN_F_USO4 and asked[0] & tun.TUN_F_USO6
    assert asked[0] & tun.TUN_F_TSO4 and asked[0] & tun.TUN_F_CSUM


def test_a_kernel_without_uso_keeps_tcp_offload(monkeypatch: pytest.MonkeyPatch) -> None:
    asked = _open_with(monkeypatch, refuse=tun.GSO_OFFLOADS_UDP)
    assert asked == [tun.GSO_OFFLOADS_UDP, tun.GSO_OFFLOADS]
    assert not asked[1] & (tun.TUN_F_USO4 | tun.TUN_F_USO6)
