"""WB tokens at rest: Fernet (AES-128-CBC + HMAC-SHA256) from `cryptography`, keyed from the environment.

The key comes from OPTIMA_SECRET_KEY; without it, a key is generated once and kept in the state
folder (``secret.key``, mode 0600), which is what the embedded default uses. A database dump alone
therefore reveals no token.

Either may hold several keys (comma- or newline-separated), newest first: tokens are encrypted with
the first and decrypted with any (``MultiFernet``). That is how a key is rotated without a moment
when some process cannot read some token (``optima-pipelines cabinets rotate-key``).
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

from cryptography.fernet import Fernet, InvalidToken, MultiFernet

from optima_pipelines.errors import ConfigError
from optima_pipelines.settings import Settings

KEY_FILE = "secret.key"


def load_key(settings: Settings, *, create: bool = True) -> bytes:
    if settings.secret_key:
        key = settings.secret_key.encode()
    else:
        path = settings.state_dir / KEY_FILE
        if not path.exists():
            if not create:
                raise ConfigError(f"OPTIMA_SECRET_KEY is not set and {path} does not exist")
            _write_new_key(path)
        key = path.read_bytes().strip()
    split_keys(key)  # validates
    return key


def key_source(settings: Settings) -> str:
    """Which key is in use, for a message: where it comes from and a fingerprint (never the key)."""
    key = settings.secret_key.encode() if settings.secret_key else None
    where = "OPTIMA_SECRET_KEY" if key is not None else str(settings.state_dir / KEY_FILE)
    if key is None:
        try:
            key = (settings.state_dir / KEY_FILE).read_bytes().strip()
        except OSError:
            return where
    return f"{where} (fingerprint {hashlib.sha256(key).hexdigest()[:12]})"


def split_keys(material: bytes) -> list[bytes]:
    """The keys in OPTIMA_SECRET_KEY / secret.key, newest first; raises ConfigError naming a bad one."""
    keys = [k for k in re.split(rb"[,\s]+", material.strip()) if k]
    if not keys:
        raise ConfigError("the token key (OPTIMA_SECRET_KEY or secret.key) is empty")
    for position, key in enumerate(keys, 1):
        try:
            Fernet(key)
        except (ValueError, TypeError):
            raise ConfigError(
                f"the token key (OPTIMA_SECRET_KEY or secret.key) is not a valid Fernet key (key {position} "
                f"of {len(keys)})"
            ) from None
    return keys


def write_key_file(path: Path, keys: list[bytes]) -> None:
    """Replace the key file atomically (mode 0600): readers see the old or the new file, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(b"\n".join(keys) + b"\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def _write_new_key(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(Fernet.generate_key())


class TokenCipher:
    """Encrypts and decrypts WB tokens. Its repr never shows the key.

    ``key`` is one Fernet key or several (comma/newline-separated, newest first).
    """

    def __init__(self, key: bytes):
        self._fernet = MultiFernet([Fernet(k) for k in split_keys(key)])

    def __repr__(self) -> str:
        return "TokenCipher(<key hidden>)"

    def encrypt(self, token: str) -> bytes:
        return self._fernet.encrypt(token.encode())

    def decrypt(self, blob: bytes) -> str:
        try:
            return self._fernet.decrypt(bytes(blob)).decode()
        except InvalidToken:
            raise ConfigError(
                "a stored WB token cannot be decrypted with the current key (was the key rotated?)"
            ) from None

    def reencrypt(self, blob: bytes) -> bytes:
        """The same token under the first (newest) key; raises ConfigError if no key can read it."""
        try:
            return self._fernet.rotate(bytes(blob))
        except InvalidToken:
            raise ConfigError("a stored WB token cannot be decrypted with any of the given keys") from None
