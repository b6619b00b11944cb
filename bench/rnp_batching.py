"""Benchmark: the re-aggregation of a 90-day user import through the real daemon, batched vs naive.

    python bench/rnp_batching.py [--days 90] [--products 300] [--server-url URL]

Starts the real deployment (`optima-pipelines dev`: webserver, daemon, run queue) on a scratch
database and loads one cabinet's orders for ``--days`` days. Then, twice, the same recompute
(rnp_sales and rnp_daily for every day) from empty tables:

1. batched: the import's feed events are reported (one per day, as the import logs them) and the
   re-aggregation sensor requests its runs; timed from the events to the last run's end;
2. naive: one run per partition per domain, as the original queued them (an rnp_sales run for each
   day, then an rnp_daily run for each day), launched through the same run queue; timed from the
   first launch to the last run's end.

Prints both: number of runs and wall time. The server is --server-url, else
OPTIMA_TEST_DATABASE_URL, else an embedded PostgreSQL.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
from cryptography.fernet import Fernet
from dagster import AssetKey, AssetRecordsFilter, DagsterInstance, DagsterRunStatus, RunsFilter
from psycopg import sql

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the system-test harness

from optima_pipelines.db.connection import connect
from optima_pipelines.db.migrate import ensure_schemas, upgrade
from optima_pipelines.db.urls import dagster_storage_url, with_database
from optima_pipelines.partitions import CABINETS_NAME, cabinet_day_key
from optima_pipelines.queues import PRIORITY_REAGGREGATE, TAG_QUEUE, queue_tags
from optima_pipelines.runtime import project_file
from optima_pipelines.timeutil import today_moscow
from tests.rnp_feeds import report_feed_event
from tests.system.harness import RunningDeployment, running_dev

CABINET = "batch1"
ENV = "batchbench"

LAUNCH = """
mutation($params: ExecutionParams!) {
  launchRun(executionParams: $params) { __typename ... on PythonError { message } }
}
"""


def wait(condition: Callable[[], Any], what: str, timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.5)
    raise SystemExit(f"timed out after {timeout:.0f} s waiting for {what}")


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--days", type=int, default=90)
    parser.add_argument("--products", type=int, default=300)
    parser.add_argument("--server-url", default=os.environ.get("OPTIMA_TEST_DATABASE_URL"))
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="rnp-batching-"))
    server = args.server_url
    if not server:
        from optima_pipelines.db.embedded import start_embedded

        server = start_embedded(work / "server")
    name = f"rnp_batching_{uuid.uuid4().hex[:8]}"
    with connect(server, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        run(with_database(server, name), work, args.days, args.products)
    finally:
        with connect(server, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
        shutil.rmtree(work, ignore_errors=True)


def run(url: str, work: Path, days: int, products: int) -> None:
    home = work / "dagster_home"
    home.mkdir()
    shutil.copyfile(project_file("dagster.yaml"), home / "dagster.yaml")
    env = {
        "OPTIMA_DATABASE_URL": url,
        "OPTIMA_ENV": ENV,
        "OPTIMA_STATE_DIR": str(work / "state"),
        "OPTIMA_SECRET_KEY": Fernet.generate_key().decode(),
        "OPTIMA_DAGSTER_STORAGE_URL": dagster_storage_url(url, f"dagster_{ENV}"),
        "DAGSTER_HOME": str(home),
    }
    os.environ.update(env)
    upgrade(url, f"optima_{ENV}")
    ensure_schemas(url, f"dagster_{ENV}")
    today = today_moscow()
    first = today - timedelta(days=days - 1)
    with connect(url, f"optima_{ENV}", autocommit=True) as conn:
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
    with DagsterInstance.get() as instance, running_dev({}, work) as dep:
        instance.add_dynamic_partitions(CABINETS_NAME, [CABINET])
        print(f"rnp re-aggregation of a {days}-day user import, 1 cabinet × {products} products, real daemon")

        # Start from a ticking sensor: its first tick after a cold start is not what an import waits for.
        wait(lambda: sensor_ticks(dep) > 0, "the sensor's first tick", timeout=120)
        since, after = time.time(), last_id(instance)
        for n in range(days):
            report_feed_event(instance, "wb_orders", CABINET, first + timedelta(n), trigger="user_import")
        wait(lambda: rnp_runs(instance, since), "the sensor to request runs", timeout=120)
        requested = time.time() - since
        wait(lambda: materialized_days(instance, after) >= days, "the batched recompute", timeout=600)
        runs = wait(all_done(instance, since), "the batched runs to finish", timeout=600)
        batched = time.time() - since
        failed = [r.run_id for r in runs if r.status != DagsterRunStatus.SUCCESS]
        print(
            f"  batched (sensor): {len(runs):>4} runs, {batched:7.1f} s from the events "
            f"({requested:.1f} s of it until the sensor's tick requested them; failed: {failed or 'none'})"
        )

        with connect(url, f"optima_{ENV}", autocommit=True) as conn:
            truncate(conn)
        since, after = time.time(), last_id(instance)
        keys = [str(cabinet_day_key(CABINET, first + timedelta(n))) for n in range(days)]
        for key in keys:
            launch(dep, "rnp_sales", key)
        wait(all_done(instance, since, days), "the naive rnp_sales runs", timeout=1800)
        for key in keys:
            launch(dep, "rnp_daily", key)
        naive_runs = wait(all_done(instance, since, 2 * days), "the naive rnp_daily runs", timeout=1800)
        naive = time.time() - since
        failed = [r.run_id for r in naive_runs if r.status != DagsterRunStatus.SUCCESS]
        print(
            f"  naive (a run per partition per domain): {len(naive_runs):>4} runs, {naive:7.1f} s from the first launch "
            f"(failed: {failed or 'none'})"
        )
        if materialized_days(instance, after) < days:
            raise SystemExit("the naive runs did not materialize every day")
        print(f"  batched: {len(runs)} run(s) instead of {len(naive_runs)}, {naive / batched:.1f}× less wall time")


if __name__ == "__main__":
    main()
