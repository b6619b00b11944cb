"""Cabinets (seller accounts): the table every fan-out reads, and the tokens they carry."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

import psycopg
from psycopg import sql

from optima_pipelines.errors import ConfigError, InvalidInput, UnknownCabinet
from optima_pipelines.warehouse.secrets import TokenCipher
from optima_pipelines.wb.http import token_problem

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
    #: When and why WB rejected the token (status token_invalid); cleared by a new token.
    token_rejected_at: datetime | None = None
    token_rejected_reason: str | None = None

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


#: A display name: shown in lists and the UI, so bounded and printable.
MAX_NAME_LENGTH = 200


def validate_name(name: str) -> str:
    if not name.strip():
        raise InvalidInput("the cabinet name is empty")
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidInput(f"the cabinet name is longer than {MAX_NAME_LENGTH} characters ({len(name)})")
    if not name.isprintable():
        raise InvalidInput("the cabinet name has control characters (line breaks, tabs, escapes)")
    return name


def validate_token(token: str) -> str:
    """The token as stored (ends stripped), or InvalidInput: the WB client's own rule, so a token it
    would refuse at the first sync is refused when it is given. Never echoes the token."""
    problem = token_problem(token)
    if problem is not None:
        raise InvalidInput(f"the WB token is {problem}")
    return token.strip()


def validate_status(status: str) -> str:
    if status not in STATUSES:
        raise InvalidInput(f"invalid status {status!r}: expected one of {', '.join(STATUSES)}")
    return status


_COLUMNS = sql.SQL(
    "id, name, status, wb_token_encrypted IS NOT NULL, created_at, updated_at, token_rejected_at, token_rejected_reason"
)


def add_cabinet(
    conn: psycopg.Connection, cipher: TokenCipher, cabinet_id: str, name: str, token: str | None, status: str = "active"
) -> Cabinet:
    validate_cabinet_id(cabinet_id)
    validate_name(name)
    validate_status(status)
    blob = cipher.encrypt(validate_token(token)) if token is not None else None
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
    """Replace the token; a cabinet whose old token WB rejected (token_invalid) is active again."""
    cur = conn.execute(
        "UPDATE cabinets SET wb_token_encrypted = %s, token_updated_at = now(), updated_at = now(), "
        "status = CASE WHEN status = 'token_invalid' THEN 'active' ELSE status END, "
        "token_rejected_at = NULL, token_rejected_reason = NULL WHERE id = %s",
        (cipher.encrypt(validate_token(token)), cabinet_id),
    )
    if cur.rowcount == 0:
        raise UnknownCabinet(cabinet_id)


def check_key(conn: psycopg.Connection, cipher: TokenCipher, source: str, *, replacing: str | None = None) -> None:
    """ConfigError unless ``cipher`` decrypts every stored token (but ``replacing``'s, about to be
    replaced): a token stored under another key than the others' would fail every sync of its
    cabinet, and the others' tokens would still not open. ``source`` names the key in use."""
    rows = conn.execute(
        "SELECT id, wb_token_encrypted FROM cabinets WHERE wb_token_encrypted IS NOT NULL AND id IS DISTINCT FROM %s "
        "ORDER BY id",
        (replacing,),
    ).fetchall()
    unreadable = []
    for cabinet_id, blob in rows:
        try:
            cipher.decrypt(blob)
        except ConfigError:
            unreadable.append(cabinet_id)
    if unreadable:
        more = f" (and {len(unreadable) - 1} more)" if len(unreadable) > 1 else ""
        raise ConfigError(
            f"the token key in use, {source}, does not decrypt the stored token of cabinet {unreadable[0]!r}{more}: "
            "set the key the tokens were stored with (or `cabinets rotate-key` to change keys); nothing was stored"
        )


def mark_token_rejected(conn: psycopg.Connection, cabinet_id: str, reason: str) -> bool:
    """An active cabinet whose token WB rejected becomes token_invalid, with why and when (scheduled
    work skips it from now on). True if this call changed it: the one moment worth an alert."""
    cur = conn.execute(
        "UPDATE cabinets SET status = 'token_invalid', token_rejected_at = now(), token_rejected_reason = %s, "
        "updated_at = now() WHERE id = %s AND status = 'active'",
        (reason[:1000], cabinet_id),
    )
    return cur.rowcount == 1


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
