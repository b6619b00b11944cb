"""The one loader of the project's .sql files: each module's SQL sits in the ``sql/`` folder beside it
(packaged by setup.py) and is read once per process."""

from __future__ import annotations

from functools import cache
from pathlib import Path


class SqlFiles:
    """``SqlFiles(__file__)("name")``: the text of ``sql/name.sql`` beside the calling module."""

    def __init__(self, module_file: str):
        self.folder = Path(module_file).resolve().parent / "sql"

    def __call__(self, name: str) -> str:
        return _read(self.folder / f"{name}.sql")


@cache
def _read(path: Path) -> str:
    return path.read_text()
