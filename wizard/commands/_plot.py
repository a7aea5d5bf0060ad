"""`--plot DIR` for check and transfer: capture the run's TCP packets with tcpdump and draw
a time-sequence graph (PNG and SVG) per flow that carried data."""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import socket
import tempfile
from collections.abc import Iterator

from tcpwizard.context import Context
from tcpwizard.exitcodes import Unavailable


def _address(host: str) -> str:
    try:
        return str(socket.getaddrinfo(host, None, 0, socket.SOCK_STREAM)[0][4][0])
    except (socket.gaierror, UnicodeError, IndexError):
        raise Unavailable(f"cannot resolve host {host!r}") from None


def plot_capture(pcap: str, out_dir: str, ctx: Context, remote: str | None = None) -> int:
    """Draw every data-carrying flow of `pcap`; returns how many."""
    from tcpwizard.measure.observe.tsg import series_from_capture
    from tcpwizard.output.tsg_plot import plot_all, require_matplotlib

    require_matplotlib()
    series = series_from_capture(pcap)
    written = plot_all(series, out_dir, remote)
    ctx.progress(f"time-sequence graphs: {len(series)} flows, {len(written)} files in {out_dir}")
    return len(series)


def plot_ready(args: argparse.Namespace) -> None:
    """With --plot, the graphs can be drawn (matplotlib, the `plot` extra): said before any
    measurement, not after it."""
    if getattr(args, "plot", None):
        from tcpwizard.output.tsg_plot import require_matplotlib

        require_matplotlib()


@contextlib.contextmanager
def plotting(args: argparse.Namespace, ctx: Context, host: str) -> Iterator[None]:
    """The body runs under tcpdump when --plot was given; the graphs are drawn after it."""
    out_dir = getattr(args, "plot", None)
    if not out_dir:
        yield
        return
    from tcpwizard.measure.observe.tsg import TcpdumpCapture

    plot_ready(args)
    remote = _address(host)
    tmp = tempfile.mkdtemp(prefix="tcpwizard-plot-")
    pcap = os.path.join(tmp, "run.pcap")
    try:
        with TcpdumpCapture(pcap, remote):
            yield
        plot_capture(pcap, out_dir, ctx, remote)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
