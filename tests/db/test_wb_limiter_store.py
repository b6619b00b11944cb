"""The rate limiter's buckets in PostgreSQL: shared by limiters that share nothing but the database."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime

import psycopg
import pytest

from optima_pipelines.db.connection import connect
from optima_pipelines.wb import LimitRule, PostgresLimiterStore, RateLimiter, WbDeferred
from optima_pipelines.wb.models import AdStat, Card, FunnelDay, News, Order, Price, ReportLine, Sale, Stock

SALES = LimitRule(60, 1, 1)  # statistics sales: one a minute, no burst


@pytest.fixture
def connect_env(optima_env: str, database_url: str):
    return lambda: connect(database_url, f"optima_{optima_env}")


def test_a_pause_recorded_by_one_limiter_is_honoured_by_another(connect_env):
    first = RateLimiter(PostgresLimiterStore(connect_env))
    first.record_pause("c1", "statistics.sales", SALES, 120, "WB answered 429 to GET statistics /x with a 120 s pause")

    second = RateLimiter(PostgresLimiterStore(connect_env))  # a new process would build exactly this
    assert 115 < second.wait_time("c1", "statistics.sales") <= 120
    before = time.time()
    with pytest.raises(WbDeferred) as caught:
        second.acquire("c1", "statistics.sales", SALES, max_wait=5)
    assert "120 s pause" in caught.value.reason
    assert 115 < (caught.value.resume_at - datetime.fromtimestamp(before, UTC)).total_seconds() <= 121
    assert second.wait_time("c2", "statistics.sales") == 0


def test_the_row_says_what_an_operator_needs(connect_env, warehouse_conn: psycopg.Connection):
    limiter = RateLimiter(PostgresLimiterStore(connect_env))
    limiter.acquire("c1", "statistics.sales", SALES, max_wait=0)
    limiter.record_pause("c1", "finance.detailed", SALES, 30, "WB answered 429 with a 30 s pause")
    rows = warehouse_conn.execute(
        "SELECT limit_group, next_allowed_at - now() > interval '25 seconds', paused_until > now(), reason "
        "FROM wb_rate_limits WHERE cabinet_id = 'c1' ORDER BY limit_group"
    ).fetchall()
    assert rows == [
        ("finance.detailed", True, True, "WB answered 429 with a 30 s pause"),
        ("statistics.sales", True, False, None),
    ]


def test_limiters_in_parallel_never_hand_out_the_same_slot(connect_env):
    """Eight limiters (separate connections, as in separate processes) take 24 slots at one instant."""
    rule = LimitRule(1, 20, 4)  # 50 ms apart once a burst of 4 is spent
    instant = time.time()
    waits: list[float] = []
    lock = threading.Lock()
    barrier = threading.Barrier(8)

    def worker() -> None:
        limiter = RateLimiter(PostgresLimiterStore(connect_env), clock=lambda: instant, sleep=lambda s: None)
        barrier.wait()
        for _ in range(3):
            wait = limiter.acquire("c1", "feedbacks", rule, max_wait=60)
            with lock:
                waits.append(wait)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # The burst at once, then every slot exactly one interval after the previous: none given twice.
    assert sorted(waits) == pytest.approx([0.0] * 4 + [0.05 * k for k in range(1, 21)], abs=1e-4)


TABLES = {
    "wb_orders": Order,
    "wb_sales": Sale,
    "wb_report_lines": ReportLine,
    "ad_campaign_stats": AdStat,
    "rnp_funnel_stats": FunnelDay,
    "stocks": Stock,
    "products": Card,
    "prices": Price,
}
#: Columns the loader fills itself: the cabinet, bookkeeping, and what only it knows.
LOADER_COLUMNS = {
    "cabinet_id",
    "loaded_at",
    "run_id",
    "synced_at",
    "source",
    "request_id",
    "is_associated",
    "line_seq",  # numbers identical lines of a user's uploaded report (migration 0007)
}


@pytest.mark.parametrize("table", sorted(TABLES))
def test_row_models_match_their_warehouse_tables(table: str, warehouse_conn: psycopg.Connection):
    columns = [
        r[0]
        for r in warehouse_conn.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() "
            "AND table_name = %s",
            (table,),
        ).fetchall()
    ]
    model = TABLES[table]
    assert set(model.COLUMNS) <= set(columns), set(model.COLUMNS) - set(columns)
    if table == "stocks":  # the loader adds the snapshot's day and time
        assert set(columns) - set(model.COLUMNS) == LOADER_COLUMNS & set(columns) | {"day", "snapshot_at"}
    else:
        assert set(columns) - set(model.COLUMNS) <= LOADER_COLUMNS


def test_news_rows_match_the_knowledge_base_table(warehouse_conn: psycopg.Connection):
    columns = {
        r[0]
        for r in warehouse_conn.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() "
            "AND table_name = 'kb_articles'"
        ).fetchall()
    }
    assert set(News.COLUMNS) == columns - {"synced_at"}
