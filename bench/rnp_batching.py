"""Benchmark: the re-aggregation of a 90-day user import through the real daemon, batched vs naive.

    python bench/rnp_batching.py [--quick] [--days 90] [--products 300]

Starts the real deployment (`optima-pipelines dev`: webserver, daemon, run queue) on a scratch
database and loads one cabinet's orders for ``--days`` days. Then, twice, the same recompute
(rnp_sales and rnp_daily for every day) from empty tables:

1. batched: the import's feed events are reported (one per day, as the import logs them) and the
   re-aggregation sensor requests its runs; timed from the events to the last run's end;
2. naive: one run per partition per domain, as the original queued them (an rnp_sales run for each
   day, then an rnp_daily run for each day), launched through the same run queue; timed from the
   first launch to the last run's end.

Both: number of runs and wall time.
"""

from __future__ import annotations

import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
from dagster import AssetKey, AssetRecordsFilter, DagsterInstance, DagsterRunStatus, RunsFilter

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import harness
from bench.harness import Bench, Option
from optima_pipelines.orchestration.queues import PRIORITY_REAGGREGATE, TAG_QUEUE, queue_tags
from optima_pipelines.partitions import CABINETS_NAME, cabinet_day_key
from optima_pipelines.timeutil import today_moscow
from tests.rnp_feeds import report_feed_event
from tests.system.harness import RunningDeployment

CABINET = "batch1"
ENV = "batchbench"

LAUNCH = """
mutation($params: ExecutionParams!) {
  launchRun(executionParams: $params) { __typename ... on PythonError { message } }
}
"""


def rnp_runs(instance: DagsterInstance, since: float) -> list:
    created_after = datetime.fromtimestamp(since, UTC)
    return list(instance.get_runs(RunsFilter(tags={TAG_QUEUE: "re-aggregate"}, created_after=created_after)))


def all_done(instance: DagsterInstance, since: float, expected_runs: int | None = None):
    def check() -> list | None:
        runs = rnp_runs(instance, since)
        if not runs or any(not r.is_finished for r in runs):
            return None
        if expected_runs is not None and len(runs) < expected_runs:
            return None
        return runs

    return check


def materialized_days(instance: DagsterInstance, after: int) -> int:
    records = instance.fetch_materializations(
        AssetRecordsFilter(asset_key=AssetKey("rnp_daily"), after_storage_id=after), limit=10_000
    ).records
    return len({r.asset_materialization.partition for r in records if r.asset_materialization})


def last_id(instance: DagsterInstance) -> int:
    records = instance.fetch_materializations(AssetKey("rnp_daily"), limit=1).records
    return records[0].storage_id if records else 0


def truncate(conn: psycopg.Connection) -> None:
    conn.execute("TRUNCATE rnp_sales, rnp_ads, rnp_finance, rnp_daily")


def sensor_ticks(dep: RunningDeployment) -> int:
    data = dep.graphql(
        """query($s: SensorSelector!) { sensorOrError(sensorSelector: $s) {
             ... on Sensor { sensorState { ticks(limit: 5) { status } } } } }""",
        {
            "s": {
                "repositoryLocationName": "optima_pipelines",
                "repositoryName": "__repository__",
                "sensorName": "rnp_reaggregate_sensor",
            }
        },
    )
    return len(data["sensorOrError"].get("sensorState", {}).get("ticks", []))


def launch(dep: RunningDeployment, asset: str, key: str) -> None:
    cabinet, day = key.split("|")
    tags = {
        **queue_tags("re-aggregate", priority=PRIORITY_REAGGREGATE),
        "dagster/partition": key,
        "dagster/partition/cabinet": cabinet,
        "dagster/partition/date": day,
    }
    params = {
        "selector": {
            "repositoryLocationName": "optima_pipelines",
            "repositoryName": "__repository__",
            "jobName": "rnp_recompute",
            "assetSelection": [{"path": [asset]}],
        },
        "executionMetadata": {"tags": [{"key": k, "value": v} for k, v in tags.items()]},
    }
    result = dep.graphql(LAUNCH, {"params": params})["launchRun"]
    if result["__typename"] != "LaunchRunSuccess":
        raise SystemExit(f"launch failed: {result}")


TITLE = "re-aggregation of a 90-day user import through the real daemon: batched runs vs a run per partition"
OPTIONS = [
    Option("days", 90, 10, "days of the import"),
    Option("products", 300, 50, "products of the cabinet"),
]


def run(bench: Bench, opts: Any) -> None:
    days, products = opts.days, opts.products
    with bench.environment(ENV) as env:
        today = today_moscow()
        first = today - timedelta(days=days - 1)
        with env.connect() as conn:
            conn.execute("INSERT INTO cabinets (id, name) VALUES (%s, 'batching bench')", (CABINET,))
            conn.execute(
                """
                INSERT INTO wb_orders (cabinet_id, srid, day, date, last_change_date, nm_id, total_price, price_with_disc)
                SELECT %(c)s, 'o' || n || '.' || p, %(first)s::date + n,
                       (%(first)s::date + n + time '12:00') AT TIME ZONE 'Europe/Moscow', now(), p, 1000, 500 + p
                FROM generate_series(0, %(days)s - 1) AS n, generate_series(1, %(products)s) AS p
                """,
                {"c": CABINET, "first": first, "days": days, "products": products},
            )
        with harness.deployment(env) as stack:
            instance, dep = stack.instance, stack.dev
            instance.add_dynamic_partitions(CABINETS_NAME, [CABINET])
            # Start from a ticking sensor: its first tick after a cold start is not what an import waits for.
            harness.wait_for(lambda: sensor_ticks(dep) > 0, "the sensor's first tick", timeout=120)
            since, after = time.time(), last_id(instance)
            for n in range(days):
                report_feed_event(instance, "wb_orders", CABINET, first + timedelta(n), trigger="user_import")
            harness.wait_for(lambda: rnp_runs(instance, since), "the sensor to request runs", timeout=120)
            harness.wait_for(lambda: materialized_days(instance, after) >= days, "the batched recompute", timeout=600)
            runs = harness.wait_for(all_done(instance, since), "the batched runs to finish", timeout=600)
            batched = time.time() - since
            check_succeeded(runs)

            with env.connect() as conn:
                truncate(conn)
            since, after = time.time(), last_id(instance)
            keys = [str(cabinet_day_key(CABINET, first + timedelta(n))) for n in range(days)]
            for key in keys:
                launch(dep, "rnp_sales", key)
            harness.wait_for(all_done(instance, since, days), "the naive rnp_sales runs", timeout=1800)
            for key in keys:
                launch(dep, "rnp_daily", key)
            naive_runs = harness.wait_for(all_done(instance, since, 2 * days), "the naive rnp_daily runs", timeout=1800)
            naive = time.time() - since
            check_succeeded(naive_runs)
            if materialized_days(instance, after) < days:
                raise RuntimeError("the naive runs did not materialize every day")
    bench.figure(f"re-aggregate a {days}-day import, batched by the sensor ({len(runs)} run(s))", batched, "s",
                 baseline_name=f"a run per partition per domain ({len(naive_runs)} runs)", baseline=naive,
                 higher_is_better=False, note=f"1 cabinet × {products} products, from the feed events")  # fmt: skip


def check_succeeded(runs: list) -> None:
    failed = [r.run_id for r in runs if r.status != DagsterRunStatus.SUCCESS]
    if failed:
        raise RuntimeError(f"runs failed: {failed}")


if __name__ == "__main__":
    harness.main(sys.modules[__name__])
