"""Bulk pricing: a request (``kind = pricing-bulk``) of up to 100,000 price changes, sent in upload tasks of ≤ 1000.

Payload: ``{"items": [{"nm_id": 123, "price": 990, "discount": 15}, ...]}``; ``price`` (whole
rubles, before the discount) and ``discount`` (0..99 %) may each be omitted, not both.

1. The items are stored once per request (``pricing_bulk_items``) with their chunk: items that can
   never be sent (bad numbers, a product twice) are ``invalid`` with the reason and go in no chunk.
2. Each chunk is one WB upload task, sent at most once and polled to its final status
   (engines/price_upload.py); each item ends ``ok`` or ``failed`` with WB's reason (price
   quarantine, unknown product...).
3. A re-run (the run's retry, or a re-execution) skips chunks whose items already have results and
   polls a chunk that was sent but not confirmed instead of uploading it again.

The request's result is a summary: counts, the upload task ids and the first failures; the full
table is ``pricing_bulk_items``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg

from optima_pipelines.engines.price_upload import send_chunk
from optima_pipelines.errors import InvalidInput
from optima_pipelines.orchestration.queues import PRICING_BULK
from optima_pipelines.warehouse.requests import PRICING_BULK_KIND
from optima_pipelines.wb import PriceUpdate, WbClient
from optima_pipelines.wb.client import PRICE_TASK_MAX_ITEMS

ENGINE = "pricing-bulk"
QUEUE = PRICING_BULK
KIND = PRICING_BULK_KIND
MAX_ITEMS = 100_000
#: Bounds of nm ids (bigint) and prices (integer): larger ones are refused as typos.
MAX_NM = 2**53
MAX_PRICE = 2**31
#: Failures listed in the request's result (the table holds them all).
RESULT_FAILURES = 100


@dataclass(frozen=True)
class Item:
    seq: int
    nm_id: int | None
    price: int | None
    discount: int | None
    error: str | None  # why it cannot be sent; None: valid


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def check_payload(payload: Any) -> list[Any]:
    """The payload's item list, or InvalidInput for a payload that is not one (the request fails)."""
    if not isinstance(payload, dict) or not isinstance(payload.get("items"), list):
        raise InvalidInput('malformed payload: expected {"items": [{"nm_id": ..., "price": ..., "discount": ...}]}')
    items = payload["items"]
    if not items:
        raise InvalidInput("the request has no items")
    if len(items) > MAX_ITEMS:
        raise InvalidInput(f"{len(items)} items: at most {MAX_ITEMS} in one request")
    return items


def parse_items(raw: list[Any]) -> list[Item]:
    """Each payload item checked on its own (pure): a bad item is reported, the others still go."""
    out: list[Item] = []
    seen: set[int] = set()
    for seq, entry in enumerate(raw):
        if not isinstance(entry, dict):
            out.append(Item(seq, None, None, None, "not an object"))
            continue
        nm = _int(entry.get("nm_id", entry.get("nmID")))
        raw_price, raw_discount = entry.get("price"), entry.get("discount")
        price, discount = _int(raw_price), _int(raw_discount)
        # Only values inside their column's (and WB's) range are kept, so that an invalid item is
        # stored with its reason instead of failing the whole request's COPY.
        nm = nm if nm is not None and 0 < nm < MAX_NM else None
        price = price if price is not None and 0 < price < MAX_PRICE else None
        discount = discount if discount is not None and 0 <= discount < 100 else None
        error = None
        if nm is None:
            error = f"nm_id must be a positive whole number below {MAX_NM}"
        elif raw_price is None and raw_discount is None:
            error = "give a price, a discount or both"
        elif raw_price is not None and price is None:
            error = f"price must be a positive whole number of rubles below {MAX_PRICE}"
        elif raw_discount is not None and discount is None:
            error = "discount must be a whole number from 0 to 99"
        elif nm in seen:
            error = "this product appears earlier in the request"
        if error is None and nm is not None:
            seen.add(nm)
        out.append(Item(seq, nm, price, discount, error))
    return out


