"""The sales funnel per product and Moscow day (the original's `rnp-sections-sync` queue) → ``rnp_funnel_stats``.

WB's per-day history (``/sales-funnel/products/history``) covers only the last week and 20 products
a request; its period report (``/sales-funnel/products``) covers the last 365 days and 1000
products a request. One period report per day, with the period set to that single day, gives every
product's figures of that day: one request per day (per 1000 products) instead of one per 20
products. The table keeps the history WB forgets.

A day's rows are replaced as a whole (products without any activity that day have no row), in one
transaction with the list of days still to load (sync_state feed ``funnel``): WB allows 3 requests
a minute (burst 3), so the hourly sync of 3 days never waits, and anything longer defers and is
resumed.
"""

from __future__ import annotations

from datetime import date, timedelta

import psycopg

from optima_pipelines.db.connection import Connect
from optima_pipelines.load import merge_rows
from optima_pipelines.orchestration.queues import RNP_SECTIONS_SYNC
from optima_pipelines.sync.runs import FeedLoad, SyncInput, finish, page_connection, paged_load
from optima_pipelines.sync.state import get_state, save_cursor
from optima_pipelines.timeutil import today_moscow
from optima_pipelines.wb import FunnelDay, FunnelProduct, WbClient

QUEUE = RNP_SECTIONS_SYNC
FEED = "rnp_funnel_stats"
STATE_FEED = "funnel"
#: The hourly sync reloads today and the two days before (their carts and orders still move).
WINDOW_DAYS = 3
COLUMNS = ("cabinet_id", *FunnelDay.COLUMNS)


def funnel_window(today: date | None = None, days: int | None = None) -> list[date]:
    """Today and the days before (WINDOW_DAYS, or ``days`` to catch up), oldest first."""
    today = today or today_moscow()
    return [today - timedelta(days=n) for n in range((days or WINDOW_DAYS) - 1, -1, -1)]


def funnel_day(product: FunnelProduct, day: date) -> FunnelDay | None:
    """A product's figures of one day from a one-day period report; None when nothing happened."""
    s = product.statistic.selected
    if not (s.open_count or s.cart_count or s.order_count or s.buyout_count or s.add_to_wishlist):
        return None
    return FunnelDay(
        day=day,
        nm_id=product.product.nm_id,
        open_count=s.open_count,
        cart_count=s.cart_count,
        order_count=s.order_count,
        order_sum=s.order_sum,
        buyout_count=s.buyout_count,
        buyout_sum=s.buyout_sum,
        buyout_percent=s.conversions.buyout_percent,
        add_to_cart_conversion=s.conversions.add_to_cart_percent,
        cart_to_order_conversion=s.conversions.cart_to_order_percent,
        add_to_wishlist_count=s.add_to_wishlist,
    )


def sync_funnel(
    connect: Connect,
    client: WbClient,
    cabinet_id: str,
    days: list[date],
    *,
    run_id: str | None,
    trigger: str,
    state_feed: str | None = None,
) -> FeedLoad:
    """Load ``days`` one by one (a day deferred by WB and the days after it are resumed later).

    With ``state_feed``, days left by an earlier deferred run are loaded first."""
    run = FeedLoad(QUEUE, FEED, cabinet_id, run_id, trigger)
    with page_connection(connect) as conn:
        if state_feed is not None:
            cursor = get_state(conn, cabinet_id, state_feed).cursor or {}
            pending = [date.fromisoformat(d) for d in cursor.get("pending", [])]
            days = sorted(set(pending) | set(days))
        remaining = list(days)

        def save_remaining() -> None:
            if state_feed is not None:
                _save_pending(conn, cabinet_id, state_feed, remaining, run_id)

        with paged_load(conn, run, state_feed, on_deferral=save_remaining):
            while remaining:
                day = remaining[0]
                products = client.funnel_products(day, day)
                run.requests += 1
                rows = [r for r in (funnel_day(p, day) for p in products) if r is not None]
                run.fetched(r.day for r in rows)
                # A product WB sent with a bad value keeps the day's row it had: the day is replaced
                # only when every product of it came whole.
                whole = not products.screening.refused
                with conn.transaction():
                    run.merge += merge_rows(
                        conn,
                        FEED,
                        COLUMNS,
                        ("cabinet_id", "day", "nm_id"),
                        [(cabinet_id, *r.copy_row()) for r in rows],
                        run_id=run_id,
                    )
                    run.screen(conn, products.screening)
                    gone = conn.execute(
                        "DELETE FROM rnp_funnel_stats WHERE cabinet_id = %s AND day = %s AND nm_id <> ALL(%s) "
                        "AND %s RETURNING day",
                        (cabinet_id, day, [r.nm_id for r in rows], whole),
                    ).fetchall()
                    run.deleted(d for (d,) in gone)
                    remaining.pop(0)
                    save_remaining()
        if run.deferred_until is None:
            finish(conn, [run], state_feed=state_feed)
    return run


def _save_pending(
    conn: psycopg.Connection, cabinet_id: str, state_feed: str, days: list[date], run_id: str | None
) -> None:
    save_cursor(conn, cabinet_id, state_feed, {"pending": [d.isoformat() for d in days]}, run_id)


def sync_day(inp: SyncInput) -> list[FeedLoad]:
    """The `rnp_funnel_stats` partition ``inp.day``: that day's funnel, no pending days."""
    assert inp.day is not None
    return [sync_funnel(inp.connect, inp.client(), inp.cabinet_id, [inp.day], run_id=inp.run_id, trigger=inp.trigger)]


def sync_window(inp: SyncInput) -> list[FeedLoad]:
    """The hourly sync: the window's days (``window_days``, else WINDOW_DAYS), pending days first."""
    return [
        sync_funnel(
            inp.connect,
            inp.client(),
            inp.cabinet_id,
            funnel_window(days=inp.window_days),
            run_id=inp.run_id,
            trigger=inp.trigger,
            state_feed=STATE_FEED,
        )
    ]
