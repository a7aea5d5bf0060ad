"""The one reader for every file tcpwizard reads (plan, backup, targets, secret, sysctl.d conf,
history database header), and the one set of checks on command-line values.

Files may come from another host or be a typo for a device (`/dev/zero`, a FIFO), so each read
is bounded, must be a regular file, must be UTF-8 where it is text and, for JSON, shallow
enough that parsing cannot exhaust the stack. Every failure is an InputError: one line that
names the file, mapped to an exit code at the CLI's edge.
"""

from __future__ import annotations

import ipaddress
import json
import math
import os
import stat
from typing import Any

from tcpwizard.exitcodes import ExitCode, TcpWizardError
from tcpwizard.units import parse_duration, parse_percent, parse_rate, parse_size

MAX_TEXT_BYTES = 1 << 20  # plans, backups, targets and confs are kilobytes; 1 MiB is generous
MAX_SECRET_BYTES = 4096
MAX_JSON_DEPTH = 64  # a check report nests about 8 deep


class InputError(TcpWizardError):
    """A file or value the user gave that cannot be used as it is."""

    exit_code = ExitCode.DATA_ERROR


def read_bytes(path: str, what: str, max_bytes: int = MAX_TEXT_BYTES) -> bytes:
    """The whole content of a regular file of at most `max_bytes`. A missing or unreadable
    file is a usage error (64); a file of the wrong kind or size is a data error (65)."""
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer before we can refuse it.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise InputError(
            f"cannot read {what} {path}: {exc.strerror or exc}", ExitCode.USAGE
        ) from None
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise InputError(f"{what} {path} is a directory, not a file")
        if not stat.S_ISREG(st.st_mode):
            raise InputError(f"{what} {path} is not a regular file")
        if st.st_size > max_bytes:
            raise InputError(f"{what} {path} is too large ({st.st_size} bytes, limit {max_bytes})")
        chunks: list[bytes] = []
        total = 0
        while True:
            try:
                chunk = os.read(fd, 65536)
            except OSError as exc:
                raise InputError(
                    f"cannot read {what} {path}: {exc.strerror or exc}", ExitCode.USAGE
                ) from None
            if not chunk:
                break
            total += len(chunk)
            if total > max_bytes:  # the file grew while we read it
                raise InputError(f"{what} {path} is larger than {max_bytes} bytes")
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def decode_text(data: bytes, path: str, what: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(
            f"{what} {path} is not UTF-8 text (byte {exc.start}: {exc.reason})"
        ) from None


def read_text(path: str, what: str, max_bytes: int = MAX_TEXT_BYTES) -> str:
    return decode_text(read_bytes(path, what, max_bytes), path, what)


def read_text_if_exists(path: str, what: str, max_bytes: int = MAX_TEXT_BYTES) -> str | None:
    """None when nothing is at `path` (a file we may create); everything else as read_text."""
    try:
        os.lstat(path)
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        raise InputError(f"{what} {path}: a parent of it is a file, not a directory") from None
    except OSError as exc:
        raise InputError(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    return read_text(path, what, max_bytes)


def json_depth_ok(text: str, limit: int = MAX_JSON_DEPTH) -> bool:
    """True when brackets outside strings never nest deeper than `limit`, checked before
    json.loads so a 100k-deep document is refused instead of hitting the recursion limit."""
    depth = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            if depth > limit:
                return False
        elif ch in "]}":
            depth -= 1
    return True


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def parse_json(text: str, path: str, what: str) -> Any:
    if not json_depth_ok(text):
        raise InputError(f"{what} {path} nests deeper than {MAX_JSON_DEPTH} levels")
    try:
        return json.loads(text, parse_constant=_no_constants)
    except (ValueError, RecursionError) as exc:
        raise InputError(f"{what} {path} is not JSON ({exc})") from None


def read_json(path: str, what: str, max_bytes: int = MAX_TEXT_BYTES) -> Any:
    return parse_json(read_text(path, what, max_bytes), path, what)


# -- command-line values -------------------------------------------------------------------


def check_port(text: str, what: str = "port", listen: bool = False) -> int:
    """1-65535, as every subcommand's --port, --tcp-port and ADDR:PORT take it; a port to
    listen on may also be 0 (any free port)."""
    value = text.strip()
    lo = 0 if listen else 1
    if not value.isascii() or not value.isdigit() or not lo <= int(value) <= 65535:
        raise InputError(
            f"{what} must be a number from {lo} to 65535, not {text!r}", ExitCode.USAGE
        )
    return int(value)


def _is_ipv6(host: str) -> bool:
    """An IPv6 literal, with or without a %zone."""
    try:
        ipaddress.IPv6Address(host.split("%", 1)[0])
    except ValueError:
        return False
    return True


def check_host(text: str, what: str = "host") -> str:
    """A host name or an IP literal; an IPv6 literal with or without [brackets]. Returns
    the host without brackets, the form getaddrinfo takes."""
    host = text.strip()
    if host.startswith("[") or host.endswith("]"):
        if not (host.startswith("[") and host.endswith("]")):
            raise InputError(f"{what} {text!r} has an unbalanced bracket", ExitCode.USAGE)
        inner = host[1:-1]
        if not _is_ipv6(inner):
            raise InputError(f"{what} {text!r}: only IPv6 addresses go in brackets", ExitCode.USAGE)
        return inner
    if not host:
        raise InputError(f"{what} is empty", ExitCode.USAGE)
    if "://" in host or "/" in host:
        raise InputError(
            f"{what} {text!r} is not a host name or address (give the host without a URL "
            "scheme or path)",
            ExitCode.USAGE,
        )
    if ":" in host:
        if not _is_ipv6(host):
            raise InputError(
                f"{what} {text!r} is not an IPv6 address (a port goes in --port)", ExitCode.USAGE
            )
        return host
    if len(host) > 253 or any(c.isspace() or not c.isprintable() for c in host):
        raise InputError(f"{what} {text!r} is not a host name", ExitCode.USAGE)
    return host


def split_host_port(text: str, what: str, listen: bool = False) -> tuple[str, int | None]:
    """HOST, HOST:PORT, [V6]:PORT or a bare IPv6 literal (port 0 only when `listen`)."""
    value = text.strip()
    if "://" in value:
        raise InputError(
            f"{what}: {text!r} is a URL; give HOST or HOST:PORT ([V6]:PORT)", ExitCode.USAGE
        )
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            raise InputError(f"{what}: {text!r} has an unbalanced bracket", ExitCode.USAGE)
        host, rest = value[: end + 1], value[end + 1 :]
        if rest and not rest.startswith(":"):
            raise InputError(f"{what}: unexpected {rest!r} after {host}", ExitCode.USAGE)
        port = rest[1:] if rest else ""
    elif value.count(":") == 1:
        host, port = value.split(":")
    else:
        host, port = value, ""
    clean = check_host(host, what)
    if not port and not value.endswith(":"):
        return clean, None
    return clean, check_port(port, f"{what}: port", listen=listen)


# -- what a duration, a rate, a size, a share and an MTU are ----------------------------------
# One rule each for every flag and every KEY=VALUE list that takes one. The messages name no
# subject: argparse (through argtypes) puts the flag in front, a KEY=VALUE parser the key.

MIN_MTU = 576  # the datagram every IPv4 host must take (RFC 791)
MIN_MTU_IPV6 = 1280  # RFC 8200: a link that carries IPv6
MAX_MTU = 9000  # jumbo frames


def _not_negative(text: str) -> None:
    # Caught before units reads it, so `-5ms` says "positive", not "cannot read".
    if text.strip().startswith("-"):
        raise InputError(f"must be positive, not {text!r}", ExitCode.USAGE)


def _checked_amount(value: float, text: str, zero_ok: bool) -> float:
    if not math.isfinite(value) or value < 0 or (value == 0 and not zero_ok):
        raise InputError(f"must be a finite positive value, not {text!r}", ExitCode.USAGE)
    return value


def check_duration(text: str, default_unit: str = "ms", zero_ok: bool = False) -> float:
    """Seconds, finite and positive (or zero when `zero_ok`: a jitter, a lab without delay).
    A bare number is in `default_unit`."""
    _not_negative(text)
    return _checked_amount(parse_duration(text, default_unit), text, zero_ok)


def check_rate(text: str) -> float:
    """Bits per second, finite and positive."""
    _not_negative(text)
    return _checked_amount(parse_rate(text), text, zero_ok=False)


def check_size(text: str) -> int:
    """Bytes, at least one."""
    _not_negative(text)
    return round(_checked_amount(float(parse_size(text)), text, zero_ok=False))


def check_share(text: str) -> float:
    """A share of packets, like a loss rate: '0.5%' or 0.005, from 0 up to but not
    including 100% (a link that drops everything is no path)."""
    _not_negative(text)
    share = parse_percent(text)
    if share >= 1.0:
        raise InputError(f"must be below 100%, not {text!r}", ExitCode.USAGE)
    return share


def check_mtu(text: str, lowest: int = MIN_MTU) -> int:
    """Bytes of the largest IP packet a link carries: a whole number from `lowest` (576 for
    IPv4, MIN_MTU_IPV6 where IPv6 must pass) to 9000."""
    value = text.strip()
    if not value.isascii() or not value.isdigit() or not lowest <= int(value) <= MAX_MTU:
        raise InputError(
            f"must be a whole number of bytes from {lowest} to {MAX_MTU}, not {text!r}",
            ExitCode.USAGE,
        )
    return int(value)
