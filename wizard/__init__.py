"""tcpwizard: close the wizard gap for TCP over long fat networks."""

__version__ = "0.1.0"
TOOL_NAME = "tcpwizard"
