"""Every schedule of the deployment in one place: the original's ScheduleRegistry, as a list of cadences.

Times are Moscow unless the schedule says UTC. Dagster schedules do not catch up after downtime
(DESIGN.md §4.8): each job here is written so that a missed tick is healed by the next one.
"""

from __future__ import annotations

from dagster import (
    DefaultScheduleStatus,
    RunRequest,
    ScheduleDefinition,
    ScheduleEvaluationContext,
    SkipReason,
    schedule,
)

from optima_pipelines.assets.rnp import rnp_recompute_job
from optima_pipelines.jobs.partition_manager import partition_manager_job
from optima_pipelines.resources.warehouse import Warehouse
from optima_pipelines.sensors.rnp import merge_sync_requests
from optima_pipelines.timeutil import MOSCOW_TZ_NAME


@schedule(
    name="rnp_merge_sync",
    cron_schedule="0 6 * * *",
    execution_timezone=MOSCOW_TZ_NAME,
    job=rnp_recompute_job,
    default_status=DefaultScheduleStatus.RUNNING,
    description="rnp-merge-sync: every rollup and rnp_daily for the last 3 days of every active cabinet, plus "
    "self-healing: each of the last 90 days with orders but no rnp_daily rows.",
)
def rnp_merge_sync(context: ScheduleEvaluationContext, warehouse: Warehouse) -> list[RunRequest] | SkipReason:
    return merge_sync_requests(context, warehouse)


partition_manager_weekly = ScheduleDefinition(
    name="partition_manager_weekly",
    cron_schedule="0 3 * * 1",
    execution_timezone="UTC",
    job=partition_manager_job,
    default_status=DefaultScheduleStatus.RUNNING,
    description="partition-manager: monthly table partitions 3 months ahead, older ones dropped by retention.",
)


SCHEDULES = [rnp_merge_sync, partition_manager_weekly]
