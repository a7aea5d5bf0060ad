"""Shared-secret challenge-response for serve (HMAC-SHA256, mutual, no secret on the wire).

The server sends a random nonce; the client answers with its own nonce and
HMAC(secret, "client" || server nonce || client nonce); the server checks it in constant
time and proves itself with HMAC(secret, "server" || client nonce || server nonce), so a
client also knows it talks to the real serve and not to something echoing its messages.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import stat

from tcpwizard.exitcodes import UsageError
from tcpwizard.inputs import MAX_SECRET_BYTES, read_bytes

_LABEL = b"tcpwizard-auth-v1"
NONCE_BYTES = 32


def new_nonce() -> str:
    return secrets.token_hex(NONCE_BYTES)


def _mac(secret: bytes, role: bytes, first: str, second: str) -> str:
    msg = b"|".join((_LABEL, role, first.encode(), second.encode()))
    return hmac.new(secret, msg, hashlib.sha256).hexdigest()


def client_proof(secret: bytes, server_nonce: str, client_nonce: str) -> str:
    return _mac(secret, b"client", server_nonce, client_nonce)


def server_proof(secret: bytes, server_nonce: str, client_nonce: str) -> str:
    return _mac(secret, b"server", client_nonce, server_nonce)


def verify(expected: str, got: object) -> bool:
    """Constant-time comparison; anything that is not a string fails."""
    if not isinstance(got, str):
        return False
    return hmac.compare_digest(expected.encode(), got.encode("utf-8", "replace"))


def read_secret_file(path: str) -> tuple[bytes, str | None]:
    """(secret, warning). Trailing whitespace/newlines are not part of the secret, so
    `echo secret > file` works. The warning says when others can read the file."""
    # Through the one input reader: a regular file of at most 4 KiB, never cut silently.
    secret = read_bytes(path, "secret file", MAX_SECRET_BYTES).rstrip()
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        raise UsageError(f"cannot read secret file {path}: {exc.strerror}") from None
    if not secret:
        raise UsageError(f"secret file {path} is empty")
    warning = None
    if mode & (stat.S_IRGRP | stat.S_IROTH):
        warning = f"secret file {path} is readable by other users (chmod 600 it)"
    return secret, warning
