"""`tcpwizard tui`: the check pipeline, live, in a Textual app."""

from __future__ import annotations

from tcpwizard.tui.app import Services, TcpWizardApp

__all__ = ["Services", "TcpWizardApp"]
