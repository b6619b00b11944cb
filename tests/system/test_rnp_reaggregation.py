"""Re-aggregation end to end with the real daemon: feeds written, batched runs out, rnp_daily filled."""

from __future__ import annotations

from datetime import date

import pytest
from dagster import DagsterEventType, DagsterRunStatus, RunsFilter

from optima_pipelines.orchestration.queues import TAG_QUEUE
from tests.rnp_feeds import (
    TODAY,
    add_cabinets,
    add_order,
    days_ago,
    last_storage_id,
    materialized_partitions,
    rnp_rows,
)
from tests.system.harness import wait_for

pytestmark = pytest.mark.system

SET_CURSOR = """
mutation($sel: SensorSelector!, $cursor: String) {
  setSensorCursor(sensorSelector: $sel, cursor: $cursor) { __typename ... on PythonError { message } }
}
"""
SENSOR = {
    "repositoryLocationName": "optima_pipelines",
    "repositoryName": "__repository__",
    "sensorName": "rnp_reaggregate_sensor",
}


def reaggregate_runs(instance, since: float):
    """The re-aggregation runs of the test's cabinet created after ``since`` (Unix seconds)."""
    runs = instance.get_runs(RunsFilter(tags={TAG_QUEUE: "re-aggregate"}))
    return [
        r
        for r in runs
        if instance.get_run_record_by_id(r.run_id).create_timestamp.timestamp() >= since
        and (r.tags.get("dagster/asset_partition_range_start") or r.tags.get("dagster/partition", "")).startswith(
            "sys1|"
        )
    ]


def finished(instance, count: int, since: float):
    runs = reaggregate_runs(instance, since)
    done = [r for r in runs if r.is_finished]
    return runs if len(runs) >= count and len(done) == len(runs) else None


def days_with_rows(conn, cabinet: str) -> set[date]:
    return {d for (d,) in conn.execute("SELECT DISTINCT day FROM rnp_daily WHERE cabinet_id = %s", (cabinet,))}


def test_an_import_and_a_late_cancellation_through_the_daemon(warm_stack):  # type: ignore[no-untyped-def]
    stack, dep, dagster_instance = warm_stack, warm_stack.dev, warm_stack.instance
    since = stack.began
    # Syncs of earlier tests on this deployment left their pairs due: marked recomputed, as the
    # sensor would have left them, so that what it plans is this test's.
    with stack.warehouse() as warehouse_conn:
        warehouse_conn.execute("UPDATE rnp_watermarks SET recomputed = changes")
    stack.add_cabinet_row("sys1", "SYS1", None)  # what the cabinet sensor would have read
    add_cabinets(dagster_instance, "sys1")
    with stack.warehouse() as warehouse_conn:
        for n in range(30):
            add_order(warehouse_conn, "sys1", f"o{n}", days_ago(n), 42, "100.00")
        stack.start("rnp_reaggregate_sensor")
        # A 30-day user import: the sensor asks for one run over the 30 partitions.
        [run] = wait_for(lambda: finished(dagster_instance, 1, since), "the import's re-aggregation run", timeout=150)
        assert run.status == DagsterRunStatus.SUCCESS, dep.log()[-3000:]
        assert run.tags["dagster/asset_partition_range_start"] == f"sys1|{days_ago(29)}"
        assert run.tags["dagster/asset_partition_range_end"] == f"sys1|{TODAY}"
        assert run.tags["dagster/priority"] == "-10"
        assert days_with_rows(warehouse_conn, "sys1") == {days_ago(n) for n in range(30)}
        # The asset checks ran in the same run, one result per check and partition, all green.
        checks = [
            e.dagster_event.event_specific_data
            for e in dagster_instance.all_logs(run.run_id, of_type=DagsterEventType.ASSET_CHECK_EVALUATION)
            if e.dagster_event
        ]
        assert len(checks) == 3 * 30 and all(c.passed for c in checks)
        ui = dep.graphql(
            """{ assetNodeOrError(assetKey: {path: ["rnp_daily"]}) { ... on AssetNode {
                 assetChecksOrError { ... on AssetChecks { checks { name } } } } } }"""
        )
        shown = {c["name"] for c in ui["assetNodeOrError"]["assetChecksOrError"]["checks"]}
        assert shown == {"orders_match_wb_orders", "ad_spend_matches_ad_campaign_stats", "payout_matches_finance_lines"}

        # The cancellation of the order placed 20 days ago arrives in an increment.
        before = last_storage_id(dagster_instance)
        add_order(warehouse_conn, "sys1", "o20", days_ago(20), 42, "100.00", is_cancel=True)
        runs = wait_for(lambda: finished(dagster_instance, 2, since), "the cancellation's run")
        assert len(runs) == 2 and all(r.status == DagsterRunStatus.SUCCESS for r in runs)
        assert materialized_partitions(dagster_instance, "rnp_daily", before) == [f"sys1|{days_ago(20)}"]
        assert materialized_partitions(dagster_instance, "rnp_sales", before) == [f"sys1|{days_ago(20)}"]
        row = rnp_rows(warehouse_conn, "rnp_daily", "sys1", days_ago(20))[42]
        assert (row["orders_count"], row["cancellations_count"], row["cancellations_sum"]) == (1, 1, 100)
