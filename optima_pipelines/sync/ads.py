"""Ad campaigns and their statistics (the original's `rnp-ads-sync` queue, and the on-demand `autobidder-sync`).

A sync refreshes the cabinet's campaigns with their products and current bids
(``GET /api/advert/v2/adverts`` → ``ad_campaigns``, ``ad_campaign_products``), then loads
``GET /adv/v3/fullstats`` for the campaigns WB serves statistics for (statuses 7, 9, 11), ≤ 50
campaigns a request, per campaign, Moscow day, app and product → ``ad_campaign_stats``. WB also
lists products a campaign did not advertise but sold through it ("associated" products): they are
kept, with ``is_associated`` set, so that they can be told apart.

An answer is the whole truth for the campaigns and days it was asked about (a snapshot, docs/data.md):
the rows of that scope it no longer holds are removed (``replace_scope``), and what it said per
campaign and day is recorded in ``ad_stats_answers`` (migration 0020), in the answer's transaction.

fullstats allows one request per 20 s (3 a minute, burst 1): a run sends what the limiter lets it
send without waiting more than a few seconds, stores each answer with the list of chunks still to
load (sync_state feed ``ads``), and defers; the resume sensor runs it again when WB allows.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from datetime import date, timedelta
from decimal import Decimal
from typing import Any

import psycopg

from optima_pipelines.errors import InvalidInput
from optima_pipelines.load import merge_rows
from optima_pipelines.orchestration.queues import AUTOBIDDER_SYNC, RNP_ADS_SYNC
from optima_pipelines.sync.runs import FeedLoad, SyncInput, finish, page_connection, paged_load, sql_file
from optima_pipelines.sync.state import get_state, save_cursor
from optima_pipelines.timeutil import today_moscow
from optima_pipelines.wb import AdStat, Campaign

QUEUE = RNP_ADS_SYNC
STATS_FEED = "ad_campaign_stats"
CAMPAIGNS_FEED = "ad_campaigns"
STATE_FEED = "ads"
#: The scheduled sync reloads today and the two days before (WB revises recent days).
WINDOW_DAYS = 3
#: Campaign statuses WB serves statistics for: finished, active, paused.
STAT_STATUSES = (7, 9, 11)
CHUNK = 50
#: The longest period fullstats serves in one request.
MAX_WINDOW_DAYS = 31

#: ``ad_campaigns``: one row per campaign (``campaign_row``).
CAMPAIGN_COLUMNS = (
    "cabinet_id",
    "advert_id",
    "name",
    "status",
    "bid_type",
    "payment_type",
    "currency",
    "created_at",
    "updated_at",
    "started_at",
)
#: ``ad_campaign_products``: one row per product of a campaign, bids in kopecks (``product_rows``).
PRODUCT_COLUMNS = (
    "cabinet_id",
    "advert_id",
    "nm_id",
    "subject_id",
    "subject_name",
    "bid_search_kopecks",
    "bid_recommendations_kopecks",
)
STATS_COLUMNS = ("cabinet_id", *AdStat.COLUMNS, "is_associated")


def campaign_row(cabinet_id: str, c: Campaign) -> tuple[Any, ...]:
    t = c.timestamps
    return (
        cabinet_id,
        c.id,
        c.settings.name,
        c.status,
        c.bid_type,
        c.settings.payment_type,
        c.currency,
        t.created,
        t.updated,
        t.started,
    )


def product_rows(cabinet_id: str, c: Campaign) -> list[tuple[Any, ...]]:
    return [
        (cabinet_id, c.id, p.nm_id, p.subject.id, p.subject.name, p.bids_kopecks.search, p.bids_kopecks.recommendations)
        for p in c.products
    ]


def ads_window(today: date | None = None, days: int | None = None) -> tuple[date, date]:
    """The days a cycle covers: today and the days before (WINDOW_DAYS, or ``days`` to catch up)."""
    today = today or today_moscow()
    return today - timedelta(days=(days or WINDOW_DAYS) - 1), today


def stat_chunks(campaigns: Sequence[Campaign]) -> list[list[int]]:
    """The fullstats requests of a cycle: campaign ids WB serves statistics for, ≤ 50 a request."""
    ids = sorted(c.id for c in campaigns if c.status in STAT_STATUSES)
    return [ids[i : i + CHUNK] for i in range(0, len(ids), CHUNK)]


def load_campaigns(inp: SyncInput, queue: str = QUEUE) -> tuple[FeedLoad, list[Campaign]]:
    """Refresh the cabinet's campaigns and their products (with bids), in one transaction.

    A product no longer in a listed campaign is removed from it; campaigns WB stops listing are
    kept (their statistics stay meaningful)."""
    cabinet_id = inp.cabinet_id
    run = FeedLoad(queue, CAMPAIGNS_FEED, cabinet_id, inp.run_id, inp.trigger)
    campaigns = inp.client().list_campaigns()
    run.requests += 1
    products = [row for c in campaigns for row in product_rows(cabinet_id, c)]
    run.fetched([None] * (len(campaigns) + len(products)))
    with inp.connect() as conn, conn.transaction():
        run.merge += merge_rows(
            conn,
            "ad_campaigns",
            CAMPAIGN_COLUMNS,
            ("cabinet_id", "advert_id"),
            [campaign_row(cabinet_id, c) for c in campaigns],
            day_column=None,
        )
        run.merge += merge_rows(
            conn,
            "ad_campaign_products",
            PRODUCT_COLUMNS,
            ("cabinet_id", "advert_id", "nm_id"),
            products,
            day_column=None,
        )
        run.screen(conn, campaigns.screening)
        gone = conn.execute(
            """DELETE FROM ad_campaign_products p
               WHERE p.cabinet_id = %s AND p.advert_id = ANY(%s)
                 AND (p.advert_id, p.nm_id) NOT IN (SELECT * FROM unnest(%s::bigint[], %s::bigint[]))
               RETURNING 1""",
            (cabinet_id, [c.id for c in campaigns], [r[1] for r in products], [r[2] for r in products]),
        ).fetchall()
        run.deleted([None] * len(gone))
    return run, campaigns


def _advertised(conn: psycopg.Connection, cabinet_id: str) -> set[tuple[int, int]]:
    rows = conn.execute("SELECT advert_id, nm_id FROM ad_campaign_products WHERE cabinet_id = %s", (cabinet_id,))
    return {(a, n) for a, n in rows.fetchall()}


def replace_scope(
    conn: psycopg.Connection, run: FeedLoad, adverts: Sequence[int], first: date, last: date, stats: Sequence[AdStat]
) -> None:
    """After an answer's rows were merged: remove the rows of its scope (``adverts`` × [first, last])
    it no longer holds, counted as deleted on their days, and record what it said per campaign and
    day (``ad_stats_answers``), in the caller's transaction."""
    stats = [s for s in stats if first <= s.day <= last]
    gone = conn.execute(
        sql_file("ads_replace_scope"),
        {
            "cabinet_id": run.cabinet_id,
            "adverts": list(adverts),
            "first": first,
            "last": last,
            "k_advert": [s.advert_id for s in stats],
            "k_day": [s.day for s in stats],
            "k_app": [s.app_type for s in stats],
            "k_nm": [s.nm_id for s in stats],
        },
    ).fetchall()
    run.deleted(d for (d,) in gone)
    said: dict[tuple[int, date], list[Any]] = defaultdict(lambda: [0, Decimal(0), 0, Decimal(0)])
    for s in {(s.advert_id, s.day, s.app_type, s.nm_id): s for s in stats}.values():  # WB's repeats: the last
        figures = said[(s.advert_id, s.day)]
        figures[0] += 1
        figures[1] += s.sum
        figures[2] += s.orders
        figures[3] += s.sum_price
    pairs = [(a, first + timedelta(n)) for a in adverts for n in range((last - first).days + 1)]
    figures = [said.get(pair, [0, Decimal(0), 0, Decimal(0)]) for pair in pairs]
    conn.execute(
        sql_file("ads_record_answer"),
        {
            "cabinet_id": run.cabinet_id,
            "run_id": run.run_id,
            "adverts": [a for a, _ in pairs],
            "days": [d for _, d in pairs],
            "rows": [f[0] for f in figures],
            "spend": [f[1] for f in figures],
            "orders": [f[2] for f in figures],
            "orders_sum": [f[3] for f in figures],
        },
    )


