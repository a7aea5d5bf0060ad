"""What is used one way: `with` brings it up and tears it down however the block ends (the
lab's emulated paths and hosts, a control connection to serve, the transfer progress bars)."""

from __future__ import annotations

import abc
from types import TracebackType
from typing import Self


class UpDown(abc.ABC):
    @abc.abstractmethod
    def up(self) -> Self:
        """Build it; ready to use when this returns."""

    @abc.abstractmethod
    def down(self) -> None:
        """Remove whatever of it exists; safe to call any number of times."""

    def __enter__(self) -> Self:
        return self.up()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.down()
