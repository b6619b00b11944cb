"""WB tokens at rest: Fernet (AES-128-CBC + HMAC-SHA256) from `cryptography`, keyed from the environment.

The key comes from OPTIMA_SECRET_KEY; without it, a key is generated once and kept in the state
folder (``secret.key``, mode 0600), which is what the embedded default uses. A database dump alone
therefore reveals no token.
"""

from __future__ import annotations

import os
from pathlib import Path

from cryptography.fernet import Fernet, InvalidToken

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
    try:
        Fernet(key)
    except (ValueError, TypeError):
        raise ConfigError("the token key (OPTIMA_SECRET_KEY or secret.key) is not a valid Fernet key") from None
    return key


def _write_new_key(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(Fernet.generate_key())


class TokenCipher:
    """Encrypts and decrypts WB tokens. Its repr never shows the key."""

    def __init__(self, key: bytes):
        self._fernet = Fernet(key)

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
