"""One price upload task (≤ 1000 products) sent at most once and followed to WB's final status.

What the repricer and bulk pricing share. A chunk of price changes has an intent id; its life is
recorded in ``price_upload_chunks`` and ``engine_actions``:

1. ``intent``: recorded (and committed) before the upload;
2. ``sent``: WB accepted it; WB's task id is committed before the first status poll;
3. ``done`` (WB processed it: status 3/4/5/6, each item's own status) or ``refused`` (WB answered
   400 for the whole task, e.g. every price already set).

A re-run (a retry of the run, or the next one) never uploads a ``sent`` chunk again: it polls the
recorded task. A chunk still in ``intent`` may have reached WB before the crash; it is uploaded
again, which WB answers with 208 and the existing task id when the same task exists (WB's own
deduplication of identical tasks), so it is never applied twice either.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import psycopg

from optima_pipelines.db.statements import update_where
from optima_pipelines.engines.audit import begin_action, finish_action
from optima_pipelines.wb import PriceTaskResult, PriceUpdate, WbClient, WbError

#: How long one run polls a task before leaving it for the next attempt.
TASK_WAIT_SECONDS = 60.0


class TaskPending(RuntimeError):
    """WB accepted the task but has not processed it yet: the run's retry polls it again (its task
    id is recorded). Not an OptimaError: the retry policy handles it like a transient WB error."""


@dataclass
class ChunkOutcome:
    """What WB did with one chunk: per product, None for applied or WB's error text."""

    intent_id: str
    state: str  # done | refused | skipped (already done by an earlier run)
    upload_id: int | None = None
    task_status: int | None = None
    errors: dict[int, str | None] = field(default_factory=dict)
    #: The whole task's refusal (state refused).
    refusal: str | None = None

    def item_error(self, nm_id: int) -> str | None:
        """None when WB applied the item; else why not."""
        if self.state == "refused":
            refusal = self.refusal or "WB refused the task"
            # WB refuses a task whose every price is already set: those items are where they should be.
            if "are already set" in refusal and "incorrectly" not in refusal:
                return None
            return refusal
        if nm_id not in self.errors:
            return "WB's task result does not list this product"
        return self.errors[nm_id]


def chunk_state(conn: psycopg.Connection, cabinet_id: str, intent_id: str) -> tuple[str, int | None] | None:
    row = conn.execute(
        "SELECT state, upload_id FROM price_upload_chunks WHERE cabinet_id = %s AND intent_id = %s",
        (cabinet_id, intent_id),
    ).fetchone()
    return (row[0], row[1]) if row else None


def _set_chunk(conn: psycopg.Connection, cabinet_id: str, intent_id: str, **values: object) -> None:
    update_where(conn, "price_upload_chunks", {"cabinet_id": cabinet_id, "intent_id": intent_id}, values)


def _outcome(intent_id: str, result: PriceTaskResult) -> ChunkOutcome:
    errors: dict[int, str | None] = {}
    for item in result.items:
        # A product with several sizes appears once per size: any refused size refuses it.
        if item.ok:
            errors.setdefault(item.nm_id, None)
        else:
            errors[item.nm_id] = item.error_text or f"WB item status {item.status}"
    return ChunkOutcome(intent_id, "done", result.upload_id, result.status, errors)


def send_chunk(
    conn: psycopg.Connection,
    client: WbClient,
    *,
    cabinet_id: str,
    engine: str,
    intent_id: str,
    items: Sequence[PriceUpdate],
    reason: str,
    run_id: str | None,
    why: dict[int, str] | None = None,
    wait_seconds: float = TASK_WAIT_SECONDS,
) -> ChunkOutcome:
    """Send one chunk (or follow the one already sent) to its final status.

    The final step (chunk ``done``/``refused``, the audit row finished) is left uncommitted, so the
    caller stores its per-item results in the same transaction. ``why`` (per product, in words)
    goes into the audit row with each item. Raises a transient ``WbError`` or
    ``TaskPending`` for the run to retry; the recorded state makes the retry safe."""
    state = chunk_state(conn, cabinet_id, intent_id)
    if state is not None and state[0] in ("done", "refused") and state[1] is not None:
        # Done by an earlier run whose per-item results were not stored: read them again.
        return _outcome(intent_id, client.wait_price_task(state[1], timeout=wait_seconds))
    request = {
        "items": len(items),
        "data": [
            {"nmID": i.nm_id, "price": i.price, "discount": i.discount, **({"why": why[i.nm_id]} if why else {})}
            for i in items
        ],
    }
    action_id = begin_action(
        conn,
        cabinet_id=cabinet_id,
        engine=engine,
        action="upload_prices",
        target=intent_id,
        reason=reason,
        request=request,
        intent_id=intent_id,
        run_id=run_id,
    )
    if state is None:
        conn.execute(
            "INSERT INTO price_upload_chunks (cabinet_id, intent_id, engine, items, state) "
            "VALUES (%s, %s, %s, %s, 'intent')",
            (cabinet_id, intent_id, engine, len(items)),
        )
    conn.commit()  # the intent is on record before anything reaches WB
    if action_id is None:  # recorded ok, yet the chunk row says otherwise: trust the audit
        return ChunkOutcome(intent_id, "skipped")
    upload_id = state[1] if state is not None and state[0] == "sent" else None
    try:
        if upload_id is None:
            upload_id = client.upload_prices(items)
            _set_chunk(conn, cabinet_id, intent_id, state="sent", upload_id=upload_id)
            conn.commit()
        result = client.wait_price_task(upload_id, timeout=wait_seconds)
    except WbError as exc:
        if exc.is_transient or upload_id is not None:
            # WB has the task (or may have it): never mark it refused; a re-run asks WB about it.
            finish_action(conn, action_id, "failed", {"error": str(exc), "upload_id": upload_id, "will_retry": True})
            conn.commit()
            raise
        text = getattr(exc, "detail", None) or str(exc)
        finish_action(conn, action_id, "failed", {"error": text, "upload_id": upload_id})
        _set_chunk(conn, cabinet_id, intent_id, state="refused", error=text[:2000])
        return ChunkOutcome(intent_id, "refused", upload_id, refusal=text)
    if not result.done:
        finish_action(conn, action_id, "failed", {"upload_id": upload_id, "status": result.status, "pending": True})
        conn.commit()
        raise TaskPending(f"WB has not processed price task {upload_id} ({intent_id}) yet; it is recorded")
    outcome = _outcome(intent_id, result)
    refused = {nm: e for nm, e in outcome.errors.items() if e is not None}
    finish_action(
        conn,
        action_id,
        "ok",
        {
            "upload_id": upload_id,
            "status": result.status,
            "applied": len(outcome.errors) - len(refused),
            "refused": [{"nmID": nm, "error": e} for nm, e in list(refused.items())[:200]],
        },
    )
    _set_chunk(conn, cabinet_id, intent_id, state="done", task_status=result.status)
    return outcome
