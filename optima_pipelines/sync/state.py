"""Per-(cabinet, feed) sync state: the change-feed cursor, the last success, when to resume."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from psycopg.types.json import Jsonb


@dataclass(frozen=True)
class SyncState:
    cabinet_id: str
    feed: str
    cursor: dict[str, Any] | None
    last_success_at: datetime | None
    resume_at: datetime | None
    last_error: str | None


def get_state(conn: psycopg.Connection, cabinet_id: str, feed: str) -> SyncState:
    row = conn.execute(
        "SELECT cursor, last_success_at, resume_at, last_error FROM sync_state WHERE cabinet_id = %s AND feed = %s",
        (cabinet_id, feed),
    ).fetchone()
    if row is None:
        return SyncState(cabinet_id, feed, None, None, None, None)
    return SyncState(cabinet_id, feed, *row)


def save_cursor(
    conn: psycopg.Connection, cabinet_id: str, feed: str, cursor: dict[str, Any], run_id: str | None
) -> None:
    conn.execute(
        """INSERT INTO sync_state (cabinet_id, feed, cursor, last_run_id, updated_at)
           VALUES (%s, %s, %s, %s, now())
           ON CONFLICT (cabinet_id, feed) DO UPDATE
           SET cursor = EXCLUDED.cursor, last_run_id = EXCLUDED.last_run_id, updated_at = now()""",
        (cabinet_id, feed, Jsonb(cursor), run_id),
    )


def mark_success(conn: psycopg.Connection, cabinet_id: str, feed: str, run_id: str | None) -> None:
    conn.execute(
        """INSERT INTO sync_state (cabinet_id, feed, last_success_at, last_run_id, updated_at)
           VALUES (%s, %s, now(), %s, now())
           ON CONFLICT (cabinet_id, feed) DO UPDATE
           SET last_success_at = now(), last_run_id = EXCLUDED.last_run_id, resume_at = NULL,
               last_error = NULL, updated_at = now()""",
        (cabinet_id, feed, run_id),
    )


def mark_deferred(conn: psycopg.Connection, cabinet_id: str, feed: str, resume_at: datetime, reason: str) -> None:
    conn.execute(
        """INSERT INTO sync_state (cabinet_id, feed, resume_at, last_error, updated_at)
           VALUES (%s, %s, %s, %s, now())
           ON CONFLICT (cabinet_id, feed) DO UPDATE
           SET resume_at = EXCLUDED.resume_at, last_error = EXCLUDED.last_error, updated_at = now()""",
        (cabinet_id, feed, resume_at, reason),
    )
