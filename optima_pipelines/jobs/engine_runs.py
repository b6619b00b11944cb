"""What the request-served engine jobs share: the request's payload and its status."""

from __future__ import annotations

from typing import Any

import psycopg

from optima_pipelines.errors import InvalidInput
from optima_pipelines.warehouse import requests as outbox


def start_request(conn: psycopg.Connection, request_id: int, cabinet_id: str, run_id: str) -> Any:
    """The request's payload, with the request marked running under this run. A re-execution of a
    failed request's run (the Dagster UI's Re-execute) opens the request again: it reports the
    re-run's outcome."""
    request = outbox.get_request(conn, request_id)
    if request.cabinet_id != cabinet_id:
        raise InvalidInput(f"request {request_id} is for cabinet {request.cabinet_id!r}, not {cabinet_id!r}")
    conn.execute(
        "UPDATE requests SET status = 'running', error = NULL, finished_at = NULL, updated_at = now()"
        " WHERE id = %s AND status = 'failed'",
        (request_id,),
    )
    outbox.mark_running(conn, request_id, run_id)
    conn.commit()
    return request.payload