def load_stats(
    inp: SyncInput,
    chunks: list[list[int]],
    begin: date,
    end: date,
    *,
    queue: str = QUEUE,
    state_feed: str | None = None,
    only_day: date | None = None,
) -> FeedLoad:
    """fullstats for each chunk over [begin, end], each answer merged with the chunks still to go.

    ``only_day`` keeps the rows of that day only (a partition run). Each answer replaces the rows of
    its chunk's campaigns over [begin, end] (``only_day``: that day), see ``replace_scope``. With
    ``state_feed`` the pending chunks are saved after every answer, so a deferred cycle resumes where
    it stopped."""
    cabinet_id, run_id, client = inp.cabinet_id, inp.run_id, inp.client()
    run = FeedLoad(queue, STATS_FEED, cabinet_id, run_id, inp.trigger)
    window = {"begin": begin.isoformat(), "end": end.isoformat()}
    first, last = (only_day, only_day) if only_day is not None else (begin, end)
    with page_connection(inp.connect) as conn:
        advertised = _advertised(conn, cabinet_id)
        with paged_load(conn, run, state_feed):
            for i, chunk in enumerate(chunks):
                answer = client.fullstats(chunk, begin, end)
                run.requests += 1
                stats = [s for s in answer if s.day == only_day] if only_day is not None else answer
                run.fetched(s.day for s in stats)
                rows = [(cabinet_id, *s.copy_row(), (s.advert_id, s.nm_id) not in advertised) for s in stats]
                with conn.transaction():
                    run.merge += merge_rows(
                        conn,
                        STATS_FEED,
                        STATS_COLUMNS,
                        ("cabinet_id", "advert_id", "day", "app_type", "nm_id"),
                        rows,
                        run_id=run_id,
                    )
                    run.screen(conn, answer.screening)
                    if not answer.screening.refused:
                        # An answer with a refused row is not the whole truth of its scope: it removes
                        # nothing (the row WB sent wrong keeps what it had), as a cut-short listing.
                        replace_scope(conn, run, chunk, first, last, stats)
                    if state_feed is not None:
                        save_cursor(conn, cabinet_id, state_feed, {**window, "pending": chunks[i + 1 :]}, run_id)
        if run.deferred_until is None:
            finish(conn, [run], state_feed=state_feed)
    return run


