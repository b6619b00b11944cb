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

from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

import msgspec
import psycopg
from psycopg import sql

from optima_pipelines.db.connection import Connect
from optima_pipelines.load import merge_rows
from optima_pipelines.orchestration.queues import CATALOG_SYNC
from optima_pipelines.sync.runs import FeedLoad, SyncInput, finish, page_connection, sql_file
from optima_pipelines.timeutil import now_moscow
from optima_pipelines.wb import Card, Page, Price, WbClient, WbDeferred

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

T = TypeVar("T")


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


def _load_listing(
    connect: Connect,
    runs: list[FeedLoad],
    pages: Iterable[Page[T]],
    to_rows: Callable[[Sequence[T]], list[tuple[Any, ...]]],
    columns: Sequence[str],
    state_feed: str,
    after_page: Callable[[psycopg.Connection, list[tuple[Any, ...]]], None] | None = None,
) -> None:
    """A cabinet's listing into the table of ``runs[0]`` (keyed by cabinet and nm_id): each page's
    rows (``to_rows``, the nm_id second) merged in a transaction of its own, ``after_page`` in the
    same one; once the listing is complete, the products WB no longer lists are removed. A WB pause
    ends the load where it is (nothing removed); ``finish`` marks ``state_feed`` for all ``runs``."""
    run = runs[0]
    cabinet_id = run.cabinet_id
    seen: list[int] = []
    refused = False
    with page_connection(connect) as conn:
        try:
            for page in pages:
                run.requests += 1
                run.fetched([None] * len(page))
                rows = to_rows(page)
                seen.extend(r[1] for r in rows)
                refused = refused or bool(page.screening.refused)
                with conn.transaction():
                    run.merge += merge_rows(conn, run.feed, columns, ("cabinet_id", "nm_id"), rows, day_column=None)
                    run.screen(conn, page.screening)
                    if after_page is not None:
                        after_page(conn, rows)
        except WbDeferred as deferred:
            finish(conn, runs, state_feed=state_feed, deferred=deferred)
            return
        if refused:
            # A product WB sent with a bad value keeps its row: the listing is not whole, and, like
            # one cut short, removes nothing.
            finish(conn, runs, state_feed=state_feed)
            return
        with conn.transaction():
            gone = conn.execute(
                sql.SQL("DELETE FROM {} WHERE cabinet_id = %s AND nm_id <> ALL(%s) RETURNING nm_id").format(
                    sql.Identifier(run.feed)
                ),
                (cabinet_id, seen),
            ).fetchall()
            run.deleted([None] * len(gone))
        finish(conn, runs, state_feed=state_feed)


def sync_cards(connect: Connect, client: WbClient, cabinet_id: str, *, run_id: str | None, trigger: str) -> FeedLoad:
    run = FeedLoad(QUEUE, "products", cabinet_id, run_id, trigger)
    _load_listing(
        connect,
        [run],
        client.iter_cards(),
        lambda page: [card_row(cabinet_id, c) for c in page],
        CARD_COLUMNS,
        CARDS_STATE_FEED,
    )
    return run


def sync_prices(
    connect: Connect, client: WbClient, cabinet_id: str, *, run_id: str | None, trigger: str
) -> tuple[FeedLoad, FeedLoad]:
    """Prices and the history rows they add; returns (prices, price_history) runs."""
    prices = FeedLoad(QUEUE, "prices", cabinet_id, run_id, trigger)
    history = FeedLoad(QUEUE, "price_history", cabinet_id, run_id, trigger)

    def add_history(conn: psycopg.Connection, rows: list[tuple[Any, ...]]) -> None:
        added = conn.execute(
            sql_file("catalog_price_history"),
            # From when WB said these prices (a replay: when the landed answer came).
            {
                "cabinet_id": cabinet_id,
                "nm_ids": [r[1] for r in rows],
                "valid_from": client.answered_at or now_moscow(),
            },
        ).fetchall()
        history.fetched([None] * len(rows))
        history.merge.inserted += len(added)

    # A product without sizes has no price: no row, as if WB did not list it (see Price).
    _load_listing(
        connect,
        [prices, history],
        client.iter_prices(),
        lambda page: [price_row(cabinet_id, p) for p in page if p.priced],
        PRICE_COLUMNS,
        PRICES_STATE_FEED,
        add_history,
    )
    return prices, history


def cards(inp: SyncInput) -> list[FeedLoad]:
    """The cabinet's cards (the nightly sync, the `products` partition)."""
    return [sync_cards(inp.connect, inp.client(), inp.cabinet_id, run_id=inp.run_id, trigger=inp.trigger)]


def prices(inp: SyncInput) -> list[FeedLoad]:
    """The cabinet's prices and the history rows they add (every 30 min, the `prices` partition)."""
    return list(sync_prices(inp.connect, inp.client(), inp.cabinet_id, run_id=inp.run_id, trigger=inp.trigger))


def full(inp: SyncInput) -> list[FeedLoad]:
    """A full cabinet sync (on demand): cards, then prices."""
    return [*cards(inp), *prices(inp)]
