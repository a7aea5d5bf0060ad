"""Rich progress bars for test transfers (stderr; the data on stdout stays plain)."""

from __future__ import annotations

from typing import Self, TextIO

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeRemainingColumn

from tcpwizard.measure.farends.interface import Progress as TransferProgress
from tcpwizard.updown import UpDown


class ProgressDisplay(UpDown):
    """A callable for run_transfer(progress=...): one bar per mode and direction."""

    def __init__(self, stream: TextIO, enabled: bool = True) -> None:
        self._console = Console(file=stream, no_color=not enabled)
        self._progress = Progress(
            TextColumn("{task.description:<22}"),
            BarColumn(),
            TextColumn("{task.fields[rate]:>14}"),
            TimeRemainingColumn(),
            console=self._console,
            transient=False,
            disable=not self._console.is_terminal,
        )
        self._tasks: dict[tuple[str, str], TaskID] = {}

    def __call__(self, ev: TransferProgress) -> None:
        key = (ev.mode, ev.direction)
        total = ev.total_s if ev.total_s is not None else float(ev.total_bytes or 1)
        done = ev.t_s if ev.total_s is not None else float(ev.bytes)
        if ev.phase == "start" or key not in self._tasks:
            self._tasks[key] = self._progress.add_task(
                f"{ev.mode} {ev.direction}", total=total, rate=""
            )
        task = self._tasks[key]
        if ev.phase == "done":
            rate = f"{ev.goodput_mbps:.1f} Mbit/s"
            if ev.result is not None and ev.result.error:
                rate = "failed"
            self._progress.update(task, completed=total, rate=rate)
        else:
            self._progress.update(
                task, completed=min(done, total), rate=f"{ev.goodput_mbps:.1f} Mbit/s"
            )

    def up(self) -> Self:
        self._progress.start()
        return self

    def down(self) -> None:
        self._progress.stop()
