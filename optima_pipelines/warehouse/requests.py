"""The request outbox: work the backend asks for (the original's POST -> 202 + jobId).

The backend (or `optima-pipelines request ...`) inserts a row with a kind, a cabinet and a JSON
payload. The requests sensor validates it with the kind's handler, launches one run per request
(exactly once: the run key is the request id), and keeps the row's status in step with the run:
pending -> running (run id recorded) -> succeeded | failed (with the error text). A request that
cannot be served (unknown kind, unknown cabinet, bad payload) ends as failed with the reason and
launches nothing. Kinds are a closed set (the handlers the sensor knows). A request left pending for
``STALE_AFTER`` (the sensor was off, or could not serve it) is failed with that reason, so that no row
holds its cabinet forever.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

from optima_pipelines.errors import InvalidInput

STATUSES = ("pending", "running", "succeeded", "failed")
OPEN_STATUSES = ("pending", "running")
MAX_ERROR_LENGTH = 4000
# The request kinds (``requests.kind``): the backend's API strings, one constant each, imported by
# the sensors that serve them and the engines that write them. Some read like a queue's name
# (orchestration/queues.py) but are the backend's word, not the queue's: a run's tags take the queue.
#: The user imports: while one of a cabinet is live, scheduled syncs of the cabinet skip it.
IMPORT_FEEDS = "import-user-feeds"
IMPORT_REPORT = "import-user-report"
CATALOG_SYNC_KIND = "catalog-sync"  # a cabinet's cards and prices now
AUTOBIDDER_SYNC_KIND = "autobidder-sync"  # a cabinet's campaigns, bids and ad statistics now
PRICING_BULK_KIND = "pricing-bulk"  # up to 100,000 price changes
AUTOREPLY_ANSWER_SEND_KIND = "autoreply-answer-send"  # one answer to a feedback or question
#: Every kind: the requests sensor serves exactly these (sensors/requests.py: HANDLERS); a row of
#: any other kind is failed as unknown.
KINDS = (
    IMPORT_FEEDS,
    IMPORT_REPORT,
    CATALOG_SYNC_KIND,
    AUTOBIDDER_SYNC_KIND,
    PRICING_BULK_KIND,
    AUTOREPLY_ANSWER_SEND_KIND,
)
USER_IMPORT_KINDS = (IMPORT_FEEDS, IMPORT_REPORT)
#: A request pending this long is failed; one open this long no longer counts as a live import.
STALE_AFTER = timedelta(hours=6)


@dataclass(frozen=True)
class Request:
    id: int
    kind: str
    cabinet_id: str | None
    payload: Any
    status: str
    run_id: str | None
    error: str | None
    result: Any
    created_at: datetime


_SELECT = sql.SQL("SELECT id, kind, cabinet_id, payload, status, run_id, error, result, created_at FROM requests ")


def create_request(conn: psycopg.Connection, kind: str, cabinet_id: str | None, payload: dict[str, Any]) -> int:
    if not kind or not kind.strip():
        raise InvalidInput("a request needs a kind")
    row = conn.execute(
        "INSERT INTO requests (kind, cabinet_id, payload) VALUES (%s, %s, %s) RETURNING id",
        (kind, cabinet_id, Jsonb(payload)),
    ).fetchone()
    assert row is not None
    return int(row[0])


def get_request(conn: psycopg.Connection, request_id: int) -> Request:
    row = conn.execute(_SELECT + sql.SQL("WHERE id = %s"), (request_id,)).fetchone()
    if row is None:
        raise InvalidInput(f"request {request_id} does not exist")
    return Request(*row)


def open_requests(conn: psycopg.Connection, kinds: list[str], limit: int = 200) -> list[Request]:
    """Pending and running requests of these kinds, oldest first (bounded). Only a pending request
    carries its payload: a running one is only reconciled with its run, and a payload can be large
    (a bulk price upload of 25,000 items is about 1 MB, read on every tick otherwise)."""
    rows = conn.execute(
        "SELECT id, kind, cabinet_id, CASE WHEN status = 'pending' THEN payload END, status, run_id, error, "
        "result, created_at FROM requests "
        "WHERE status IN ('pending', 'running') AND kind = ANY(%s) ORDER BY id LIMIT %s",
        (kinds, limit),
    ).fetchall()
    return [Request(*r) for r in rows]


def mark_running(conn: psycopg.Connection, request_id: int, run_id: str) -> bool:
    """pending -> running with the run id; a no-op for a request already past pending."""
    cur = conn.execute(
        "UPDATE requests SET status = 'running', run_id = %s, started_at = coalesce(started_at, now()), "
        "updated_at = now() WHERE id = %s AND status IN ('pending', 'running')",
        (run_id, request_id),
    )
    return cur.rowcount == 1


def running_for(conn: psycopg.Connection, request_id: int) -> timedelta | None:
    """How long ago a running request last changed (None: it is not running)."""
    row = conn.execute(
        "SELECT now() - updated_at FROM requests WHERE id = %s AND status = 'running'", (request_id,)
    ).fetchone()
    return None if row is None else row[0]


def mark_succeeded(conn: psycopg.Connection, request_id: int, run_id: str | None, result: dict[str, Any]) -> None:
    conn.execute(
        "UPDATE requests SET status = 'succeeded', run_id = coalesce(%s, run_id), result = %s, error = NULL, "
        "finished_at = now(), updated_at = now() WHERE id = %s AND status IN ('pending', 'running')",
        (run_id, Jsonb(json.loads(json.dumps(result, default=str))), request_id),
    )


def mark_failed(conn: psycopg.Connection, request_id: int, error: str, run_id: str | None = None) -> None:
    conn.execute(
        "UPDATE requests SET status = 'failed', run_id = coalesce(%s, run_id), error = %s, "
        "finished_at = now(), updated_at = now() WHERE id = %s AND status IN ('pending', 'running')",
        (run_id, error[:MAX_ERROR_LENGTH], request_id),
    )


def fail_unservable(conn: psycopg.Connection, known_kinds: list[str]) -> list[tuple[int, str]]:
    """Fail the pending requests no tick will ever serve: those of a kind not in ``known_kinds``, and
    those pending for longer than ``STALE_AFTER``. Returns (request id, reason) of each."""
    unknown = conn.execute(
        "UPDATE requests SET status = 'failed', finished_at = now(), updated_at = now(), "
        "error = 'unknown request kind ' || quote_literal(left(kind, 100)) "
        "|| CASE WHEN length(kind) > 100 THEN ' (cut)' ELSE '' END || ': expected one of ' || %s "
        "WHERE status = 'pending' AND NOT kind = ANY(%s) RETURNING id, error",
        (", ".join(sorted(known_kinds)), known_kinds),
    ).fetchall()
    stale = conn.execute(
        "UPDATE requests SET status = 'failed', finished_at = now(), updated_at = now(), error = %s "
        "WHERE status = 'pending' AND created_at < now() - %s RETURNING id, error",
        (
            f"not started within {STALE_AFTER.total_seconds() / 3600:g} h of its creation (the requests sensor "
            "was off or could not serve it); create it again",
            STALE_AFTER,
        ),
    ).fetchall()
    return [(int(r[0]), r[1]) for r in [*unknown, *stale]]


def live_user_import_cabinets(conn: psycopg.Connection) -> set[str]:
    """Cabinets with a user import (exactly the kinds of ``USER_IMPORT_KINDS``) pending or running and
    younger than ``STALE_AFTER``: fan-outs skip them (the original's rule)."""
    rows = conn.execute(
        "SELECT DISTINCT cabinet_id FROM requests WHERE status IN ('pending', 'running') "
        "AND kind = ANY(%s) AND cabinet_id IS NOT NULL AND created_at > now() - %s",
        (list(USER_IMPORT_KINDS), STALE_AFTER),
    ).fetchall()
    return {r[0] for r in rows}
