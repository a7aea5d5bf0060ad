"""What the lab brings up and tears down (an emulated path, a mesh of hosts, cross traffic)
is used the one way the product's own such things are (tcpwizard.updown)."""

from __future__ import annotations

from tcpwizard.updown import UpDown

__all__ = ["UpDown"]
