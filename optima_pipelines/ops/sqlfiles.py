"""Loads the .sql files that sit beside the ops modules (packaged by setup.py's ``**/*.sql``)."""

from __future__ import annotations

from functools import cache
from pathlib import Path

_DIR = Path(__file__).resolve().parent / "sql"


@cache
def load(name: str) -> str:
    return (_DIR / f"{name}.sql").read_text()
