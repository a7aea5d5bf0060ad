"""Reading kernel settings from a /proc/sys tree whose root is injectable.

The root is `/proc/sys` in production; tests point it at a fake tree in tmp_path, and a
process started with `ip netns exec NS` sees that namespace's own values under the real root.
"""

from __future__ import annotations

from pathlib import Path

from tcpwizard.exitcodes import ExitCode, TcpWizardError


class SysctlError(TcpWizardError):
    """A setting could not be read: the audit cannot complete (exit 3, UNKNOWN)."""

    exit_code = ExitCode.UNKNOWN

    def __init__(self, key: str, reason: str) -> None:
        super().__init__(f"cannot read sysctl {key}: {reason}")
        self.key = key
        self.reason = reason


class SysctlMissing(SysctlError):
    """The entry does not exist under the reader's root (not this kernel, not this netns)."""


class SysctlReader:
    """Reads `net.ipv4.tcp_rmem` from `<root>/net/ipv4/tcp_rmem`. Values are whitespace
    normalised (the kernel separates vector entries with tabs)."""

    def __init__(self, root: str | Path = "/proc/sys") -> None:
        self.root = Path(root)

    def path(self, key: str) -> Path:
        return self.root.joinpath(*key.split("."))

    def exists(self, key: str) -> bool:
        return self.path(key).is_file()

    def read(self, key: str) -> str:
        if not self.root.is_dir():
            raise SysctlMissing(key, f"{self.root} is not a directory (is /proc mounted?)")
        path = self.path(key)
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            raise SysctlMissing(key, f"{path} does not exist") from None
        except OSError as exc:
            raise SysctlError(key, f"{path}: {exc.strerror or exc}") from None
        return " ".join(text.split())

    def read_optional(self, key: str) -> str | None:
        """None when the entry is absent, e.g. global settings hidden in a child netns."""
        try:
            return self.read(key)
        except SysctlMissing:
            return None

    def read_ints(self, key: str, count: int | None = None) -> tuple[int, ...]:
        text = self.read(key)
        try:
            values = tuple(int(v) for v in text.split())
        except ValueError:
            raise SysctlError(key, f"expected integers, found {text!r}") from None
        if count is not None and len(values) != count:
            raise SysctlError(key, f"expected {count} integers, found {text!r}")
        return values

    def read_int(self, key: str) -> int:
        return self.read_ints(key, 1)[0]
