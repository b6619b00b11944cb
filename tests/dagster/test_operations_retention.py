"""Run retention keeps failed runs and every partition's latest materialization, and prunes the rest."""

from datetime import UTC, datetime, timedelta

from dagster import (
    AssetKey,
    DagsterRunStatus,
    RunsFilter,
    StaticPartitionsDefinition,
    asset,
    materialize,
    op,
)
from dagster import job as dagster_job

from optima_pipelines.operations.retention import prune_runs_job, prune_successful_runs
from optima_pipelines.resources.warehouse import Warehouse
from tests.ops_records import synced

DAYS = StaticPartitionsDefinition(["d1", "d2", "d3"])
FAIL = {"on": False}


@asset(partitions_def=DAYS)
def daily(context) -> None:
    if FAIL["on"]:
        raise RuntimeError("this materialization fails")


@op
def no_assets() -> None:
    pass


@dagster_job
def plain_job() -> None:
    no_assets()


def run(instance, partition: str, *, fail: bool = False) -> str:
    FAIL["on"] = fail
    try:
        result = materialize([daily], instance=instance, partition_key=partition, raise_on_error=False)
    finally:
        FAIL["on"] = False
    return result.run_id


def run_ids(instance) -> set[str]:
    return {r.run_id for r in instance.get_runs()}


def latest_run_of(instance, partition: str) -> str:
    from dagster import AssetRecordsFilter

    record = instance.fetch_materializations(
        AssetRecordsFilter(asset_key=AssetKey("daily"), asset_partitions=[partition]), limit=1
    ).records[0]
    return record.run_id


def test_delete_run_takes_its_materializations_with_it(dagster_instance):
    """Why prune_runs is careful: Dagster's delete_run removes the run's events, materializations included."""
    only = run(dagster_instance, "d1")
    assert dagster_instance.get_materialized_partitions(AssetKey("daily")) == {"d1"}
    dagster_instance.delete_run(only)
    assert dagster_instance.get_materialized_partitions(AssetKey("daily")) == set()


def test_prune_keeps_failures_and_latest_materializations(dagster_instance):
    superseded = run(dagster_instance, "d1")
    latest_d1 = run(dagster_instance, "d1")
    only_d2 = run(dagster_instance, "d2")
    failed = run(dagster_instance, "d3", fail=True)
    no_materialization = plain_job.execute_in_process(instance=dagster_instance).run_id
    assert dagster_instance.get_run_by_id(failed).status == DagsterRunStatus.FAILURE

    result = prune_successful_runs(dagster_instance, datetime.now(UTC) + timedelta(seconds=1))

    assert (result.deleted, result.kept_latest) == (2, 2)
    assert run_ids(dagster_instance) == {latest_d1, only_d2, failed}
    assert superseded not in run_ids(dagster_instance) and no_materialization not in run_ids(dagster_instance)
    # What the UI's partition view shows is unchanged: both partitions materialized, by their latest runs.
    assert dagster_instance.get_materialized_partitions(AssetKey("daily")) == {"d1", "d2"}
    assert latest_run_of(dagster_instance, "d1") == latest_d1


def test_only_runs_older_than_the_cutoff_go(dagster_instance):
    run(dagster_instance, "d1")
    run(dagster_instance, "d1")
    result = prune_successful_runs(dagster_instance, datetime.now(UTC) - timedelta(days=1))
    assert result.deleted == 0 and len(run_ids(dagster_instance)) == 2


def test_the_job_prunes_old_ops_history_and_refuses_a_zero_age(dagster_instance, warehouse_conn, database_url):
    old = datetime.now(UTC) - timedelta(days=30)
    for started in (old, datetime.now(UTC) - timedelta(minutes=1)):
        synced(warehouse_conn, "digitization-sync", "wb_orders", "a", started + timedelta(seconds=1), rows_fetched=5)
    # The run workers' claims (operations/workers.py): released old ones go, a live one stays whatever its age.
    warehouse_conn.execute(
        "INSERT INTO run_claims (run_id, root_run_id, worker_id, claimed_at, released_at, outcome) VALUES "
        "('old', 'old', 'w/1', now() - interval '30 days', now() - interval '30 days', 'success'), "
        "('new', 'new', 'w/1', now(), now(), 'success'), ('live', 'live', 'w/1', now() - interval '30 days', NULL, NULL)"
    )
    resources = {"warehouse": Warehouse(database_url=database_url)}
    result = prune_runs_job.execute_in_process(
        instance=dagster_instance,
        resources=resources,
        run_config={"ops": {"prune_runs_op": {"config": {"older_than_days": 7}}}},
    )
    assert result.success
    assert warehouse_conn.execute("SELECT count(*) FROM ops_feed_syncs").fetchone() == (1,)
    assert [r[0] for r in warehouse_conn.execute("SELECT run_id FROM run_claims ORDER BY run_id")] == ["live", "new"]
    assert warehouse_conn.execute("SELECT rows_fetched FROM ops_feed_sync_totals").fetchone() == (10,)
    assert result.dagster_run.tags["optima/queue"] == "maintenance"

    refused = prune_runs_job.execute_in_process(
        instance=dagster_instance,
        resources=resources,
        raise_on_error=False,
        run_config={"ops": {"prune_runs_op": {"config": {"older_than_days": 0}}}},
    )
    assert not refused.success
    failures = [e for e in refused.all_events if e.is_step_failure]
    assert "older_than_days must be at least 1, got 0" in failures[0].step_failure_data.error.message
    assert dagster_instance.get_runs(RunsFilter(statuses=[DagsterRunStatus.FAILURE]))
