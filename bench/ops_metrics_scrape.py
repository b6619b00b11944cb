"""How long a /metrics scrape takes with 500 cabinets and 100k runs in Dagster's storage.

    python bench/ops_metrics_scrape.py [--quick] [--cabinets 500] [--runs 100000] [--scrapes 30]

Creates a throwaway database, migrates a warehouse and Dagster's storage into it, fills them with
bulk SQL shaped like Dagster's own rows (runs + run_tags; our ops totals and history), and times:
- the scrape on the same environment while empty (baseline, same run);
- the scrape with the data (what the metrics process does: optima_pipelines.operations.metrics);
- the queue figures through Dagster's public API (DagsterInstance.get_runs_count per queue and
  status), the alternative to reading run storage with SQL.
The database is dropped at the end.
"""

from __future__ import annotations

import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import harness
from bench.harness import Bench, Option
from optima_pipelines.operations.metrics import TAGS, build_registry
from optima_pipelines.orchestration.queues import QUEUES

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


def fill(conn, dagster_schema: str, cabinets: int, runs: int) -> None:
    conn.execute(
        "INSERT INTO cabinets (id, name, status) SELECT 'cab-' || i, 'Cabinet ' || i, "
        "CASE WHEN i %% 50 = 0 THEN 'paused' ELSE 'active' END FROM generate_series(1, %s) AS i",
        (cabinets,),
    )
    harness.fill_runs(conn, dagster_schema, runs, cabinets)
    # Our figures: totals per (feed, cabinet), a week of history at a 30-minute cadence for a tenth.
    now = datetime.now(UTC)
    for queue, feed in FEEDS:
        conn.execute(
            "INSERT INTO ops_feed_sync_totals (feed, cabinet_id, queue, syncs_success, rows_fetched, rows_inserted, "
            "last_status, last_finished_at, last_success_at) "
            "SELECT %s, 'cab-' || i, %s, 300, 1000 * i, 100 * i, 'success', %s - i * interval '1 second', "
            "%s - i * interval '1 second' FROM generate_series(1, %s) AS i",
            (feed, queue, now, now, cabinets),
        )
        conn.execute(
            "INSERT INTO ops_feed_syncs (queue, feed, cabinet_id, trigger, status, rows_fetched, started_at, finished_at) "
            "SELECT %s, %s, 'cab-' || (1 + i %% %s), 'scheduled', 'success', 100, "
            "%s - i * interval '1 minute' - interval '5 seconds', %s - i * interval '1 minute' "
            "FROM generate_series(1, 25000) AS i",
            (queue, feed, cabinets, now, now),
        )
    conn.execute(
        "INSERT INTO ops_reaggregation_totals (domain, cabinet_id, runs_success, partitions_requested, "
        "partitions_recomputed, lag_seconds_total, lag_count, last_finished_at) "
        "SELECT d, 'cab-' || i, 100, 300, 300, 3000, 100, now() "
        "FROM generate_series(1, %s) AS i, unnest(ARRAY['rnp-sales', 'rnp-ads', 'rnp-finance', 'merge']) AS d",
        (cabinets,),
    )
    conn.execute(
        "INSERT INTO ops_reaggregations (domain, cabinet_id, trigger, status, partitions_requested, "
        "partitions_recomputed, source_event_at, started_at, finished_at) "
        "SELECT 'rnp-sales', 'cab-' || (1 + i %% %s), 'sensor', 'success', 3, 3, "
        "now() - i * interval '10 seconds' - interval '40 seconds', now() - i * interval '10 seconds' - interval '2 seconds', "
        "now() - i * interval '10 seconds' FROM generate_series(1, 60000) AS i",
        (cabinets,),
    )
    conn.execute("ANALYZE")


def time_scrapes(database_url: str, schema: str, dagster_schema: str, scrapes: int) -> list[float]:
    from prometheus_client import generate_latest

    registry, collector = build_registry(database_url, schema, dagster_schema)
    generate_latest(registry)  # connect and warm up
    timings = []
    for _ in range(scrapes):
        started = time.perf_counter()
        body = generate_latest(registry)
        timings.append(time.perf_counter() - started)
    assert b"optima_metrics_up 1.0" in body, body[-400:]
    collector.close()
    return timings


def time_queries(database_url: str, schema: str, dagster_schema: str) -> list[tuple[str, list[float]]]:
    """Each query of a scrape on its own, to see where the time goes."""
    from optima_pipelines.operations.metrics import AGE_SINCE, OptimaCollector

    collector = OptimaCollector(database_url, schema, dagster_schema)
    conn = collector._connection()
    out = []
    for name in (
        "queue_runs",
        "oldest_run_age",
        "skipped_runs",
        "feed_sync_totals",
        "reaggregation_totals",
        "reaggregation_recent_lag",
        "cabinets_by_status",
    ):
        query = collector._sql(name, since=AGE_SINCE["QUEUED"])
        params = {**TAGS, "status": "QUEUED"} if name in ("queue_runs", "oldest_run_age", "skipped_runs") else None
        timings = []
        for _ in range(10):
            started = time.perf_counter()
            conn.execute(query, params).fetchall()
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


TITLE = "/metrics scrape time with 500 cabinets and 100k runs, vs an empty environment and the public API"
OPTIONS = [
    Option("cabinets", 500, 50, "cabinets"),
    Option("runs", 100_000, 5_000, "runs in Dagster's storage"),
    Option("scrapes", 30, 5, "timed scrapes"),
]


def run(bench: Bench, opts: Any) -> None:
    with bench.environment("metrics") as env:
        schema, dagster_schema = env.schema, f"dagster_{env.env}"
        with env.instance() as instance:  # creates Dagster's tables
            baseline = time_scrapes(env.database_url, schema, dagster_schema, opts.scrapes)
            started = time.perf_counter()
            with env.connect() as conn:
                fill(conn, dagster_schema, opts.cabinets, opts.runs)
            harness.say(f"  filled {opts.cabinets} cabinets, {opts.runs:,} runs, ops totals and history in "
                        f"{time.perf_counter() - started:.1f} s")  # fmt: skip
            loaded = time_scrapes(env.database_url, schema, dagster_schema, opts.scrapes)
            for query, timings in time_queries(env.database_url, schema, dagster_schema):
                harness.say(f"  of which query {query}: median {statistics.median(timings) * 1000:.1f} ms")
            api = time_public_api(instance)
    size = f"{opts.cabinets} cabinets + {opts.runs // 1000}k runs"
    for q, label in ((0.5, "median"), (0.95, "p95")):
        bench.figure(f"/metrics scrape, {size}, {label} (n={len(loaded)})", harness.quantile(loaded, q) * 1000, "ms",
                     baseline_name="same scrape, empty environment", baseline=harness.quantile(baseline, q) * 1000,
                     higher_is_better=False)  # fmt: skip
    bench.figure(f"/metrics scrape, {size}, median", harness.quantile(loaded, 0.5) * 1000, "ms",
                 baseline_name=f"queue counts alone via Dagster's public API ({len(QUEUES)} queues × 7 statuses)",
                 baseline=harness.quantile(api, 0.5) * 1000, higher_is_better=False)  # fmt: skip


if __name__ == "__main__":
    harness.main(sys.modules[__name__])
