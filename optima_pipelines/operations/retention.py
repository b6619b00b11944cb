"""Run retention: the nightly ``prune_runs`` job deletes old successful runs and keeps every failed one.

Dagster OSS keeps runs forever (DESIGN.md §4.15); the original kept successful jobs 24 h and
failed jobs forever (the dead letter). ``prune_runs`` deletes SUCCESS runs last updated more than
``OPTIMA_RUN_RETENTION_DAYS`` ago through the public ``DagsterInstance.delete_run``. Failed and
canceled runs are never touched.

``delete_run`` deletes *all* of a run's events, its asset materializations included, and the UI's
partition status (materialized or not) is computed from those events: deleting the only run that
materialized ``cabinet|day`` would turn that partition grey again (tests/dagster/test_operations_retention.py
shows it). So a run is deleted only when every materialization it produced has been superseded by
a later materialization of the same asset partition. The latest materialization of every
partition, with its metadata and its run, always survives; the history before it is pruned.

The same job also prunes our own history tables (``ops_feed_syncs``, ``ops_reaggregations``, ``sweep_outcomes``) by
the same age; the totals that /metrics reads are kept.
"""

# No `from __future__ import annotations` here: Dagster reads the op's config type from its annotation.

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from dagster import (
    AssetRecordsFilter,
    Config,
    DagsterEventType,
    DagsterInstance,
    DagsterRunStatus,
    Failure,
    OpExecutionContext,
    RunsFilter,
    ScheduleDefinition,
    job,
    op,
)

from optima_pipelines.operations import workers
from optima_pipelines.orchestration.cadences import cadence, schedule_status
from optima_pipelines.orchestration.queues import MAINTENANCE, queue_tags
from optima_pipelines.resources.warehouse import Warehouse
from optima_pipelines.settings import load_settings

PAGE = 200


@dataclass
class PruneResult:
    deleted: int = 0
    kept_latest: int = 0
    scanned: int = 0


def holds_latest_materialization(instance: DagsterInstance, run_id: str) -> bool:
    """Whether some asset partition's latest materialization came from this run."""
    records = instance.get_records_for_run(run_id, of_type=DagsterEventType.ASSET_MATERIALIZATION).records
    for record in records:
        if record.asset_key is None:
            continue
        partitions = [record.partition_key] if record.partition_key is not None else None
        latest = instance.fetch_materializations(
            AssetRecordsFilter(asset_key=record.asset_key, asset_partitions=partitions), limit=1
        ).records
        if latest and latest[0].storage_id == record.storage_id:
            return True
    return False


def prune_successful_runs(
    instance: DagsterInstance, updated_before: datetime, *, max_deletes: int = 5000, skip_run_id: str | None = None
) -> PruneResult:
    """Delete SUCCESS runs last updated before ``updated_before`` whose materializations are all superseded."""
    result = PruneResult()
    cursor: str | None = None
    while result.deleted < max_deletes:
        records = instance.get_run_records(
            RunsFilter(statuses=[DagsterRunStatus.SUCCESS], updated_before=updated_before),
            limit=PAGE,
            cursor=cursor,
            ascending=True,
        )
        if not records:
            break
        for record in records:
            run_id = record.dagster_run.run_id
            cursor = run_id
            result.scanned += 1
            if run_id == skip_run_id:
                continue
            if holds_latest_materialization(instance, run_id):
                result.kept_latest += 1
                continue
            instance.delete_run(run_id)
            result.deleted += 1
            if result.deleted >= max_deletes:
                break
    return result


def prune_ops_history(warehouse: Warehouse, finished_before: datetime) -> int:
    with warehouse.transaction() as conn:
        feeds = conn.execute("DELETE FROM ops_feed_syncs WHERE finished_at < %s", (finished_before,)).rowcount
        reaggs = conn.execute("DELETE FROM ops_reaggregations WHERE finished_at < %s", (finished_before,)).rowcount
        sweeps = conn.execute("DELETE FROM sweep_outcomes WHERE finished_at < %s", (finished_before,)).rowcount
        claims = workers.prune_claims(conn, finished_before)
    return feeds + reaggs + sweeps + claims


class PruneRunsConfig(Config):
    """``older_than_days``: unset reads OPTIMA_RUN_RETENTION_DAYS; ``max_deletes`` bounds one night's work."""

    older_than_days: int | None = None
    max_deletes: int = 5000


@op(description="Delete successful runs older than the retention age (failed runs are kept).")
def prune_runs_op(context: OpExecutionContext, config: PruneRunsConfig, warehouse: Warehouse) -> None:
    days = config.older_than_days if config.older_than_days is not None else load_settings().run_retention_days
    if days < 1:
        raise Failure(f"older_than_days must be at least 1, got {days}", allow_retries=False)
    cutoff = datetime.now(UTC) - timedelta(days=days)
    result = prune_successful_runs(context.instance, cutoff, max_deletes=config.max_deletes, skip_run_id=context.run_id)
    history = prune_ops_history(warehouse, cutoff)
    from optima_pipelines.orchestration.run_launcher import prune_broker

    broker = prune_broker(timedelta(days=days))
    context.log.info(
        f"deleted {result.deleted} successful runs older than {days} days; kept {result.kept_latest} that hold "
        f"a partition's latest materialization; pruned {history} ops history rows and {broker} run broker rows"
    )
    context.add_output_metadata(
        {
            "runs_deleted": result.deleted,
            "runs_kept_latest_materialization": result.kept_latest,
            "runs_scanned": result.scanned,
            "ops_history_rows_deleted": history,
            "run_broker_rows_deleted": broker,
            "older_than_days": days,
        }
    )


@job(
    name="prune_runs",
    tags=queue_tags(MAINTENANCE),
    description="Run retention: deletes old successful runs, keeps failed ones and every partition's latest "
    "materialization.",
)
def prune_runs_job() -> None:
    prune_runs_op()


_NIGHTLY = cadence("prune_runs_nightly")

prune_runs_schedule = ScheduleDefinition(
    name=_NIGHTLY.name,
    job=prune_runs_job,
    cron_schedule=_NIGHTLY.cadence,
    execution_timezone=_NIGHTLY.timezone,
    default_status=schedule_status(_NIGHTLY.name),
    description="Nightly run retention (02:40 Moscow, before the 03:00 backfills).",
)
