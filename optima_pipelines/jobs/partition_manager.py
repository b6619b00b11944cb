"""partition-manager: the monthly range partitions of rnp_daily and its rollups.

The original's weekly job (cron ``0 3 * * 1`` UTC, declared in orchestration/cadences.py): every managed table
is ``PARTITION BY RANGE (day)`` with one partition per calendar month, named ``<table>_pYYYYMM``.
The manager makes sure every month from the retention horizon (OPTIMA_PARTITION_RETENTION_MONTHS
before the current Moscow month) to three months ahead has a partition, and drops partitions that
end on or before the horizon. Rows for days without a partition are not an error anywhere: the
recompute drops and counts them (assets/rnp.py).

The planning is a pure function (``plan_partitions``); the job only reads the catalog and runs the
plan, one transaction per table.

The same job keeps the raw landing of WB's answers (landing/store.py) to OPTIMA_LANDING_RETENTION_DAYS:
it publishes spools whose process died and deletes the landed day folders older than that.
"""

# No `from __future__ import annotations`: Dagster checks the op context annotation at definition time.
from datetime import date

from dagster import OpExecutionContext, Output, ScheduleDefinition, in_process_executor, job, op

from optima_pipelines.landing.store import process_landing
from optima_pipelines.orchestration.cadences import cadence, schedule_status
from optima_pipelines.orchestration.queues import PARTITION_MANAGER, queue_tags
from optima_pipelines.resources.warehouse import Warehouse
from optima_pipelines.settings import load_settings
from optima_pipelines.timeutil import today_moscow
from optima_pipelines.warehouse.table_partitions import (
    MANAGED_TABLES,
    PartitionPlan,
    apply_plan,
    list_partitions,
    plan_partitions,
)


def manage_partitions(warehouse: Warehouse, today: date, retention_months: int) -> list[PartitionPlan]:
    """Plan and apply for every managed table, one transaction per table."""
    plans = []
    for table in MANAGED_TABLES:
        with warehouse.transaction() as conn:
            plan = plan_partitions(table, list_partitions(conn, table), today, retention_months=retention_months)
            apply_plan(conn, plan)
        plans.append(plan)
    return plans


@op(name="manage_table_partitions")
def manage_table_partitions(context: OpExecutionContext, warehouse: Warehouse) -> Output[None]:
    """Creates the monthly partitions of rnp_daily and its rollups up to three months ahead and
    drops those older than OPTIMA_PARTITION_RETENTION_MONTHS."""
    retention = load_settings().partition_retention_months
    plans = manage_partitions(warehouse, today_moscow(), retention)
    created = [name for p in plans for name, _, _ in p.create]
    dropped = [name for p in plans for name in p.drop]
    context.log.info(
        f"retention {retention} months (keeping from {plans[0].horizon}): "
        f"created {len(created)} partitions, dropped {len(dropped)}"
    )
    return Output(
        None,
        metadata={
            "retention_months": retention,
            "horizon": plans[0].horizon.isoformat(),
            "created": created,
            "dropped": dropped,
        },
    )


@op(name="prune_landing")
def prune_landing(context: OpExecutionContext) -> Output[None]:
    """Publishes the landing spools of processes that died and deletes the landed days of WB's
    answers older than OPTIMA_LANDING_RETENTION_DAYS."""
    landing = process_landing()
    if landing is None:
        context.log.info("the landing is off (OPTIMA_LANDING_URL=off): nothing to keep")
        return Output(None, metadata={"landing": "off"})
    keep = load_settings().landing_retention_days
    published = landing.recover()
    gone = landing.prune(keep, today_moscow())
    context.log.info(
        f"landing {landing!r}: {len(published)} spool file(s) published, {len(gone)} day folder(s) past {keep} days deleted"
    )
    return Output(None, metadata={"retention_days": keep, "published": len(published), "deleted": gone})


@job(
    name="partition_manager",
    description="Weekly upkeep of the monthly table partitions of rnp_daily and its rollups, and of the raw "
    "landing of WB's answers (retention).",
    tags=queue_tags(PARTITION_MANAGER),
    # One short op: a subprocess per step would only add start-up time.
    executor_def=in_process_executor,
)
def partition_manager_job() -> None:
    manage_table_partitions()
    prune_landing()


_WEEKLY = cadence("partition_manager_weekly")

partition_manager_weekly = ScheduleDefinition(
    name=_WEEKLY.name,
    cron_schedule=_WEEKLY.cadence,
    execution_timezone=_WEEKLY.timezone,
    job=partition_manager_job,
    default_status=schedule_status(_WEEKLY.name),
    description="partition-manager: monthly table partitions 3 months ahead, older ones dropped by retention.",
)
