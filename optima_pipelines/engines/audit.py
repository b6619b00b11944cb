"""The audit trail of the engines: one ``engine_actions`` row per action an engine takes on WB.

The pattern for a WB write (never retried blindly):

    action_id = begin_action(conn, ..., intent_id=...)   # None: this intent already succeeded
    if action_id is not None:
        conn.commit()                                    # the intent is on record before the call
        try:
            response = client.some_write(...)
        except WbError as exc:
            finish_action(conn, action_id, "failed", {"error": str(exc)})
            raise
        finish_action(conn, action_id, "ok", response)

A retry of the same intent after a failure (or a crash between the call and ``finish_action``)
finds the row ``pending`` or ``failed`` and may check WB's state before sending again; an intent
recorded ``ok`` is never sent again.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

ENGINES = ("autobidder", "repricer", "booking", "pricing-bulk", "autoreply")
STATUSES = ("pending", "ok", "failed")


@dataclass(frozen=True)
class Action:
    id: int
    cabinet_id: str
    engine: str
    action: str
    target: str
    intent_id: str | None
    reason: str
    request: Any
    response: Any
    status: str
    run_id: str | None
    created_at: datetime


def begin_action(
    conn: psycopg.Connection,
    *,
    cabinet_id: str,
    engine: str,
    action: str,
    target: str,
    reason: str,
    request: Any = None,
    intent_id: str | None = None,
    run_id: str | None = None,
) -> int | None:
    """Record an action about to be sent to WB (status ``pending``); its id.

    With an ``intent_id`` already recorded ``ok``, returns None: the write was done, do not send it
    again. One recorded ``pending``/``failed`` is reused (a retry of the same intent)."""
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}")
    if intent_id is not None:
        row = conn.execute(
            "SELECT id, status FROM engine_actions WHERE cabinet_id = %s AND engine = %s AND intent_id = %s FOR UPDATE",
            (cabinet_id, engine, intent_id),
        ).fetchone()
        if row is not None:
            if row[1] == "ok":
                return None
            conn.execute(
                "UPDATE engine_actions SET status = 'pending', reason = %s, request = %s, run_id = %s,"
                " updated_at = now() WHERE id = %s",
                (reason, Jsonb(request or {}), run_id, row[0]),
            )
            return int(row[0])
    row = conn.execute(
        "INSERT INTO engine_actions (cabinet_id, engine, action, target, intent_id, reason, request, status, run_id)"
        " VALUES (%s, %s, %s, %s, %s, %s, %s, 'pending', %s) RETURNING id",
        (cabinet_id, engine, action, target, intent_id, reason, Jsonb(request or {}), run_id),
    ).fetchone()
    assert row is not None
    return int(row[0])


def finish_action(conn: psycopg.Connection, action_id: int, status: str, response: Any) -> None:
    """Record WB's answer (or the error) and the outcome of an action."""
    if status not in ("ok", "failed"):
        raise ValueError(f"an action finishes ok or failed, not {status!r}")
    conn.execute(
        "UPDATE engine_actions SET status = %s, response = %s, updated_at = now() WHERE id = %s",
        (status, Jsonb(response), action_id),
    )


def record_action(
    conn: psycopg.Connection,
    *,
    cabinet_id: str,
    engine: str,
    action: str,
    target: str,
    reason: str,
    status: str,
    request: Any = None,
    response: Any = None,
    intent_id: str | None = None,
    run_id: str | None = None,
) -> int | None:
    """An action in one step (one that involves no WB write, e.g. a matched booking slot)."""
    action_id = begin_action(
        conn,
        cabinet_id=cabinet_id,
        engine=engine,
        action=action,
        target=target,
        reason=reason,
        request=request,
        intent_id=intent_id,
        run_id=run_id,
    )
    if action_id is not None:
        finish_action(conn, action_id, status, response)
    return action_id


def actions(conn: psycopg.Connection, cabinet_id: str, engine: str | None = None) -> list[Action]:
    """A cabinet's actions, newest first (what the seller's audit page shows)."""
    rows = conn.execute(
        "SELECT id, cabinet_id, engine, action, target, intent_id, reason, request, response, status, run_id,"
        " created_at FROM engine_actions WHERE cabinet_id = %s AND (%s::text IS NULL OR engine = %s)"
        " ORDER BY created_at DESC, id DESC",
        (cabinet_id, engine, engine),
    ).fetchall()
    return [Action(*r) for r in rows]
