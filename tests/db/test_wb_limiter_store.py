"""The rate limiter's buckets in PostgreSQL: shared by limiters that share nothing but the database."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime

import psycopg
import pytest

from optima_pipelines.db.connection import connect
from optima_pipelines.sync import ads, catalog, digitization, finance, funnel, inventory, news
from optima_pipelines.wb import LimitRule, PostgresLimiterStore, RateLimiter, WbDeferred

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


#: Each feed table and the columns its load writes (sync/).
TABLES = {
    "wb_orders": digitization.ORDERS.columns,
    "wb_sales": digitization.SALES.columns,
    "wb_report_lines": finance.API_COLUMNS,
    "ad_campaigns": ads.CAMPAIGN_COLUMNS,
    "ad_campaign_products": ads.PRODUCT_COLUMNS,
    "ad_campaign_stats": ads.STATS_COLUMNS,
    "rnp_funnel_stats": funnel.COLUMNS,
    "stocks": inventory.COLUMNS,
    "products": catalog.CARD_COLUMNS,
    "prices": catalog.PRICE_COLUMNS,
    "kb_articles": news.COLUMNS,
}
#: Columns a load leaves to the merge and the table's defaults: bookkeeping, and what only uploads fill.
DEFAULTED = {
    "loaded_at",
    "run_id",
    "synced_at",
    "snapshot_at",
    "source",
    "request_id",
    "line_seq",  # numbers identical lines of a user's uploaded report (migration 0007)
    "attributed_day",  # where the РНП places a report line, set by its trigger (migration 0015)
}


@pytest.mark.parametrize("table", sorted(TABLES))
def test_each_load_writes_its_tables_columns(table: str, warehouse_conn: psycopg.Connection):
    columns = {
        r[0]
        for r in warehouse_conn.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() "
            "AND table_name = %s",
            (table,),
        ).fetchall()
    }
    assert columns, f"no table {table}"
    written = set(TABLES[table])
    assert written <= columns, written - columns
    assert columns - written <= DEFAULTED, columns - written - DEFAULTED
