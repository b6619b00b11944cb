"""How long a /metrics scrape takes with 500 cabinets and 100k runs in Dagster's storage.

    OPTIMA_TEST_DATABASE_URL=postgresql://postgres@127.0.0.1:5432/postgres python bench/ops_metrics_scrape.py

Creates a throwaway database, migrates a warehouse and Dagster's storage into it, fills them with
bulk SQL shaped like Dagster's own rows (runs + run_tags; our ops totals and history), and times:
- the scrape on the same environment while empty (baseline, same run);
- the scrape with the data (what the metrics process does: optima_pipelines.ops.metrics);
- the queue figures through Dagster's public API (DagsterInstance.get_runs_count per queue and
  status), the alternative to reading run storage with SQL.
The database is dropped at the end.
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

from psycopg import sql

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from optima_pipelines.db.connection import connect
from optima_pipelines.db.migrate import ensure_schemas, upgrade
from optima_pipelines.db.urls import dagster_storage_url, with_database
from optima_pipelines.ops.metrics import TAGS, build_registry
from optima_pipelines.queues import QUEUES
from optima_pipelines.runtime import project_file

CABINETS = 500
RUNS = 100_000
FEEDS = [
    ("digitization-sync", "wb_orders"),
    ("digitization-sync", "wb_sales"),
    ("rnp-finance-sync", "wb_report_lines"),
    ("rnp-ads-sync", "ad_campaign_stats"),
    ("rnp-sections-sync", "rnp_funnel_stats"),
    ("catalog-sync", "products"),
    ("catalog-sync", "prices"),
    ("inventory-sync", "stocks"),
]
SCRAPES = 30


def fill(conn, dagster_schema: str) -> None:
    runs, tags = sql.Identifier(dagster_schema, "runs"), sql.Identifier(dagster_schema, "run_tags")
    queues = list(QUEUES)
    conn.execute(
        "INSERT INTO cabinets (id, name, status) SELECT 'cab-' || i, 'Cabinet ' || i, "
        "CASE WHEN i %% 50 = 0 THEN 'paused' ELSE 'active' END FROM generate_series(1, %s) AS i",
        (CABINETS,),
    )
    # Runs over the last 7 days: ~93% success, 5% failure, 1% canceled; 300 queued, 6 running.
    conn.execute(
        sql.SQL(
            """
            INSERT INTO {runs} (run_id, pipeline_name, status, run_body, create_timestamp, update_timestamp,
                                start_time, end_time)
            SELECT md5('run' || i)::uuid::text, '__ASSET_JOB',
                   CASE WHEN i <= 300 THEN 'QUEUED' WHEN i <= 306 THEN 'STARTED'
                        WHEN i %% 100 < 5 THEN 'FAILURE' WHEN i %% 100 = 5 THEN 'CANCELED' ELSE 'SUCCESS' END,
                   '{{}}', t, t + interval '5 seconds',
                   extract(epoch FROM t), extract(epoch FROM t) + 2 + (i %% 30)
            FROM (SELECT i, localtimestamp - (i * interval '6 seconds') AS t FROM generate_series(1, %s) AS i) AS s
            """
        ).format(runs=runs),
        (RUNS,),
    )
    conn.execute(
        sql.SQL(
            """
            INSERT INTO {tags} (run_id, key, value)
            SELECT md5('run' || i)::uuid::text, k, v
            FROM generate_series(1, %(n)s) AS i,
            LATERAL (VALUES
                ('optima/queue', (%(queues)s::text[])[1 + i %% %(nq)s]),
                ('optima/cabinet', 'cab-' || (1 + i %% %(nc)s)),
                ('dagster/partition/cabinet', 'cab-' || (1 + i %% %(nc)s)),
                ('dagster/partition/date', to_char(current_date - (i %% 30), 'YYYY-MM-DD')),
                ('optima/trigger', 'schedule'),
                ('dagster/priority', '0')
            ) AS t(k, v)
            UNION ALL
            SELECT md5('run' || i)::uuid::text, 'optima/skipped', 'account-busy'
            FROM generate_series(1, %(n)s) AS i WHERE i %% 50 = 7
            """
        ).format(tags=tags),
        {"n": RUNS, "queues": queues, "nq": len(queues), "nc": CABINETS},
    )
    # Our figures: totals per (feed, cabinet), a week of history at a 30-minute cadence for a tenth.
    now = datetime.now(UTC)
    for queue, feed in FEEDS:
        conn.execute(
            "INSERT INTO ops_feed_sync_totals (feed, cabinet_id, queue, syncs_success, rows_fetched, rows_inserted, "
            "last_status, last_finished_at, last_success_at) "
            "SELECT %s, 'cab-' || i, %s, 300, 1000 * i, 100 * i, 'success', %s - i * interval '1 second', "
            "%s - i * interval '1 second' FROM generate_series(1, %s) AS i",
            (feed, queue, now, now, CABINETS),
        )
        conn.execute(
            "INSERT INTO ops_feed_syncs (queue, feed, cabinet_id, trigger, status, rows_fetched, started_at, finished_at) "
            "SELECT %s, %s, 'cab-' || (1 + i %% %s), 'scheduled', 'success', 100, "
            "%s - i * interval '1 minute' - interval '5 seconds', %s - i * interval '1 minute' "
            "FROM generate_series(1, 25000) AS i",
            (queue, feed, CABINETS, now, now),
        )
    conn.execute(
        "INSERT INTO ops_reaggregation_totals (domain, cabinet_id, runs_success, partitions_requested, "
        "partitions_recomputed, lag_seconds_total, lag_count, last_finished_at) "
        "SELECT d, 'cab-' || i, 100, 300, 300, 3000, 100, now() "
        "FROM generate_series(1, %s) AS i, unnest(ARRAY['rnp-sales', 'rnp-ads', 'rnp-finance', 'merge']) AS d",
        (CABINETS,),
    )
    conn.execute(
        "INSERT INTO ops_reaggregations (domain, cabinet_id, trigger, status, partitions_requested, "
        "partitions_recomputed, source_event_at, started_at, finished_at) "
        "SELECT 'rnp-sales', 'cab-' || (1 + i %% %s), 'sensor', 'success', 3, 3, "
        "now() - i * interval '10 seconds' - interval '40 seconds', now() - i * interval '10 seconds' - interval '2 seconds', "
        "now() - i * interval '10 seconds' FROM generate_series(1, 60000) AS i",
        (CABINETS,),
    )
    conn.execute(sql.SQL("ANALYZE {}").format(runs))
    conn.execute(sql.SQL("ANALYZE {}").format(tags))
    conn.execute("ANALYZE")


def time_scrapes(database_url: str, schema: str, dagster_schema: str) -> list[float]:
    from prometheus_client import generate_latest

    registry, collector = build_registry(database_url, schema, dagster_schema)
    generate_latest(registry)  # connect and warm up
    timings = []
    for _ in range(SCRAPES):
        started = time.perf_counter()
        body = generate_latest(registry)
        timings.append(time.perf_counter() - started)
    assert b"optima_metrics_up 1.0" in body, body[-400:]
    collector.close()
    return timings


def time_queries(database_url: str, schema: str, dagster_schema: str) -> list[tuple[str, list[float]]]:
    """Each query of a scrape on its own, to see where the time goes."""
    from optima_pipelines.ops.metrics import OptimaCollector

    collector = OptimaCollector(database_url, schema, dagster_schema)
    conn = collector._connection()
    out = []
    for name in (
        "queue_runs",
        "queued_age",
        "skipped_runs",
        "feed_sync_totals",
        "reaggregation_totals",
        "reaggregation_recent_lag",
        "cabinets_by_status",
    ):
        query = collector._sql(name)
        timings = []
        for _ in range(10):
            started = time.perf_counter()
            conn.execute(query, TAGS if name in ("queue_runs", "queued_age", "skipped_runs") else None).fetchall()
            timings.append(time.perf_counter() - started)
        out.append((name, timings))
    collector.close()
    return out


def time_public_api(instance) -> list[float]:
    from dagster import DagsterRunStatus, RunsFilter

    active = [DagsterRunStatus.QUEUED, DagsterRunStatus.STARTING, DagsterRunStatus.STARTED, DagsterRunStatus.CANCELING]
    finished = [DagsterRunStatus.SUCCESS, DagsterRunStatus.FAILURE, DagsterRunStatus.CANCELED]
    since = datetime.now(UTC) - timedelta(hours=24)
    timings = []
    for _ in range(3):
        started = time.perf_counter()
        for queue in QUEUES:
            for status in active:
                instance.get_runs_count(RunsFilter(statuses=[status], tags={"optima/queue": queue}))
            for status in finished:
                instance.get_runs_count(
                    RunsFilter(statuses=[status], tags={"optima/queue": queue}, updated_after=since)
                )
        timings.append(time.perf_counter() - started)
    return timings


def summary(label: str, timings: list[float]) -> str:
    ordered = sorted(timings)
    p95 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]
    return f"{label:<58} median {statistics.median(timings) * 1000:8.1f} ms   p95 {p95 * 1000:8.1f} ms   (n={len(timings)})"


def main() -> None:
    server = os.environ.get("OPTIMA_TEST_DATABASE_URL") or sys.exit(
        "set OPTIMA_TEST_DATABASE_URL to a PostgreSQL server"
    )
    name = f"optima_bench_{uuid.uuid4().hex[:8]}"
    with connect(server, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    home = Path(tempfile.mkdtemp(prefix="optima-bench-"))
    try:
        url = with_database(server, name)
        schema, dagster_schema = "optima_bench", "dagster_bench"
        upgrade(url, schema)
        ensure_schemas(url, dagster_schema)
        shutil.copyfile(project_file("dagster.yaml"), home / "dagster.yaml")
        os.environ.update(
            DAGSTER_HOME=str(home),
            OPTIMA_DAGSTER_STORAGE_URL=dagster_storage_url(url, dagster_schema),
            OPTIMA_ENV="bench",
        )
        from dagster import DagsterInstance

        with DagsterInstance.get() as instance:  # creates Dagster's tables in dagster_bench
            baseline = time_scrapes(url, schema, dagster_schema)
            started = time.perf_counter()
            with connect(url, schema, autocommit=True) as conn:
                fill(conn, dagster_schema)
            fill_seconds = time.perf_counter() - started
            loaded = time_scrapes(url, schema, dagster_schema)
            queries = time_queries(url, schema, dagster_schema)
            api = time_public_api(instance)
        print(
            f"filled {CABINETS} cabinets, {RUNS} runs (+ ~{RUNS * 6} run tags), ops totals and history in {fill_seconds:.1f} s"
        )
        print(summary("scrape, empty environment (baseline)", baseline))
        print(summary(f"scrape, {CABINETS} cabinets + {RUNS // 1000}k runs (SQL on run storage)", loaded))
        for query, timings in queries:
            print(summary(f"  of which query {query}", timings))
        print(summary(f"queue counts only via public API ({len(QUEUES)} queues x 7 statuses)", api))
    finally:
        shutil.rmtree(home, ignore_errors=True)
        with connect(server, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


if __name__ == "__main__":
    main()
