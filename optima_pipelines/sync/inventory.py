"""Stocks on WB's warehouses (the original's `inventory-sync` queue) → ``stocks``, one snapshot per Moscow day.

WB keeps no stock history (``POST /api/analytics/v1/stocks-report/wb-warehouses`` answers with
what is there now), so each hourly snapshot replaces the current Moscow day's rows: the day keeps
its last snapshot, and earlier days keep theirs. The snapshot is read completely (every page)
before anything is written, then written in one transaction: rows that changed are updated, rows
no longer in the snapshot (a size sold out of a warehouse) are removed.
"""

from __future__ import annotations

from datetime import date

from optima_pipelines.db.connection import Connect
from optima_pipelines.load import merge_rows
from optima_pipelines.orchestration.queues import INVENTORY_SYNC
from optima_pipelines.sync.runs import FeedLoad, SyncInput, finish, page_connection
from optima_pipelines.timeutil import now_moscow, today_moscow
from optima_pipelines.wb import Screening, Stock, WbClient, WbDeferred

QUEUE = INVENTORY_SYNC
FEED = "stocks"
STATE_FEED = "stocks"
COLUMNS = ("cabinet_id", "day", *Stock.COLUMNS)
KEY = ("cabinet_id", "day", "nm_id", "chrt_id", "warehouse_id")


def sync_stocks(
    connect: Connect, client: WbClient, cabinet_id: str, *, run_id: str | None, trigger: str, day: date | None = None
) -> FeedLoad:
    """Take a snapshot now and make it the day's (``day``: today in Moscow unless given, for tests)."""
    run = FeedLoad(QUEUE, FEED, cabinet_id, run_id, trigger)
    day = day or today_moscow()
    snapshot: list[Stock] = []
    screening = Screening()
    with page_connection(connect) as conn:
        try:
            for page in client.iter_stocks():
                run.requests += 1
                snapshot.extend(page)
                screening.add(page.screening)
        except WbDeferred as deferred:
            finish(conn, [run], state_feed=STATE_FEED, deferred=deferred)
            return run
        run.fetched([day] * len(snapshot))
        with conn.transaction():
            run.merge += merge_rows(
                conn,
                FEED,
                COLUMNS,
                KEY,
                [(cabinet_id, day, *s.copy_row()) for s in snapshot],
                run_id=run_id,
                # When WB answered (a replay: when the landed answer came), as a new row's first sight.
                on_insert={"snapshot_at": client.answered_at or now_moscow()},
            )
            run.screen(conn, screening)
            # A stock WB sent with a bad value keeps the row it had: a snapshot with a refused row
            # removes nothing (it cannot tell which rows are gone).
            gone = conn.execute(
                """DELETE FROM stocks s
                   WHERE s.cabinet_id = %s AND s.day = %s AND %s
                     AND (s.nm_id, s.chrt_id, s.warehouse_id) NOT IN (
                         SELECT * FROM unnest(%s::bigint[], %s::bigint[], %s::bigint[]))
                   RETURNING s.day""",
                (
                    cabinet_id,
                    day,
                    not screening.refused,
                    [s.nm_id for s in snapshot],
                    [s.chrt_id for s in snapshot],
                    [s.warehouse_id for s in snapshot],
                ),
            ).fetchall()
            run.deleted(d for (d,) in gone)
            finish(conn, [run], state_feed=STATE_FEED)  # the figures commit with the snapshot
    return run


def sync_day(inp: SyncInput) -> list[FeedLoad]:
    """The `stocks` partition ``inp.day`` (today's: WB serves only the stocks of now)."""
    return [sync_stocks(inp.connect, inp.client(), inp.cabinet_id, run_id=inp.run_id, trigger=inp.trigger, day=inp.day)]


def sync(inp: SyncInput) -> list[FeedLoad]:
    """The hourly snapshot, made today's."""
    return [sync_stocks(inp.connect, inp.client(), inp.cabinet_id, run_id=inp.run_id, trigger=inp.trigger)]
