"""The catalog (the original's `catalog-sync` queue): product cards, current prices and their history.

- **Cards** (nightly, ``POST /content/v2/get/cards/list`` → ``products``): the whole listing along
  WB's cursor, each page merged as it comes; once the listing is complete, products WB no longer
  lists (deleted, or moved to the trash) are removed.
- **Prices** (every 30 min, ``GET /api/v2/list/goods/filter`` → ``prices``): every product's current
  price, seller's discount and club discount (a product WB lists without sizes has no price, and
  no row). ``price_history`` gains a row, valid from the sync's time, whenever a product's (price,
  discount, club discount) differs from its latest history row: WB keeps no history, so this table
  is it.
- A **full cabinet sync** (on demand) is both.

Both are snapshots by cabinet: WB's limits (content 100/min, prices 10 per 6 s) never make these
wait long, and a listing cut short by WB deletes nothing.
"""

from __future__ import annotations

from typing import Any

import msgspec

from optima_pipelines.load import merge_rows
from optima_pipelines.orchestration.queues import CATALOG_SYNC
from optima_pipelines.sync.runs import Connect, SyncInput, SyncRun, finish, page_connection
from optima_pipelines.wb import Card, Price, WbClient, WbDeferred

QUEUE = CATALOG_SYNC
CARDS_STATE_FEED = "cards"
PRICES_STATE_FEED = "prices"
#: ``products``: one row per card (``card_row``).
CARD_COLUMNS = (
    "cabinet_id",
    "nm_id",
    "imt_id",
    "vendor_code",
    "brand",
    "subject_id",
    "subject_name",
    "title",
    "sizes",
    "wb_updated_at",
)
#: ``prices``: one row per priced product (``price_row``).
PRICE_COLUMNS = ("cabinet_id", "nm_id", "vendor_code", "price", "discount", "club_discount", "currency", "sizes")


def card_row(cabinet_id: str, c: Card) -> tuple[Any, ...]:
    """``sizes`` as JSON text (``[{chrtID, techSize, skus}]``) for the jsonb column."""
    sizes = msgspec.json.encode([{"chrtID": s.chrt_id, "techSize": s.tech_size, "skus": s.skus} for s in c.sizes])
    return (
        cabinet_id,
        c.nm_id,
        c.imt_id,
        c.vendor_code,
        c.brand,
        c.subject_id,
        c.subject_name,
        c.title,
        sizes.decode(),
        c.updated_at,
    )


def price_row(cabinet_id: str, p: Price) -> tuple[Any, ...]:
    """The first size's price (see ``Price``); every size in ``sizes`` (JSON text, WB's names)."""
    sizes = msgspec.json.encode(
        [
            {
                "sizeID": s.size_id,
                "price": s.price,
                "discountedPrice": s.discounted_price,
                "clubDiscountedPrice": s.club_discounted_price,
                "techSizeName": s.tech_size_name,
            }
            for s in p.sizes
        ]
    )
    return (cabinet_id, p.nm_id, p.vendor_code, p.price, p.discount, p.club_discount, p.currency, sizes.decode())


def sync_cards(connect: Connect, client: WbClient, cabinet_id: str, *, run_id: str | None, trigger: str) -> SyncRun:
    run = SyncRun(QUEUE, "products", cabinet_id, run_id, trigger)
    seen: list[int] = []
    with page_connection(connect) as conn:
        try:
            for page in client.iter_cards():
                run.requests += 1
                run.fetched([None] * len(page))
                seen.extend(c.nm_id for c in page)
                with conn.transaction():
                    run.merge += merge_rows(
                        conn,
                        "products",
                        CARD_COLUMNS,
                        ("cabinet_id", "nm_id"),
                        [card_row(cabinet_id, c) for c in page],
                        day_column=None,
                    )
        except WbDeferred as deferred:
            finish(conn, [run], state_feed=CARDS_STATE_FEED, deferred=deferred)
            return run
        with conn.transaction():
            gone = conn.execute(
                "DELETE FROM products WHERE cabinet_id = %s AND nm_id <> ALL(%s) RETURNING nm_id", (cabinet_id, seen)
            ).fetchall()
            run.deleted([None] * len(gone))
        finish(conn, [run], state_feed=CARDS_STATE_FEED)
    return run


def sync_prices(
    connect: Connect, client: WbClient, cabinet_id: str, *, run_id: str | None, trigger: str
) -> tuple[SyncRun, SyncRun]:
    """Prices and the history rows they add; returns (prices, price_history) runs."""
    prices = SyncRun(QUEUE, "prices", cabinet_id, run_id, trigger)
    history = SyncRun(QUEUE, "price_history", cabinet_id, run_id, trigger)
    seen: list[int] = []
    with page_connection(connect) as conn:
        try:
            for listed in client.iter_prices():
                prices.requests += 1
                prices.fetched([None] * len(listed))
                # A product without sizes has no price: no row, as if WB did not list it (see Price).
                page = [p for p in listed if p.priced]
                nm_ids = [p.nm_id for p in page]
                seen.extend(nm_ids)
                with conn.transaction():
                    prices.merge += merge_rows(
                        conn,
                        "prices",
                        PRICE_COLUMNS,
                        ("cabinet_id", "nm_id"),
                        [price_row(cabinet_id, p) for p in page],
                        day_column=None,
                    )
                    added = conn.execute(
                        """INSERT INTO price_history (cabinet_id, nm_id, valid_from, price, discount, club_discount)
                           SELECT p.cabinet_id, p.nm_id, now(), p.price, p.discount, p.club_discount
                           FROM prices p
                           LEFT JOIN LATERAL (
                               SELECT h.price, h.discount, h.club_discount FROM price_history h
                               WHERE h.cabinet_id = p.cabinet_id AND h.nm_id = p.nm_id
                               ORDER BY h.valid_from DESC LIMIT 1
                           ) last ON true
                           WHERE p.cabinet_id = %s AND p.nm_id = ANY(%s)
                             AND (last.price, last.discount, last.club_discount)
                                 IS DISTINCT FROM (p.price, p.discount, p.club_discount)
                           ON CONFLICT DO NOTHING
                           RETURNING nm_id""",
                        (cabinet_id, nm_ids),
                    ).fetchall()
                    history.fetched([None] * len(page))
                    history.merge.inserted += len(added)
        except WbDeferred as deferred:
            finish(conn, [prices, history], state_feed=PRICES_STATE_FEED, deferred=deferred)
            return prices, history
        with conn.transaction():
            gone = conn.execute(
                "DELETE FROM prices WHERE cabinet_id = %s AND nm_id <> ALL(%s) RETURNING nm_id", (cabinet_id, seen)
            ).fetchall()
            prices.deleted([None] * len(gone))
        finish(conn, [prices, history], state_feed=PRICES_STATE_FEED)
    return prices, history


def cards(inp: SyncInput) -> list[SyncRun]:
    """The cabinet's cards (the nightly sync, the `products` partition)."""
    return [sync_cards(inp.connect, inp.client(), inp.cabinet_id, run_id=inp.run_id, trigger=inp.trigger)]


def prices(inp: SyncInput) -> list[SyncRun]:
    """The cabinet's prices and the history rows they add (every 30 min, the `prices` partition)."""
    return list(sync_prices(inp.connect, inp.client(), inp.cabinet_id, run_id=inp.run_id, trigger=inp.trigger))


def full(inp: SyncInput) -> list[SyncRun]:
    """A full cabinet sync (on demand): cards, then prices."""
    return [*cards(inp), *prices(inp)]
