"""Cabinets (seller accounts): the table every fan-out reads, and the tokens they carry."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

import psycopg
from psycopg import sql

from optima_pipelines.errors import ConfigError, InvalidInput, UnknownCabinet
from optima_pipelines.secrets import TokenCipher

CABINET_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
STATUSES = ("active", "paused", "token_invalid", "archived")


@dataclass(frozen=True)
class Cabinet:
    id: str
    name: str
    status: str
    has_token: bool
    created_at: datetime
    updated_at: datetime

    @property
    def active(self) -> bool:
        return self.status == "active"


def validate_cabinet_id(cabinet_id: str) -> str:
    if not CABINET_ID_RE.match(cabinet_id or ""):
        raise InvalidInput(
            f"invalid cabinet id {cabinet_id!r}: use 1-64 letters, digits, '_', '.' or '-', "
            "starting with a letter or digit"
        )
    return cabinet_id


def validate_status(status: str) -> str:
    if status not in STATUSES:
        raise InvalidInput(f"invalid status {status!r}: expected one of {', '.join(STATUSES)}")
    return status


_COLUMNS = sql.SQL("id, name, status, wb_token_encrypted IS NOT NULL, created_at, updated_at")


def add_cabinet(
    conn: psycopg.Connection, cipher: TokenCipher, cabinet_id: str, name: str, token: str | None, status: str = "active"
) -> Cabinet:
    validate_cabinet_id(cabinet_id)
    validate_status(status)
    if token is not None and not token.strip():
        raise InvalidInput("the WB token is empty")
    blob = cipher.encrypt(token.strip()) if token else None
    try:
        row = conn.execute(
            sql.SQL(
                """INSERT INTO cabinets (id, name, status, wb_token_encrypted, token_updated_at)
                VALUES (%s, %s, %s, %s, CASE WHEN %s::bytea IS NULL THEN NULL ELSE now() END)
                RETURNING {}"""
            ).format(_COLUMNS),
            (cabinet_id, name, status, blob, blob),
        ).fetchone()
    except psycopg.errors.UniqueViolation:
        raise InvalidInput(f"cabinet {cabinet_id!r} already exists") from None
    assert row is not None
    return Cabinet(*row)


def list_cabinets(conn: psycopg.Connection, *, status: str | None = None) -> list[Cabinet]:
    if status is not None:
        validate_status(status)
        rows = conn.execute(
            sql.SQL("SELECT {} FROM cabinets WHERE status = %s ORDER BY id").format(_COLUMNS), (status,)
        ).fetchall()
    else:
        rows = conn.execute(sql.SQL("SELECT {} FROM cabinets ORDER BY id").format(_COLUMNS)).fetchall()
    return [Cabinet(*r) for r in rows]


def get_cabinet(conn: psycopg.Connection, cabinet_id: str) -> Cabinet:
    row = conn.execute(sql.SQL("SELECT {} FROM cabinets WHERE id = %s").format(_COLUMNS), (cabinet_id,)).fetchone()
    if row is None:
        raise UnknownCabinet(cabinet_id)
    return Cabinet(*row)


def set_status(conn: psycopg.Connection, cabinet_id: str, status: str) -> Cabinet:
    validate_status(status)
    row = conn.execute(
        sql.SQL("UPDATE cabinets SET status = %s, updated_at = now() WHERE id = %s RETURNING {}").format(_COLUMNS),
        (status, cabinet_id),
    ).fetchone()
    if row is None:
        raise UnknownCabinet(cabinet_id)
    return Cabinet(*row)


def set_token(conn: psycopg.Connection, cipher: TokenCipher, cabinet_id: str, token: str) -> None:
    if not token.strip():
        raise InvalidInput("the WB token is empty")
    cur = conn.execute(
        "UPDATE cabinets SET wb_token_encrypted = %s, token_updated_at = now(), updated_at = now() WHERE id = %s",
        (cipher.encrypt(token.strip()), cabinet_id),
    )
    if cur.rowcount == 0:
        raise UnknownCabinet(cabinet_id)


def get_token(conn: psycopg.Connection, cipher: TokenCipher, cabinet_id: str) -> str:
    row = conn.execute("SELECT wb_token_encrypted FROM cabinets WHERE id = %s", (cabinet_id,)).fetchone()
    if row is None:
        raise UnknownCabinet(cabinet_id)
    if row[0] is None:
        raise InvalidInput(f"cabinet {cabinet_id!r} has no WB token")
    return cipher.decrypt(row[0])


def rotate_key(conn: psycopg.Connection, old: TokenCipher, new: TokenCipher) -> int:
    """Re-encrypt every token under a new key in one transaction; returns how many were re-encrypted."""
    rows = conn.execute(
        "SELECT id, wb_token_encrypted FROM cabinets WHERE wb_token_encrypted IS NOT NULL FOR UPDATE"
    ).fetchall()
    for cabinet_id, blob in rows:
        try:
            token = old.decrypt(blob)
        except ConfigError as exc:
            raise ConfigError(f"cabinet {cabinet_id!r}: {exc}") from None
        conn.execute("UPDATE cabinets SET wb_token_encrypted = %s WHERE id = %s", (new.encrypt(token), cabinet_id))
    return len(rows)