def store_items(conn: psycopg.Connection, request_id: int, raw: list[Any]) -> None:
    """Store the request's items with their chunk, once (a re-run finds them)."""
    if conn.execute("SELECT 1 FROM pricing_bulk_items WHERE request_id = %s LIMIT 1", (request_id,)).fetchone():
        return
    rows = []
    valid = 0
    for item in parse_items(raw):
        chunk = None
        if item.error is None:
            chunk = valid // PRICE_TASK_MAX_ITEMS
            valid += 1
        rows.append(
            (
                request_id,
                item.seq,
                item.nm_id,
                item.price,
                item.discount,
                chunk,
                "pending" if item.error is None else "invalid",
                item.error,
            )
        )
    with (
        conn.cursor() as cur,
        cur.copy(
            "COPY pricing_bulk_items (request_id, seq, nm_id, price, discount, chunk_no, status, error) FROM STDIN"
        ) as copy,
    ):
        for row in rows:
            copy.write_row(row)
    conn.commit()


def run_bulk(
    conn: psycopg.Connection, client: WbClient, cabinet_id: str, request_id: int, payload: Any, run_id: str | None
) -> dict[str, Any]:
    """Send every chunk still without results; returns the request's result summary."""
    store_items(conn, request_id, check_payload(payload))
    chunks = conn.execute(
        "SELECT DISTINCT chunk_no FROM pricing_bulk_items WHERE request_id = %s AND status = 'pending' ORDER BY 1",
        (request_id,),
    ).fetchall()
    for (chunk_no,) in chunks:
        rows = conn.execute(
            "SELECT seq, nm_id, price, discount FROM pricing_bulk_items"
            " WHERE request_id = %s AND chunk_no = %s AND status = 'pending' ORDER BY seq",
            (request_id, chunk_no),
        ).fetchall()
        outcome = send_chunk(
            conn,
            client,
            cabinet_id=cabinet_id,
            engine=ENGINE,
            intent_id=f"pricing-bulk:{request_id}:{chunk_no}",
            items=[PriceUpdate(nm_id=nm, price=price, discount=discount) for _, nm, price, discount in rows],
            reason=f"bulk price change, request {request_id}, chunk {chunk_no + 1}: {len(rows)} products",
            run_id=run_id,
        )
        results = [(seq, outcome.item_error(nm)) for seq, nm, _, _ in rows]
        with conn.cursor() as cur:
            cur.executemany(
                "UPDATE pricing_bulk_items SET status = %s, error = %s, upload_id = %s, updated_at = now()"
                " WHERE request_id = %s AND seq = %s",
                [("ok" if e is None else "failed", e, outcome.upload_id, request_id, seq) for seq, e in results],
            )
        conn.commit()
    return summary(conn, request_id)


def summary(conn: psycopg.Connection, request_id: int) -> dict[str, Any]:
    counts: dict[str, int] = dict(
        conn.execute(
            "SELECT status, count(*) FROM pricing_bulk_items WHERE request_id = %s GROUP BY 1", (request_id,)
        ).fetchall()
    )
    uploads = [
        r[0]
        for r in conn.execute(
            "SELECT DISTINCT upload_id FROM pricing_bulk_items WHERE request_id = %s AND upload_id IS NOT NULL"
            " ORDER BY 1",
            (request_id,),
        ).fetchall()
    ]
    failures = conn.execute(
        "SELECT seq, nm_id, status, error FROM pricing_bulk_items WHERE request_id = %s"
        " AND status IN ('failed', 'invalid') ORDER BY seq LIMIT %s",
        (request_id, RESULT_FAILURES),
    ).fetchall()
    return {
        "items": sum(counts.values()),
        "ok": int(counts.get("ok", 0)),
        "failed": int(counts.get("failed", 0)),
        "invalid": int(counts.get("invalid", 0)),
        "pending": int(counts.get("pending", 0)),
        "upload_ids": uploads,
        "failures": [{"seq": s, "nm_id": nm, "status": st, "error": e} for s, nm, st, e in failures],
        "table": "pricing_bulk_items",
    }