def _record(inp: SyncInput, run: FeedLoad) -> None:
    with inp.connect() as conn, conn.transaction():
        run.record(conn)


def sync_ads(
    inp: SyncInput, *, queue: str = QUEUE, state_feed: str | None = STATE_FEED, today: date | None = None
) -> list[FeedLoad]:
    """A cycle: campaigns, then the statistics of the window (``inp.window_days`` back, today
    included; default WINDOW_DAYS; fullstats serves up to 31 days a request).

    With ``state_feed``, a cycle left unfinished by a deferral (pending chunks saved for the same
    window) is finished first; otherwise a new cycle covers every campaign WB serves statistics for."""
    days = inp.window_days
    if days is not None and days > MAX_WINDOW_DAYS:
        raise InvalidInput(f"window_days {days}: WB's fullstats serves {MAX_WINDOW_DAYS} days a request at most")
    begin, end = ads_window(today, days)
    campaigns_run, campaigns = load_campaigns(inp, queue)
    chunks = stat_chunks(campaigns)
    if state_feed is not None:
        with inp.connect() as conn:
            cursor = get_state(conn, inp.cabinet_id, state_feed).cursor or {}
        if cursor.get("pending") and (cursor.get("begin"), cursor.get("end")) == (begin.isoformat(), end.isoformat()):
            chunks = cursor["pending"]
    stats_run = load_stats(inp, chunks, begin, end, queue=queue, state_feed=state_feed)
    _record(inp, campaigns_run)
    return [campaigns_run, stats_run]


def sync_campaigns(inp: SyncInput) -> list[FeedLoad]:
    """The `ad_campaigns` partition (a cabinet): the campaigns and their products, figures recorded."""
    run, _ = load_campaigns(inp)
    _record(inp, run)
    return [run]


def sync_stats_day(inp: SyncInput) -> list[FeedLoad]:
    """The `ad_campaign_stats` partition ``inp.day``: the campaigns, then that day's statistics of
    every campaign.

    WB refuses a period that is only today; asking from the day before and keeping the day's rows
    works for today too."""
    assert inp.day is not None
    campaigns_run, campaigns = load_campaigns(inp)
    _record(inp, campaigns_run)
    stats_run = load_stats(inp, stat_chunks(campaigns), inp.day - timedelta(days=1), inp.day, only_day=inp.day)
    return [campaigns_run, stats_run]


def sync(inp: SyncInput) -> list[FeedLoad]:
    """The 5-minute sync: ``sync_ads`` over ``window_days`` (else WINDOW_DAYS), resuming a cycle a
    deferral left unfinished."""
    return sync_ads(inp)


def sync_on_demand(inp: SyncInput) -> list[FeedLoad]:
    """An `autobidder-sync` request: a whole cycle of ``sync_ads`` (never the rest of a scheduled
    one), in the autobidder's queue."""
    return sync_ads(inp, queue=AUTOBIDDER_SYNC, state_feed=None)
